import Foundation
import NotesCRDT

extension SyncBundle {
    /// The bytes of the file at `url`, which is to be read as a bundle: at most `maxBytes` of
    /// them are ever read (a larger file is refused without reading it whole).
    ///
    /// - Throws: `SyncError` `.io` when the file cannot be read, `.tooLarge` when it is larger
    ///   than a bundle may be. The message does not name the file (`SyncError.at(_:)` does).
    public static func readFile(at url: URL) throws -> [UInt8] {
        var isFolder: ObjCBool = false
        if FileManager.default.fileExists(atPath: url.path, isDirectory: &isFolder), isFolder.boolValue {
            throw SyncError(.io, "is a folder, not a bundle file (give the bundle files in it, or sync with the folder as a remote: `crdt-sync remote add NAME --dir FOLDER`)")
        }
        let handle: FileHandle
        do {
            handle = try FileHandle(forReadingFrom: url)
        } catch {
            throw SyncError(.io, "cannot be read (no such file, or no permission)")
        }
        defer { try? handle.close() }
        do {
            // One byte more than a bundle may hold tells a file that is too large.
            let data = try handle.read(upToCount: maxBytes + 1) ?? Data()
            guard data.count <= maxBytes else {
                // A device or a pipe has no size to seek to: it gave more than a bundle may hold.
                guard let size = try? handle.seekToEnd(), size > UInt64(maxBytes) else {
                    throw SyncError(.tooLarge, "the file holds more than \(maxBytes) bytes, the most a bundle may (a device or a pipe?)")
                }
                throw SyncError(.tooLarge, "the file is \(size) bytes, larger than a bundle may be (\(maxBytes) bytes)")
            }
            return [UInt8](data)
        } catch let error as SyncError {
            throw error
        } catch {
            throw SyncError(.io, "cannot be read (\(error.localizedDescription))")
        }
    }
}
