import Foundation
import PeelIO
import XCTest

@testable import PeelGateway

/// Review of issue 28: the shared store's connection and rules, cases the branch's tests missed.
final class Review28StoreTests: XCTestCase {
    /// Connects a `RedisConnection` on its own loop, waits for its first event, lets the loop run
    /// a few passes more (deferred frees), then closes it.
    private func connectOnce(port: Int, maxReply: Int = 1 << 20) -> RedisConnectionEvent? {
        guard let loop = try? EventLoop() else { XCTFail("no loop"); return nil }
        loop.startThread()
        defer {
            loop.stop()
            loop.join()
        }
        let got = Locked<RedisConnectionEvent?>(nil)
        let done = DispatchSemaphore(value: 0)
        let holder = Locked<UncheckedBox<RedisConnection>?>(nil)
        loop.execute {
            let c = RedisConnection(loop: loop, maxReply: maxReply, credentials: nil)
            c.onEvent = { event in
                guard got.withLock({ $0 }) == nil else { return }
                got.withLock { $0 = event }
                done.signal()
            }
            holder.withLock { $0 = UncheckedBox(c) }
            c.connect(to: .tcp(host: "127.0.0.1", port: port), database: 0, timeout: 2)
        }
        _ = done.wait(timeout: .now() + 5)
        usleep(200_000)
        let closed = DispatchSemaphore(value: 0)
        loop.execute {
            holder.withLock { $0?.value.close(); $0 = nil }
            closed.signal()
        }
        closed.wait()
        return got.withLock { $0 }
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
            guard case .connectFailed? = connectOnce(port: fake.port) else { return XCTFail("an error to PING was not a failed connect") }
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
        _ = connectOnce(port: fake.port, maxReply: 1 << 20)
        usleep(300_000)
        // What may cross: the bound, a read, and the two sockets' buffers; 64 MiB crossed.
        XCTAssertLessThan(sent.withLock { $0 }, 20_000_000, "the whole 64 MiB nested reply was read and held")
    }
}
