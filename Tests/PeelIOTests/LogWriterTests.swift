import Foundation
import Glibc
import PeelIO
import XCTest

/// The log writer's bounds: the queue (`--log-buffer`) and the pipe it writes to.
final class LogWriterTests: XCTestCase {
    private func pipePair() throws -> (read: Int32, write: Int32) {
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        return (fds[0], fds[1])
    }

    private func pipeMaxSize() -> Int {
        (try? String(contentsOfFile: "/proc/sys/fs/pipe-max-size", encoding: .utf8))
            .flatMap { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) } ?? 1 << 20
    }

    /// A bursty reader takes what the pipe holds when it wakes: Linux's 64 KiB pipe is grown toward
    /// the log buffer, as far as `fs.pipe-max-size` lets an unprivileged process.
    func testWidenPipe_growsAPipeTowardTheBufferAndLeavesOtherFilesAlone() throws {
        let (r, w) = try pipePair()
        defer { close(r); close(w) }
        let writer = LogWriter(fd: w, capacity: 4 << 20)
        XCTAssertEqual(fcntl(w, 1032), 65_536, "a fresh pipe")
        let size = try XCTUnwrap(writer.widenPipe(to: 4 << 20))
        XCTAssertEqual(size, min(4 << 20, pipeMaxSize()))
        XCTAssertEqual(Int(fcntl(w, 1032)), size)
        XCTAssertEqual(writer.widenPipe(to: 65_536), size, "never shrinks")
        let devNull = open("/dev/null", O_WRONLY | O_CLOEXEC)
        defer { close(devNull) }
        XCTAssertNil(LogWriter(fd: devNull, capacity: 1 << 20).widenPipe(to: 4 << 20), "not a pipe")
    }

    /// Past `capacity` bytes waiting, lines are dropped and counted, never waited for; a larger
    /// capacity set later holds more.
    func testCapacity_boundsWhatWaitsAndCanBeChanged() throws {
        // Both ends stay open: the writer's thread stays blocked on the full pipe (closing the
        // read end would raise SIGPIPE in this process).
        let (_, w) = try pipePair()
        let writer = LogWriter(fd: w, capacity: 65_536)
        let line = [UInt8](repeating: 0x61, count: 8191) + [0x0A]
        // Nobody reads: the pipe (64 KiB) and the queue fill, then lines are dropped.
        var accepted = 0
        for _ in 0..<64 where writer.submit(line, lines: 1) { accepted += 1 }
        XCTAssertLessThan(accepted, 64)
        XCTAssertEqual(writer.dropped, 64 - accepted)
        writer.capacity = 1 << 20
        XCTAssertTrue(writer.submit(line, lines: 1), "the larger capacity takes more")
    }
}
