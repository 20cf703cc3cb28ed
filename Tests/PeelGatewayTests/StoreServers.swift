import Foundation
import PeelIO
import XCTest

/// A test fixture that could not be set up: the test fails (make test installs what they need).
struct FixtureError: Error, CustomStringConvertible {
    var description: String
}

/// A value handed to the loop thread, which alone touches it.
final class UncheckedBox<T>: @unchecked Sendable {
    let value: T
    init(_ value: T) { self.value = value }
}

/// Debian's redis-server on a free port, nothing persisted; stopped by `stop()`. Started with
/// posix_spawn: Foundation's Process reads past a buffer while closing descriptors, which
/// AddressSanitizer reports (make sanitize).
final class RedisServer {
    let port: Int
    private var pid: pid_t = 0

    init(extraArguments: [String] = []) throws {
        guard let path = ["/usr/bin/redis-server", "/usr/local/bin/redis-server"].first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            throw FixtureError(description: "redis-server is not installed (scripts/install-deps.sh redis-server; make unit installs it)")
        }
        port = Self.freePort()
        let arguments = [path, "--port", "\(port)", "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"] + extraArguments
        var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        defer { for a in argv { free(a) } }
        var actions = posix_spawn_file_actions_t()
        guard posix_spawn_file_actions_init(&actions) == 0 else { throw FixtureError(description: "posix_spawn_file_actions_init failed") }
        defer { posix_spawn_file_actions_destroy(&actions) }
        guard posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0) == 0,
              posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0) == 0 else {
            throw FixtureError(description: "posix_spawn_file_actions_addopen failed")
        }
        let rc = posix_spawn(&pid, path, &actions, nil, &argv, environ)
        guard rc == 0 else {
            XCTFail("redis-server did not spawn: \(String(cString: strerror(rc)))")
            return
        }
        // Ready once it accepts connections.
        for _ in 0..<200 {
            if Self.accepts(port) { return }
            usleep(25_000)
        }
        stop()
        XCTFail("redis-server did not start on \(port)")
    }

    func stop() {
        guard pid > 0 else { return }
        kill(pid, SIGTERM)
        var status: Int32 = 0
        _ = waitpid(pid, &status, 0)
        pid = 0
    }

    private static func freePort() -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var a = sockaddr_in()
        a.sin_family = sa_family_t(AF_INET)
        a.sin_addr.s_addr = inet_addr("127.0.0.1")
        a.sin_port = 0
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafePointer(to: &a) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, len) } }
        _ = withUnsafeMutablePointer(to: &a) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) } }
        return Int(UInt16(bigEndian: a.sin_port))
    }

    private static func accepts(_ port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var a = sockaddr_in()
        a.sin_family = sa_family_t(AF_INET)
        a.sin_addr.s_addr = inet_addr("127.0.0.1")
        a.sin_port = in_port_t(UInt16(port).bigEndian)
        return withUnsafePointer(to: &a) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        } == 0
    }
}

/// A TCP listener on a free loopback port that hands each accepted socket to `serve` on its own
/// thread.
final class FakeStore: @unchecked Sendable {
    let port: Int
    private let fd: Int32
    private let stopped = Locked(false)

    init(_ serve: @escaping @Sendable (Int32) -> Void) throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        self.fd = fd
        var one: Int32 = 1
        _ = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var a = sockaddr_in()
        a.sin_family = sa_family_t(AF_INET)
        a.sin_addr.s_addr = inet_addr("127.0.0.1")
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafePointer(to: &a) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, len) } }
        guard bound == 0, listen(fd, 64) == 0 else { throw FixtureError(description: "cannot listen on loopback") }
        _ = withUnsafeMutablePointer(to: &a) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) } }
        port = Int(UInt16(bigEndian: a.sin_port))
        let listener = fd
        let stopped = self.stopped
        OSThread.detach {
            while !stopped.withLock({ $0 }) {
                let c = accept(listener, nil, nil)
                if c < 0 { return }
                OSThread.detach { serve(c) }
            }
        }
    }

    func stop() {
        stopped.withLock { $0 = true }
        shutdown(fd, Int32(SHUT_RDWR))
        close(fd)
    }
}
