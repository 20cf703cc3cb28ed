import Foundation
import PeelIO
import XCTest

/// A fake upstream whose answers the test hands out: the probe path is answered at once, every other
/// request is held, its connection open, until `release(_:with:)` writes the answer. So a test can
/// send, change something (reload), see it applied, and only then let the answer go, with no
/// guessed delays. Requests are read as bodiless (GET): a held request is known by its path.
/// Runs on its own loop thread; port 0.
final class HeldUpstream: @unchecked Sendable {
    // Unchecked: `server`, `open`, `held` and the buffers are only touched on `loop`'s thread; the
    // paths seen and lost are locked.

    private let loop: EventLoop
    private var server: TCPServer?
    private var open: [ObjectIdentifier: TCPConnection] = [:]
    /// Held requests by path, with their connection's identity.
    private var held: [String: (TCPConnection, ObjectIdentifier)] = [:]
    private let probePath: String
    private let arrivedPaths = Locked<[String]>([])
    private let lostPaths = Locked<[String]>([])
    /// The bound port.
    let port: Int

    /// Listens on 127.0.0.1, port 0, answering `probePath` with `{}` at once.
    init(probePath: String = "/probe") throws {
        loop = try EventLoop()
        self.probePath = probePath
        var adopt: ((TCPConnection) -> Void)?
        let server = try TCPServer(loop: loop, address: HostPort(host: "127.0.0.1", port: 0)) { adopt?($0) }
        self.server = server
        port = server.port
        adopt = { [unowned self] conn in self.adopt(conn) }
        loop.startThread()
    }

    /// `http://127.0.0.1:PORT`.
    var baseURL: String { "http://127.0.0.1:\(port)" }

    /// Whether every one of `paths` has arrived (and is held or was answered), waiting up to `seconds`.
    func waitForRequests(_ paths: [String], seconds: Double = 3) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if Set(paths).isSubset(of: arrivedPaths.withLock({ Set($0) })) { return true }
            usleep(2_000)
        }
        return Set(paths).isSubset(of: arrivedPaths.withLock({ Set($0) }))
    }

    /// Whether the connection holding `path` was closed (by Peel: a timeout, a cancel) before its
    /// answer was released.
    func lost(_ path: String) -> Bool { lostPaths.withLock { $0.contains(path) } }

    /// Writes `answer` (a whole HTTP/1.1 response) on the connection holding `path`; returns once it
    /// is handed to the socket, false when no such request is held.
    @discardableResult
    func release(_ path: String, with answer: String) -> Bool {
        let written = Locked<Bool?>(nil)
        loop.execute { [self] in
            guard let (conn, _) = held.removeValue(forKey: path) else { return written.withLock { $0 = false } }
            conn.write(answer)
            written.withLock { $0 = true }
        }
        while true {
            if let done = written.withLock({ $0 }) { return done }
            usleep(1_000)
        }
    }

    /// Closes the listener and every connection: from now on every connect is refused, as when the
    /// upstream's process is gone.
    func closeListener() {
        let done = Locked(false)
        loop.execute { [self] in
            server?.close()
            server = nil
            held = [:]
            for c in open.values { c.close() }
            open = [:]
            done.withLock { $0 = true }
        }
        while !done.withLock({ $0 }) { usleep(1_000) }
    }

    /// Closes everything, then stops the loop thread.
    func stop() {
        let loop = self.loop
        loop.execute { [self] in
            server?.close()
            server = nil
            held = [:]
            for c in open.values { c.close() }
            open = [:]
            loop.defer { loop.stop() }
        }
        loop.join()
    }

    private func adopt(_ conn: TCPConnection) {
        let id = ObjectIdentifier(conn)
        open[id] = conn
        var buffer: [UInt8] = []
        conn.onClose = { [weak self] in
            guard let self else { return }
            open[id] = nil
            // Closed while still held: the answer never got its chance.
            let gone = held.filter { $0.value.1 == id }.map(\.key)
            for path in gone { held[path] = nil }
            if !gone.isEmpty { lostPaths.withLock { $0 += gone } }
        }
        conn.onData = { [weak self, unowned conn] bytes in
            guard let self else { return }
            buffer += bytes
            while let path = Self.takeHead(&buffer) {
                arrivedPaths.withLock { $0.append(path) }
                if path == probePath {
                    conn.write(RawUpstream.answer("{}"))
                } else {
                    held[path] = (conn, id)
                }
            }
        }
    }

    /// Takes one request head off the front of `buffer`; its target.
    private static func takeHead(_ buffer: inout [UInt8]) -> String? {
        let end: [UInt8] = [13, 10, 13, 10]
        guard buffer.count >= 4, let headEnd = (0...(buffer.count - 4)).first(where: { Array(buffer[$0..<$0 + 4]) == end }) else {
            return nil
        }
        // Bytes, not Characters: "\r\n" is one Character, so a Character scan never finds a lone CR.
        let lineEnd = buffer.firstIndex(of: 13) ?? headEnd
        let requestLine = String(decoding: buffer[..<lineEnd], as: UTF8.self)
        buffer.removeFirst(headEnd + 4)
        let parts = requestLine.split(separator: " ")
        return parts.count == 3 ? String(parts[1]) : ""
    }
}
