import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// Writing to stdout and stderr without `FileHandle.write(_:)`, whose `try!` crashes on a closed pipe.

/// Writes to stdout. A reader that went away (`crdt-sync list | head`) ends the command quietly
/// with status 0, as the output it wanted was written; another failure is reported, status 1.
func writeStandardOutput(_ data: Data) {
    guard let error = writeAll(data, to: STDOUT_FILENO) else { return }
    if error == EPIPE { exit(0) }
    writeStandardError(Data("crdt-sync: error: cannot write to stdout: \(String(cString: strerror(error)))\n".utf8))
    exit(1)
}

/// Writes to stderr; a failure is ignored (there is nowhere left to report it).
func writeStandardError(_ data: Data) {
    _ = writeAll(data, to: STDERR_FILENO)
}

/// Writes all of `data`; returns the errno of a failed write, nil when everything was written.
private func writeAll(_ data: Data, to descriptor: Int32) -> Int32? {
    data.withUnsafeBytes { buffer -> Int32? in
        var offset = 0
        while offset < buffer.count {
            let written = write(descriptor, buffer.baseAddress! + offset, buffer.count - offset)
            if written < 0 {
                if errno == EINTR { continue }
                return errno
            }
            offset += written
        }
        return nil
    }
}
