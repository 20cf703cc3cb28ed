import Foundation
import PeelGateway
import PeelIO
import XCTest

/// A fake upstream on raw sockets whose every answer a test scripts byte for byte: `respond` gets
/// each whole request (with its connection's number and its place on that connection) and says what
/// to do. Runs on its own loop thread; port 0.
final class RawUpstream: @unchecked Sendable {
    // Unchecked: `server`, `open` and the buffers are only touched on `loop`'s thread; `seen` and
    // `connectionCount` are locked.

    /// One whole request as received.
    struct Request: Sendable {
        let method: String
        let path: String
        let headers: [(String, String)]
        let body: [UInt8]
        /// 1 for the first connection accepted, 2 for the next…
        let connection: Int
        /// 1 for the first request on its connection, 2 for the next…
        let number: Int
    }

    /// What the fake does with a request.
    enum Reply: Sendable {
        /// Writes these bytes and keeps the connection open.
        case send(String)
        /// Writes these bytes, then closes.
        case sendThenClose(String)
        /// Writes the first bytes, then the second ones `after` seconds later, keeping the connection open.
        case sendInTwoParts(String, after: Double, String)
        /// Writes these bytes (binary: a coded body) and keeps the connection open.
        case sendBytes([UInt8])
        /// Closes without a byte.
        case close
        /// Closes without a byte, `after` seconds later (a request held, then lost).
        case closeAfter(Double)
    }

    private let loop: EventLoop
    private var server: TCPServer?
    private var open: [ObjectIdentifier: TCPConnection] = [:]
    private var timers: [LoopTimer] = []
    private let respond: @Sendable (Request) -> Reply
    private let seenRequests = Locked<[Request]>([])
    private let accepted = Locked(0)
    private let closedNumbers = Locked<[Int]>([])
    /// The bound port.
    let port: Int

    /// Listens on 127.0.0.1, port 0, and starts the loop thread.
    init(_ respond: @escaping @Sendable (Request) -> Reply) throws {
        loop = try EventLoop()
        self.respond = respond
        var adopt: ((TCPConnection) -> Void)?
        let server = try TCPServer(loop: loop, address: HostPort(host: "127.0.0.1", port: 0)) { adopt?($0) }
        self.server = server
        port = server.port
        adopt = { [unowned self] conn in self.adopt(conn) }
        loop.startThread()
    }

    /// `http://127.0.0.1:PORT`.
    var baseURL: String { "http://127.0.0.1:\(port)" }
    /// Every request received so far, in order.
    var requests: [Request] { seenRequests.withLock { $0 } }
    /// Connections accepted so far.
    var connections: Int { accepted.withLock { $0 } }
    /// The numbers of the connections closed so far (by either side), in order.
    var closed: [Int] { closedNumbers.withLock { $0 } }

    /// Closes the listener and every connection, and keeps the loop: from now on every connect is
    /// refused, as when the upstream's process is gone (issue 17: a close without an answer no
    /// longer counts toward fall, so that is how a test takes this upstream away).
    func closeListener() {
        let done = Locked(false)
        loop.execute { [self] in
            server?.close()
            server = nil
            for c in open.values { c.close() }
            open = [:]
            done.withLock { $0 = true }
        }
        while !done.withLock({ $0 }) { usleep(1000) }
    }

    /// Closes the listener only: connections already taken stay open and keep being served, as when
    /// a host drops off the network with calls in flight; every new connect is refused.
    func closeListenerOnly() {
        let done = Locked(false)
        loop.execute { [self] in
            server?.close()
            server = nil
            done.withLock { $0 = true }
        }
        while !done.withLock({ $0 }) { usleep(1000) }
    }

    /// Closes the listener and every connection, then stops the loop thread.
    func stop() {
        let loop = self.loop
        loop.execute { [self] in
            server?.close()
            server = nil
            for t in timers { t.cancel() }
            timers = []
            for c in open.values { c.close() }
            open = [:]
            loop.defer { loop.stop() }
        }
        loop.join()
    }

