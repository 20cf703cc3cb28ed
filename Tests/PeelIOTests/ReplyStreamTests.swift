import Dispatch
import Foundation
@testable import PeelIO
import XCTest

/// Streamed answers from Peel's HTTP/1.1 server: chunked for HTTP/1.1, close-delimited for 1.0.
final class ReplyStreamTests: XCTestCase {
    /// A server whose handler streams `pieces` 20 ms apart, then finishes.
    private final class StreamingServer: @unchecked Sendable {
        let loop: EventLoop
        var server: HTTPServer?
        var timers: [LoopTimer] = []

        init(pieces: [String]) throws {
            loop = try EventLoop()
            let ready = DispatchSemaphore(value: 0)
            let failure = Locked<String?>(nil)
            loop.execute { [self] in
                do {
                    server = try HTTPServer(loop: loop, address: HostPort(host: "127.0.0.1", port: 0), reusePort: false) { [self] ex in
                        guard let stream = ex.startStream(status: 200, fields: ReplyFields([("Content-Type", "text/event-stream")])) else { return }
                        var left = pieces[...]
                        var timer: LoopTimer?
                        timer = LoopTimer(loop: loop) {
                            guard let next = left.popFirst() else {
                                stream.finish()
                                return
                            }
                            stream.write(Array(next.utf8))
                            timer?.arm(seconds: 0.02)
                        }
                        timers.append(timer!)
                        timer?.arm(seconds: 0.02)
                    }
                } catch {
                    failure.withLock { $0 = "\(error)" }
                }
                ready.signal()
            }
            loop.startThread()
            ready.wait()
            if let e = failure.withLock({ $0 }) { throw NSError(domain: e, code: 1) }
        }

        var port: Int { server?.port ?? 0 }

        func stop() {
            loop.execute { [self] in
                server?.close()
                timers.removeAll()
                loop.stop()
            }
            loop.join()
        }
    }

    func testStream_http11IsChunkedAndTheConnectionStaysUsable() throws {
        let s = try StreamingServer(pieces: ["data: 1\n\n", "data: 2\n\n", "data: 3\n\n"])
        defer { s.stop() }
        let c = try BlockingClient(host: "127.0.0.1", port: s.port)
        for _ in 0..<2 {
            try c.send("GET /events HTTP/1.1\r\nHost: x\r\n\r\n")
            let r = try c.readResponse()
            XCTAssertEqual(r.status, 200)
            XCTAssertEqual(r.header("Transfer-Encoding"), "chunked")
            XCTAssertNil(r.header("Content-Length"))
            XCTAssertEqual(r.text, "data: 1\n\ndata: 2\n\ndata: 3\n\n")
        }
    }

    func testStream_http10IsDelimitedByTheClose() throws {
        let s = try StreamingServer(pieces: ["a", "b"])
        defer { s.stop() }
        let c = try BlockingClient(host: "127.0.0.1", port: s.port)
        try c.send("GET /events HTTP/1.0\r\n\r\n")
        let r = try c.readResponse()
        XCTAssertEqual(r.status, 200)
        XCTAssertNil(r.header("Transfer-Encoding"))
        XCTAssertEqual(r.header("Connection")?.lowercased(), "close")
        XCTAssertEqual(r.text, "ab")
    }

    func testStream_headAnswersTheHeadOnly() throws {
        let s = try StreamingServer(pieces: ["never sent"])
        defer { s.stop() }
        let c = try BlockingClient(host: "127.0.0.1", port: s.port)
        try c.send("HEAD /events HTTP/1.1\r\nHost: x\r\n\r\nGET /events HTTP/1.1\r\nHost: x\r\n\r\n")
        let h = try c.readResponse(head: true)
        XCTAssertEqual(h.status, 200)
        XCTAssertTrue(h.body.isEmpty)
        // The next answer on the connection starts right after the head: nothing of the body leaked.
        XCTAssertEqual(try c.readResponse().text, "never sent")
    }
}
