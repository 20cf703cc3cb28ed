import Foundation
import PeelDemo
import PeelGateway
import PeelIO
import XCTest

/// A fake upstream and a real gateway, both on port 0, torn down by `stop()`.
final class Harness: @unchecked Sendable {
    let upstream: DemoUpstream
    let gateway: Gateway
    var port: Int { gateway.port }
    var adminPort: Int { gateway.adminPort ?? 0 }

    init(workers: Int = 2, _ configure: (inout GatewayConfig) -> Void = { _ in }) throws {
        upstream = try DemoUpstream(listen: HostPort(host: "127.0.0.1", port: 0))
        try upstream.start()
        var c = GatewayConfig()
        c.upstream = try UpstreamURL.parse(upstream.baseURL).get()
        c.listeners.client = HostPort(host: "127.0.0.1", port: 0)
        c.listeners.admin = HostPort(host: "127.0.0.1", port: 0)
        c.listeners.workers = workers
        c.logs.access = false
        c.probe.path = "/__demo/health"
        configure(&c)
        gateway = Gateway(config: c)
        try gateway.start()
    }

    func stop() {
        gateway.shutdown()
        upstream.stop()
    }

    /// One request on a fresh connection.
    func request(_ method: String = "GET", _ path: String, headers: [(String, String)] = [], body: [UInt8] = [],
                 timeout: Double = 10) throws -> BlockingClient.Response {
        let c = try BlockingClient(host: "127.0.0.1", port: port, timeout: timeout)
        var head = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\n"
        for (k, v) in headers { head += "\(k): \(v)\r\n" }
        if !body.isEmpty || ["POST", "PUT", "PATCH"].contains(method) { head += "Content-Length: \(body.count)\r\n" }
        head += "\r\n"
        try c.send(Array(head.utf8) + body)
        return try c.readResponse(head: method == "HEAD")
    }

    /// Raw bytes on a fresh connection; returns the response.
    func raw(_ bytes: String, timeout: Double = 5, head: Bool = false) throws -> BlockingClient.Response {
        let c = try BlockingClient(host: "127.0.0.1", port: port, timeout: timeout)
        try c.send(bytes)
        return try c.readResponse(head: head)
    }

    func admin(_ path: String) throws -> BlockingClient.Response {
        guard let r = BlockingClient.get(host: "127.0.0.1", port: adminPort, path: path) else {
            throw BlockingClient.Failure.closed
        }
        return r
    }

    /// Polls `condition` every 20 ms for up to `seconds`.
    func eventually(_ seconds: Double = 3, _ condition: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if condition() { return true }
            usleep(20_000)
        }
        return condition()
    }
}

/// The problem document as a dictionary.
func problem(_ r: BlockingClient.Response, file: StaticString = #filePath, line: UInt = #line) -> [String: Any] {
    XCTAssertEqual(r.header("Content-Type"), "application/problem+json", "not a problem: \(r.text)", file: file, line: line)
    let obj = try? JSONSerialization.jsonObject(with: Data(r.body)) as? [String: Any]
    XCTAssertNotNil(obj, "problem body is not a JSON object: \(r.text)", file: file, line: line)
    return obj ?? [:]
}

/// The demo's echo answer (data of /api/echo) as a dictionary.
func echo(_ r: BlockingClient.Response, file: StaticString = #filePath, line: UInt = #line) -> [String: Any] {
    XCTAssertEqual(r.status, 200, r.text, file: file, line: line)
    return (try? JSONSerialization.jsonObject(with: Data(r.body)) as? [String: Any]) ?? [:]
}

func echoedHeaders(_ e: [String: Any]) -> [(String, String)] {
    ((e["headers"] as? [[String]]) ?? []).compactMap { $0.count == 2 ? ($0[0], $0[1]) : nil }
}

/// Waits up to `seconds` for `condition`, polling every 2 ms; returns its last value.
func waitFor(_ seconds: Double, _ condition: () -> Bool) -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if condition() { return true }
        usleep(2_000)
    }
    return condition()
}

/// One request to `h` on a fresh connection, with `Host: api.example` and these fields.
func sendRequest(_ h: RawHarness, _ method: String, _ path: String, _ fields: [(String, String)] = [],
          body: String = "") throws -> BlockingClient.Response {
    let c = try BlockingClient(host: "127.0.0.1", port: h.port, timeout: 10)
    var head = "\(method) \(path) HTTP/1.1\r\nHost: api.example\r\nConnection: close\r\n"
    for (n, v) in fields { head += "\(n): \(v)\r\n" }
    if !body.isEmpty || method == "PUT" || method == "POST" { head += "Content-Length: \(body.utf8.count)\r\n" }
    try c.send(head + "\r\n" + body)
    return try c.readResponse(head: method == "HEAD")
}

extension GatewayConfig {
    /// Probes that notice an upstream going away within about half a second: every 0.1 s, 0.3 s
    /// each and to connect, offline after 2 failures, back after 1 success.
    mutating func probeQuickly() {
        probe.interval = 0.1
        probe.timeout = 0.3
        calls.connectTimeout = 0.3
        probe.fall = 2
        probe.rise = 1
    }
}