    private func adopt(_ conn: TCPConnection) {
        let number = accepted.withLock { n -> Int in n += 1; return n }
        let id = ObjectIdentifier(conn)
        open[id] = conn
        var buffer: [UInt8] = []
        var served = 0
        conn.onClose = { [weak self] in
            self?.open[id] = nil
            self?.closedNumbers.withLock { $0.append(number) }
        }
        conn.onData = { [weak self, unowned conn] bytes in
            guard let self else { return }
            buffer += bytes
            while let request = Self.parse(&buffer, connection: number, number: served + 1) {
                served += 1
                seenRequests.withLock { $0.append(request) }
                switch respond(request) {
                case .send(let text):
                    conn.write(text)
                case .sendBytes(let bytes):
                    conn.write(bytes)
                case .sendThenClose(let text):
                    conn.write(text)
                    conn.close()
                    return
                case .sendInTwoParts(let first, let delay, let second):
                    conn.write(first)
                    let timer = LoopTimer(loop: conn.loop) { [weak conn] in conn?.write(second) }
                    timer.arm(seconds: delay)
                    timers.append(timer)
                case .close:
                    conn.close()
                    return
                case .closeAfter(let delay):
                    let timer = LoopTimer(loop: conn.loop) { [weak conn] in conn?.close() }
                    timer.arm(seconds: delay)
                    timers.append(timer)
                }
            }
        }
    }

    /// Takes one whole request (head and Content-Length body) off the front of `buffer`.
    private static func parse(_ buffer: inout [UInt8], connection: Int, number: Int) -> Request? {
        let end: [UInt8] = [13, 10, 13, 10]
        guard buffer.count >= 4, let headEnd = (0...(buffer.count - 4)).first(where: { Array(buffer[$0..<$0 + 4]) == end }) else {
            return nil
        }
        let lines = String(decoding: buffer[..<headEnd], as: UTF8.self).components(separatedBy: "\r\n")
        let parts = lines[0].split(separator: " ")
        guard parts.count == 3 else { return nil }
        var headers: [(String, String)] = []
        var length = 0
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            let name = String(line[..<colon])
            let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            headers.append((name, value))
            if name.lowercased() == "content-length" { length = Int(value) ?? 0 }
        }
        let bodyStart = headEnd + 4
        guard buffer.count >= bodyStart + length else { return nil }
        let body = Array(buffer[bodyStart..<bodyStart + length])
        buffer.removeFirst(bodyStart + length)
        return Request(method: String(parts[0]), path: String(parts[1]), headers: headers, body: body,
                       connection: connection, number: number)
    }

    /// A whole 200 answer with `body` and the given extra head lines.
    static func answer(_ body: String, status: String = "200 OK", fields: [String] = []) -> String {
        var head = "HTTP/1.1 \(status)\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n"
        for f in fields { head += f + "\r\n" }
        return head + "\r\n" + body
    }

    /// A success envelope whose data is `data` (JSON text).
    static func envelope(_ data: String, fields: [String] = []) -> String {
        answer("{\"code\":0,\"message\":\"ok\",\"data\":\(data)}", fields: fields)
    }
}

/// A gateway (one worker unless told, so upstream connections are reused predictably) in front of
/// a RawUpstream whose probe path is `/probe`.
final class RawHarness {
    let upstream: RawUpstream
    let gateway: Gateway
    var port: Int { gateway.port }

    init(workers: Int = 1, configure: (inout GatewayConfig) -> Void = { _ in },
         _ respond: @escaping @Sendable (RawUpstream.Request) -> RawUpstream.Reply) throws {
        upstream = try RawUpstream(respond)
        var c = GatewayConfig()
        c.upstream = try UpstreamURL.parse(upstream.baseURL).get()
        c.listeners.client = HostPort(host: "127.0.0.1", port: 0)
        c.listeners.admin = nil
        c.listeners.workers = workers
        c.logs.access = false
        c.probe.path = "/probe"
        c.probe.interval = 60
        configure(&c)
        gateway = Gateway(config: c)
        try gateway.start()
    }

    func stop() {
        gateway.shutdown()
        upstream.stop()
    }

    /// One request on a fresh client connection.
    func request(_ method: String = "GET", _ path: String, body: [UInt8] = [], timeout: Double = 10) throws -> BlockingClient.Response {
        let c = try BlockingClient(host: "127.0.0.1", port: port, timeout: timeout)
        var head = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\n"
        if !body.isEmpty || ["POST", "PUT", "PATCH"].contains(method) { head += "Content-Length: \(body.count)\r\n" }
        try c.send(Array((head + "\r\n").utf8) + body)
        return try c.readResponse(head: method == "HEAD")
    }

    /// Requests to `path` the upstream has seen, probes excluded.
    func seen(_ path: String) -> [RawUpstream.Request] { upstream.requests.filter { $0.path == path } }
}
