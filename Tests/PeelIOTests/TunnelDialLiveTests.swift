import CCurl
@testable import PeelIO
import Glibc
import Synchronization
import XCTest

/// An upstream on a loopback port that reads one request head and writes `answer`, then holds
/// the connection until the test ends.
private final class CannedUpstream: @unchecked Sendable {
    let port: Int
    private let listener: Int32
    private let done = Atomic<Bool>(false)

    init(answer: [UInt8]) throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(.EMFILE) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { p -> Bool in
                bind(fd, p, len) == 0 && listen(fd, 4) == 0 && getsockname(fd, p, &len) == 0
            }
        }
        guard bound else {
            close(fd)
            throw POSIXError(.EADDRINUSE)
        }
        listener = fd
        port = Int(UInt16(bigEndian: addr.sin_port))
        let l = listener
        Thread.detachNewThread { [self] in
            let c = accept(l, nil, nil)
            guard c >= 0 else { return }
            var got: [UInt8] = []
            var buf = [UInt8](repeating: 0, count: 4096)
            while !got.suffix(4).elementsEqual([13, 10, 13, 10]) {
                let n = recv(c, &buf, buf.count, 0)
                if n <= 0 { break }
                got += buf[0..<n]
            }
            var sent = 0
            while sent < answer.count {
                let n = answer.withUnsafeBytes { send(c, $0.baseAddress! + sent, answer.count - sent, Int32(MSG_NOSIGNAL)) }
                if n <= 0 { break }
                sent += n
            }
            while !done.load(ordering: .relaxed) { usleep(10_000) }
            close(c)
        }
    }

    deinit {
        done.store(true, ordering: .relaxed)
        close(listener)
    }
}

/// The dial's life against a real socket: the hand-over to the tunnel, and the memory budget a
/// non-101 answer is held under.
final class TunnelDialLiveTests: XCTestCase {
    private var loop: EventLoop!

    override func setUpWithError() throws {
        loop = try EventLoop()
        loop.startThread()
    }

    override func tearDown() {
        loop.stop()
        // Joined, not left running: a thread outliving its test is a leak (ThreadSanitizer says so).
        loop.join()
        loop = nil
    }

    /// Dials `upstream` on the loop; `then` runs on the loop with the opening and the dial.
    private func dial(_ upstream: CannedUpstream, budget: MemoryBudget? = nil, client: String? = nil,
                      then: @escaping (TunnelOpening, TunnelDial) -> Void) throws {
        let endpoint = try UpstreamEndpoint(origin: "http://127.0.0.1:\(upstream.port)")
        nonisolated(unsafe) let request = UpstreamRequest(method: "GET", target: .origin(endpoint, path: "/ws", query: nil),
                                      relayed: ResponseHeaders([("Sec-WebSocket-Version", "13")]))
        var defaults = UpstreamOptions()
        defaults.budget = budget
        let options = defaults
        let finished = expectation(description: "the dial reports")
        let loop = loop!
        nonisolated(unsafe) let run = then
        loop.execute {
            nonisolated(unsafe) var held: TunnelDial?
            held = TunnelDial(loop: loop, request: request, upgrade: "websocket", defaults: options, clientAddress: client) { opening in
                // Reported on a later pass than the dial's creation: `held` is set.
                loop.defer {
                    run(opening, held!)
                    finished.fulfill()
                }
            }
        }
        wait(for: [finished], timeout: 10)
    }

    func testAfterTheHandOver_curlCallsNothingOfTheDials_whenTheTunnelCloses() throws {
        let upstream = try CannedUpstream(answer: Array("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\nearly".utf8))
        nonisolated(unsafe) var stray = -1
        nonisolated(unsafe) var early: [UInt8] = []
        try dial(upstream) { opening, dial in
            guard case .switched(let up) = opening else { return }
            early = up.early
            // Anything that makes curl report sockets or its timer on the tunnel's multi (a handle
            // added, one removed at the tunnel's end) must reach no one: in the gateway the dial is
            // freed by then.
            guard let multi = up.multi, let probe = curl_easy_init() else { return }
            if curl_multi_add_handle(multi, probe) == CURLM_OK { _ = curl_multi_remove_handle(multi, probe) }
            curl_easy_cleanup(probe)
            up.close()
            stray = dial.strayCallbacks
        }
        XCTAssertEqual(String(decoding: early, as: UTF8.self), "early", "the bytes after the 101 go to the tunnel")
        XCTAssertEqual(stray, 0, "curl called back into the dial after the hand-over")
    }

    func testANon101Answer_isHeldUnderTheMemoryBudget_untilItsAnswerGoes() throws {
        let body = [UInt8](repeating: 0x61, count: 100_000)
        let upstream = try CannedUpstream(answer: Array("HTTP/1.1 403 Forbidden\r\nContent-Length: 100000\r\n\r\n".utf8) + body)
        let budget = MemoryBudget(limit: 1 << 20, perClient: 512 << 10)
        nonisolated(unsafe) var heldWhileAnswered = 0
        nonisolated(unsafe) var clientWhileAnswered = 0
        nonisolated(unsafe) var status = 0
        try dial(upstream, budget: budget, client: "192.0.2.9") { opening, _ in
            guard case .answered(let response) = opening else { return }
            status = response.status
            heldWhileAnswered = budget.bytes
            clientWhileAnswered = budget.held(by: "192.0.2.9")
        }
        XCTAssertEqual(status, 403)
        XCTAssertGreaterThanOrEqual(heldWhileAnswered, 100_000, "the body counts while its answer is held")
        XCTAssertEqual(clientWhileAnswered, heldWhileAnswered, "past the allowance it is its client's")
        // The loop lets go of the answer just after the report; polled, not slept.
        let deadline = Date().addingTimeInterval(2)
        while budget.bytes > 0 && Date() < deadline { usleep(1000) }
        XCTAssertEqual(budget.bytes, 0, "given back once the answer went")
        XCTAssertEqual(budget.held(by: "192.0.2.9"), 0)
    }

    func testANon101AnswerOverTheBudget_isRefused_withNothingHeld() throws {
        let body = [UInt8](repeating: 0x61, count: 200_000)
        let upstream = try CannedUpstream(answer: Array("HTTP/1.1 404 Not Found\r\nContent-Length: 200000\r\n\r\n".utf8) + body)
        let budget = MemoryBudget(limit: 64 << 10)
        nonisolated(unsafe) var failure: UpstreamFailure?
        try dial(upstream, budget: budget) { opening, _ in
            if case .failed(let f, _) = opening { failure = f }
        }
        XCTAssertEqual(failure, .overBudget)
        XCTAssertEqual(budget.bytes, 0)
    }
}
