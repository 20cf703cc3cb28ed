import Foundation
import PeelIO
import XCTest

@testable import PeelGateway

/// The shared store's connection against real servers and fakes that misbehave on purpose: a
/// Redis that needs a password, a port that accepts and closes, a reply too large to hold.
final class OfflineStoreConnectionTests: XCTestCase {
    // MARK: the password file

    func testPasswordFile_oneLineIsThePassword_spacesIncluded() throws {
        guard case .success(let c) = RedisPasswordFile.parse(Array("a pass word\n".utf8)) else { return XCTFail("refused") }
        XCTAssertNil(c.user)
        XCTAssertEqual(c.password, Array("a pass word".utf8))
        XCTAssertEqual(c.command, [Array("AUTH".utf8), Array("a pass word".utf8)])
        XCTAssertFalse(c.description.contains("pass word"), "the description shows the password")
    }

    func testPasswordFile_twoLinesAreAnACLUserAndItsPassword() throws {
        guard case .success(let c) = RedisPasswordFile.parse(Array("peel\r\ns3cret\r\n".utf8)) else { return XCTFail("refused") }
        XCTAssertEqual(c.user, Array("peel".utf8))
        XCTAssertEqual(c.command, [Array("AUTH".utf8), Array("peel".utf8), Array("s3cret".utf8)])
    }

    func testPasswordFile_refusesEmptyFilesUsersWithSpacesAndMoreLines() {
        for bad in ["", "\n", "a user\npw", "peel\n\n", "a\nb\nc"] {
            guard case .failure(let why) = RedisPasswordFile.parse(Array(bad.utf8)) else { return XCTFail("accepted \(bad.debugDescription)") }
            XCTAssertFalse(why.reason.isEmpty)
        }
    }

    func testPasswordFileOption_isShownByItsPathOnly_andAPasswordInTheURLIsRefused() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("peel-pw-\(getpid())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let pw = dir.appendingPathComponent("pw"), secret = dir.appendingPathComponent("secret")
        try "never-shown-7d1e\n".write(to: pw, atomically: true, encoding: .utf8)
        try "a secret of at least sixteen bytes".write(to: secret, atomically: true, encoding: .utf8)
        let c = try ConfigLoader.load(arguments: ["--upstream", "http://127.0.0.1:1", "--offline-cache", "1MiB",
                                                  "--offline-store", "redis://127.0.0.1:6379", "--offline-store-secret-file", secret.path,
                                                  "--offline-store-password-file", pw.path], environment: [:])
        XCTAssertEqual(c.offline.storeCredentials?.password, Array("never-shown-7d1e".utf8))
        let shown = ConfigLoader.describe(c)
        XCTAssertTrue(shown.contains(pw.path))
        XCTAssertFalse(shown.contains("never-shown-7d1e"), "check-config shows the password")
        XCTAssertThrowsError(try ConfigLoader.load(arguments: ["--upstream", "http://127.0.0.1:1", "--offline-store",
                                                               "redis://:never-shown-7d1e@127.0.0.1:6379"], environment: [:])) { e in
            XCTAssertTrue("\(e)".contains("--offline-store-password-file"), "\(e)")
            XCTAssertFalse("\(e)".contains("never-shown-7d1e"), "the refusal echoes the password")
        }
    }

    // MARK: connections

    /// Connects a `RedisConnection` on its own loop and returns the first event it reports.
    /// With `linger`, the connection is left to run a few passes more (deferred frees) before it is closed.
    private func firstEvent(port: Int, credentials: RedisCredentials?, maxReply: Int = 1 << 20, linger: Bool = false) -> RedisConnectionEvent? {
        let loop: EventLoop
        do { loop = try EventLoop() } catch {
            XCTFail("\(error)")
            return nil
        }
        loop.startThread()
        defer {
            loop.stop()
            loop.join()
        }
        let got = Locked<RedisConnectionEvent?>(nil)
        let done = DispatchSemaphore(value: 0)
        let holder = Locked<UncheckedBox<RedisConnection>?>(nil)
        loop.execute {
            let c = RedisConnection(loop: loop, maxReply: maxReply, credentials: credentials)
            c.onEvent = { event in
                guard got.withLock({ $0 }) == nil else { return }
                got.withLock { $0 = event }
                done.signal()
            }
            holder.withLock { $0 = UncheckedBox(c) }
            c.connect(to: .tcp(host: "127.0.0.1", port: port), database: 0, timeout: 2)
        }
        _ = done.wait(timeout: .now() + 5)
        if linger { usleep(200_000) }
        let closed = DispatchSemaphore(value: 0)
        loop.execute {
            holder.withLock { $0?.value.close(); $0 = nil }
            closed.signal()
        }
        closed.wait()
        return got.withLock { $0 }
    }

