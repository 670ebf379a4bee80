import Foundation
import NotesCRDT

extension SyncBundle {
    /// The bytes of the file at `url`, which is to be read as a bundle: at most `maxBytes` of
    /// them are ever read (a larger file is refused without reading it whole).
    ///
    /// - Throws: `SyncError` `.io` when the file cannot be read, `.tooLarge` when it is larger
    ///   than a bundle may be. The message does not name the file (`SyncError.at(_:)` does).
    public static func readFile(at url: URL) throws -> [UInt8] {
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
                let size = (try? handle.seekToEnd()).map { "\($0) bytes" } ?? "more than \(maxBytes) bytes"
                throw SyncError(.tooLarge, "the file is \(size), larger than a bundle may be (\(maxBytes) bytes)")
            }
            return [UInt8](data)
        } catch let error as SyncError {
            throw error
        } catch {
            throw SyncError(.io, "cannot be read (\(error.localizedDescription))")
        }
    }
}
