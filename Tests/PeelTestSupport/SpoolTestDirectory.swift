import Foundation

/// A fresh empty directory under the system's temporary one, removed with its contents at deinit.
public final class SpoolTestDirectory {
    public let path: String

    public init() throws {
        var template = Array(((getenv("TMPDIR").map { String(cString: $0) } ?? "/tmp") + "/peel-spool-test-XXXXXX").utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            // A scratch directory the tests cannot make is a failure of the run, not a reason to pass.
            throw Unmade(reason: String(cString: strerror(errno)))
        }
        path = String(cString: made)
    }

    /// Why the scratch directory could not be made.
    public struct Unmade: Error, CustomStringConvertible {
        let reason: String
        public var description: String { "mkdtemp failed: \(reason)" }
    }

    deinit {
        for name in (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? [] {
            try? FileManager.default.removeItem(atPath: path + "/" + name)
        }
        rmdir(path)
    }
}