    func testARedisWithRequirepass_withoutOrWithAWrongPassword_isAnAuthFailure_andTheRightOneConnects() throws {
        let redis = try RedisServer(extraArguments: ["--requirepass", "right-pw"])
        defer { redis.stop() }
        guard case .authFailed(let none)? = firstEvent(port: redis.port, credentials: nil) else {
            return XCTFail("no password: not reported as an authentication failure")
        }
        XCTAssertTrue(none.contains("NOAUTH"), none)
        guard case .authFailed(let wrong)? = firstEvent(port: redis.port, credentials: RedisCredentials(user: nil, password: Array("wrong".utf8))) else {
            return XCTFail("a wrong password: not reported as an authentication failure")
        }
        XCTAssertFalse(wrong.contains("wrong"), "the reason shows the password: \(wrong)")
        guard case .connected? = firstEvent(port: redis.port, credentials: RedisCredentials(user: nil, password: Array("right-pw".utf8))) else {
            return XCTFail("the right password did not connect")
        }
    }

    func testAPortThatAcceptsAndCloses_isNeverConnected() throws {
        let fake = try FakeStore { fd in close(fd) }
        defer { fake.stop() }
        switch firstEvent(port: fake.port, credentials: nil) {
        case .connectFailed?: break
        case let other: XCTFail("a TCP connect without a reply was taken for \(String(describing: other))")
        }
    }

    func testAReplyOverTheBound_dropsTheConnection_beforeItIsRead() throws {
        let sent = Locked(0)
        let fake = try FakeStore { fd in
            var buffer = [UInt8](repeating: 0, count: 4096)
            _ = read(fd, &buffer, buffer.count)
            var head = Array("$100000000\r\n".utf8)
            _ = write(fd, &head, head.count)
            var chunk = [UInt8](repeating: 0x78, count: 1 << 16)
            // Peel stops reading past its bound; a peer that keeps sending then fills the socket
            // buffers and gets its reset when Peel closes.
            while sent.withLock({ $0 }) < 100_000_000 {
                let n = write(fd, &chunk, chunk.count)
                if n <= 0 { break }
                sent.withLock { $0 += n }
            }
            close(fd)
        }
        defer { fake.stop() }
        guard case .connectFailed(let why)? = firstEvent(port: fake.port, credentials: nil, maxReply: 1 << 20) else {
            return XCTFail("a 100 MB reply was not refused")
        }
        XCTAssertTrue(why.contains("a reply over"), why)
        usleep(200_000)
        // What crossed: the bound, a read, and what the two sockets' buffers held.
        XCTAssertLessThan(sent.withLock { $0 }, 20_000_000, "the whole reply was read")
    }

    /// A store that answers the handshake's PING with an error and, in the same segment, a second
    /// reply nobody asked for. `abandon` (inside the PING's reply callback) defers `redisAsyncFree`;
    /// hiredis then meets the unrequested error reply in the same `redisProcessCallbacks` pass and
    /// frees the context itself (`__redisAsyncDisconnect`). The deferred free then frees it again:
    /// glibc aborts the process ("free(): double free detected" or similar), or the heap is corrupted.
    func testAnErrorReplyFollowedByAnotherReply_inOneRead_doesNotFreeTheContextTwice() throws {
        let fake = try FakeStore { fd in
            var buffer = [UInt8](repeating: 0, count: 4096)
            _ = read(fd, &buffer, buffer.count)
            var replies = Array("-ERR not now\r\n-ERR and again\r\n".utf8)
            _ = write(fd, &replies, replies.count)
            usleep(500_000)
            close(fd)
        }
        defer { fake.stop() }
        for _ in 0..<5 {
            guard case .connectFailed? = firstEvent(port: fake.port, credentials: nil, linger: true) else { return XCTFail("an error to PING was not a failed connect") }
        }
    }

    /// The reply bound counts only bytes not yet parsed; an array's elements are parsed (and kept as
    /// reply objects) as they arrive. An array of 64 arrays of 64 bulk strings of 16 KiB (64 MiB)
    /// passes a 1 MiB bound whole: every byte is read and held, where the README promises "at most the
    /// bound plus one 16 KiB read is held" and the issue "refused as they arrive, without buffering".
    /// Nested deeper (hiredis allows 7 levels of 64), one reply can make each worker hold gigabytes.
    func testANestedArrayReplyOverTheBound_isNotReadWhole() throws {
        let sent = Locked(0)
        let fake = try FakeStore { fd in
            var buffer = [UInt8](repeating: 0, count: 4096)
            _ = read(fd, &buffer, buffer.count)
            func send(_ bytes: [UInt8]) -> Bool {
                var off = 0
                while off < bytes.count {
                    let n = bytes[off...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
                    if n <= 0 { return false }
                    off += n
                    sent.withLock { $0 += n }
                }
                return true
            }
            let element = Array("$16384\r\n".utf8) + [UInt8](repeating: 0x78, count: 16_384) + Array("\r\n".utf8)
            var inner = Array("*64\r\n".utf8)
            for _ in 0..<64 { inner += element }
            guard send(Array("*64\r\n".utf8)) else { close(fd); return }
            for _ in 0..<64 where send(inner) {}
            usleep(300_000)
            close(fd)
        }
        defer { fake.stop() }
        _ = firstEvent(port: fake.port, credentials: nil, maxReply: 1 << 20, linger: true)
        usleep(300_000)
        // What may cross: the bound, a read, and the two sockets' buffers; 64 MiB crossed.
        XCTAssertLessThan(sent.withLock { $0 }, 20_000_000, "the whole 64 MiB nested reply was read and held")
    }
}
