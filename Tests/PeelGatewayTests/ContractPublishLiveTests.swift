import Foundation
@testable import PeelGateway
import PeelIO
import XCTest

/// The contract Peel publishes on the admin listener (issue 34): each group's document, read off
/// the event loops, transformed under each route's dialect and moved under its prefix.
final class ContractPublishLiveTests: XCTestCase {
    private let samples = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("scripts/openapi")

    private func json(_ r: BlockingClient.Response) -> [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(r.body))) as? [String: Any] ?? [:]
    }

    /// The published document once it is there (the publisher reads on its own thread).
    private func published(_ h: Harness) throws -> [String: Any] {
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            let r = try h.admin("/_peel/openapi.json")
            if r.status == 200 { return json(r) }
            usleep(50_000)
        }
        XCTFail("no document published within 10 s")
        return [:]
    }

    func testAGroupsDocument_isPublishedUnderItsRoutesPrefix_andDialect() throws {
        let up = try RawUpstream { _ in .send(RawUpstream.answer(#"{"code":0,"msg":"","data":1}"#)) }
        defer { up.stop() }
        let file = samples.appendingPathComponent("yudao-springdoc.json").path
        let config = try loadConfig(file: """
            {"upstreams": {"admin": {"endpoints": ["\(up.baseURL)"], "openapi": {"file": "\(file)"}}},
             "routes": [{"prefix": "/y/", "upstream": "admin", "strip_prefix": true, "dialect": "yudao"}]}
            """, environment: [:])
        let h = try Harness { c in c.routing = config.routing }
        defer { h.stop() }
        let doc = try published(h)
        let paths = try XCTUnwrap(doc["paths"] as? [String: Any])
        XCTAssertEqual(Set(paths.keys), ["/y/admin-api/system/user/page", "/y/admin-api/system/user/get", "/y/admin-api/system/user/create",
                                         "/y/admin-api/system/user/delete", "/_peel/reachability"])
        let page = try XCTUnwrap(((paths["/y/admin-api/system/user/page"] as? [String: Any])?["get"] as? [String: Any])?["responses"] as? [String: Any])
        let schema = (((page["200"] as? [String: Any])?["content"] as? [String: Any])?["application/json"] as? [String: Any])?["schema"] as? [String: Any]
        let anyOf = schema?["anyOf"] as? [[String: String]]
        XCTAssertEqual(anyOf?.first, ["$ref": "#/components/schemas/PageResultUserRespVO"], "springdoc's data is optional: nullable")
        XCTAssertNotNil(page["204"])
        XCTAssertEqual(doc["openapi"] as? String, "3.1.0")
        let status = json(try h.admin("/status"))
        let state = ((status["openapi"] as? [String: Any])?["admin"] as? [String: Any])
        XCTAssertEqual(state?["state"] as? String, "ok")
        XCTAssertNotNil(state?["fetched_at"] as? String)
    }

    func testADocumentFetchedFromTheGroup_andOneThatFails_theOtherIsStillPublished_andStatusSaysWhich() throws {
        let wechat = try String(contentsOf: samples.appendingPathComponent("wechat-rest.json"), encoding: .utf8)
        let up = try RawUpstream { r in
            r.path == "/v3/api-docs" ? .send(RawUpstream.answer(wechat, fields: ["Content-Type: application/json"]))
                                     : .send(RawUpstream.answer(#"{"errcode":0,"errmsg":"ok"}"#))
        }
        defer { up.stop() }
        let config = try loadConfig(file: """
            {"upstreams": {"wx": {"endpoints": ["\(up.baseURL)"], "openapi": {"path": "/v3/api-docs"}},
                           "gone": {"endpoints": ["\(up.baseURL)"], "openapi": {"file": "/nonexistent/openapi.json"}}},
             "routes": [{"prefix": "/cgi-bin/", "upstream": "wx", "dialect": "wechat"}, {"prefix": "/g/", "upstream": "gone"}]}
            """, environment: [:])
        let h = try Harness { c in c.routing = config.routing }
        defer { h.stop() }
        let doc = try published(h)
        let paths = try XCTUnwrap(doc["paths"] as? [String: Any])
        XCTAssertNotNil(paths["/cgi-bin/token"], "\(paths.keys)")
        XCTAssertTrue(up.requests.contains { $0.path == "/v3/api-docs" })
        let states = (json(try h.admin("/status"))["openapi"] as? [String: Any]) ?? [:]
        XCTAssertEqual((states["wx"] as? [String: Any])?["state"] as? String, "ok")
        XCTAssertEqual((states["gone"] as? [String: Any])?["state"] as? String, "failing")
        XCTAssertEqual((states["gone"] as? [String: Any])?["error"] as? String, "cannot read /nonexistent/openapi.json")
    }

    func testAnHTTPSGroupsDocument_isFetchedOverTLS_asTheGroupsCallsAre() throws {
        // The upstream answers in plain HTTP before reading a byte: a TLS handshake reads that as
        // garbage, so a TLS error shows the fetch went over TLS.
        let up = try PlainGreeter()
        defer { up.stop() }
        let https = "https://127.0.0.1:\(up.port)"
        let config = try loadConfig(file: """
            {"upstreams": {"secure": {"endpoints": ["\(https)/base"], "openapi": {"path": "/v3/api-docs"}}},
             "routes": [{"prefix": "/", "upstream": "secure"}]}
            """, environment: [:])
        let h = try Harness { c in c.routing = config.routing }
        defer { h.stop() }
        let deadline = Date().addingTimeInterval(10)
        var state: [String: Any] = [:]
        while Date() < deadline {
            state = ((json(try h.admin("/status"))["openapi"] as? [String: Any])?["secure"] as? [String: Any]) ?? [:]
            if let s = state["state"] as? String, s != "pending" { break }
            usleep(50_000)
        }
        XCTAssertEqual(state["state"] as? String, "failing")
        let error = state["error"] as? String ?? ""
        XCTAssertTrue(error.hasPrefix("\(https)/base/v3/api-docs: tls: "), error)
        XCTAssertEqual(try h.admin("/_peel/openapi.json").status, 503, "no document was ever read")
    }

    func testMadePublic_theClientListenerServesIt_withTheConfiguredServer_elseThePathIsForwarded() throws {
        let up = try RawUpstream { _ in .send(RawUpstream.answer(#"{"code":0,"msg":"","data":1}"#)) }
        defer { up.stop() }
        let file = samples.appendingPathComponent("yudao-springdoc.json").path
        let group = #"{"admin": {"endpoints": ["\#(up.baseURL)"], "openapi": {"file": "\#(file)"}}}"#
        let routes = #"[{"prefix": "/", "upstream": "admin", "dialect": "yudao"}]"#
        let config = try loadConfig(file: #"{"upstreams": \#(group), "routes": \#(routes), "openapi": {"public": true, "server": "https://api.example.com"}}"#,
                                    environment: [:])
        let h = try Harness { c in
            c.routing = config.routing
            c.contract = config.contract
        }
        defer { h.stop() }
        _ = try published(h)
        let r = try h.request("GET", "/_peel/openapi.json")
        XCTAssertEqual(r.status, 200)
        let doc = json(r)
        XCTAssertEqual((doc["servers"] as? [[String: String]])?.first?["url"], "https://api.example.com")
        XCTAssertNotNil((doc["paths"] as? [String: Any])?["/admin-api/system/user/page"])
        XCTAssertFalse(up.requests.contains { $0.path == "/_peel/openapi.json" }, "answered by Peel, not forwarded")

        let closed = try loadConfig(file: #"{"upstreams": \#(group), "routes": \#(routes)}"#, environment: [:])
        let h2 = try Harness { c in c.routing = closed.routing }
        defer { h2.stop() }
        _ = try h2.request("GET", "/_peel/openapi.json")
        XCTAssertTrue(up.requests.contains { $0.path == "/_peel/openapi.json" }, "not public: the path is the upstream's")
    }

    func testWithoutADocument_thePathIs404() throws {
        let h = try Harness()
        defer { h.stop() }
        XCTAssertEqual(try h.admin("/_peel/openapi.json").status, 404)
    }

    func testAPathUnderTheEndpointsBasePath_andARouteThatDoesNotStrip() {
        let strip = RouteRule(name: nil, host: nil, prefix: "/pay/", upstream: "p", stripPrefix: true)
        XCTAssertEqual(ContractMerge.publicPath("/v1/orders", route: strip, basePath: "/v1"), "/pay/orders")
        XCTAssertNil(ContractMerge.publicPath("/v2/orders", route: strip, basePath: "/v1"), "outside the endpoint's base path")
        let keep = RouteRule(name: nil, host: nil, prefix: "/pay/", upstream: "p")
        XCTAssertEqual(ContractMerge.publicPath("/pay/orders", route: keep, basePath: ""), "/pay/orders")
        XCTAssertNil(ContractMerge.publicPath("/admin/users", route: keep, basePath: ""), "no route leads there")
    }

    func testAPathOnlyHostRoutesLeadTo_namesItsHostsAsServers_andOneEveryHostReaches_namesNone() throws {
        let wechat = try ContractDocument.parse(Array(Data(contentsOf: samples.appendingPathComponent("wechat-rest.json")))).get()
        func published(server: String?) throws -> ConfigJSON {
            let config = try loadConfig(file: """
                {"upstreams": {"wx": {"endpoints": ["http://127.0.0.1:9"]}},
                 "routes": [{"host": "api.example.com", "prefix": "/cgi-bin/", "upstream": "wx", "dialect": "wechat"},
                            {"host": "*.tenants.example", "prefix": "/cgi-bin/", "upstream": "wx", "dialect": "wechat"},
                            {"host": "[::1]", "prefix": "/cgi-bin/token", "upstream": "wx", "dialect": "wechat"},
                            {"prefix": "/open/", "upstream": "wx", "strip_prefix": true, "dialect": "wechat"}]
                 \(server.map { #", "openapi": {"server": "\#($0)"}"# } ?? "")}
                """, environment: [:])
            return try XCTUnwrap(ContractMerge.published(config, documents: ["wx": wechat]))
        }
        func urls(_ item: ConfigJSON?) -> [String]? {
            guard case .array(let servers)? = item?["servers"] else { return nil }
            return servers.compactMap { $0["url"]?.string }
        }
        let doc = try published(server: "https://gw.example.com:8443/v1")
        let token = doc["paths"]?["/cgi-bin/token"]
        XCTAssertEqual(urls(token), ["https://api.example.com:8443/v1", "https://[::1]:8443/v1"], "the configured server's scheme, port and path")
        XCTAssertEqual(token?["x-peel-hosts"], .array([.string("api.example.com"), .string("*.tenants.example"), .string("[::1]")]))
        let send = doc["paths"]?["/cgi-bin/message/custom/send"]
        XCTAssertEqual(urls(send), ["https://api.example.com:8443/v1"], "a wildcard's names cannot be listed")
        XCTAssertEqual(send?["x-peel-hosts"], .array([.string("api.example.com"), .string("*.tenants.example")]))
        XCTAssertNotNil(token?["get"], "the operations stay")
        for path in ["/open/cgi-bin/token", "/open/cgi-bin/message/custom/send"] {
            XCTAssertNotNil(doc["paths"]?[path], path)
            XCTAssertNil(doc["paths"]?[path]?["servers"], "every host reaches \(path)")
            XCTAssertNil(doc["paths"]?[path]?["x-peel-hosts"], path)
        }
        XCTAssertEqual(urls(doc), ["https://gw.example.com:8443/v1"])
        let bare = try published(server: nil)
        XCTAssertEqual(urls(bare["paths"]?["/cgi-bin/token"]), ["//api.example.com", "//[::1]"], "read against the document's own URL")
        XCTAssertNil(bare["servers"])
    }

    func testAGroupsOpenapiKey_isCheckedAtLoad() {
        func error(_ openapi: String) -> String? {
            do {
                _ = try loadConfig(file: #"{"upstreams": {"a": {"endpoints": ["http://127.0.0.1:1"], "openapi": \#(openapi)}}, "routes": [{"prefix": "/", "upstream": "a"}]}"#,
                                   environment: [:])
                return nil
            } catch {
                return String(describing: error)
            }
        }
        XCTAssertNil(error(#"{"path": "/v3/api-docs", "refresh": 60}"#))
        XCTAssertTrue(error(#"{"path": "/a", "file": "/b"}"#)?.contains("path and file exclude each other") == true)
        XCTAssertTrue(error(#"{"path": "v3"}"#)?.contains("must be a path starting with /") == true)
        XCTAssertTrue(error(#"{}"#)?.contains("names neither path nor file") == true)
        XCTAssertTrue(error(#"{"path": "/a", "refresh": 0.5}"#)?.contains("at least 1 second") == true)
        XCTAssertTrue(error(#"{"path": "/a", "url": "x"}"#)?.contains("unknown key") == true)
        do {
            _ = try loadConfig(file: #"{"upstream": "http://127.0.0.1:1", "openapi": {"public": "yes"}}"#, environment: [:])
            XCTFail("a public that is not a boolean was taken")
        } catch {
            XCTAssertTrue(String(describing: error).contains("openapi.public"), String(describing: error))
        }
    }
}

/// A server that writes a plain HTTP answer as soon as a connection opens, before reading a byte.
/// Runs on its own loop thread; port 0.
private final class PlainGreeter: @unchecked Sendable {
    // Unchecked: `server` and `open` are only touched on `loop`'s thread.
    private let loop: EventLoop
    private var server: TCPServer?
    private var open: [TCPConnection] = []
    /// The bound port.
    let port: Int

    init() throws {
        loop = try EventLoop()
        var greet: ((TCPConnection) -> Void)?
        let server = try TCPServer(loop: loop, address: HostPort(host: "127.0.0.1", port: 0)) { greet?($0) }
        self.server = server
        port = server.port
        greet = { [unowned self] conn in
            open.append(conn)
            conn.write(RawUpstream.answer("{}"))
        }
        loop.startThread()
    }

    /// Closes everything, then stops the loop thread.
    func stop() {
        let loop = self.loop
        loop.execute { [self] in
            server?.close()
            server = nil
            for c in open { c.close() }
            open = []
            loop.defer { loop.stop() }
        }
        loop.join()
    }
}
