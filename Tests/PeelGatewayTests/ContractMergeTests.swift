import Foundation
@testable import PeelGateway
import XCTest

/// Which route's operations the published contract describes where host routes and routes without
/// a host lead to one path (issue 34's review).
final class ContractMergeTests: XCTestCase {
    private let wechat: ConfigJSON = {
        let file = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("scripts/openapi/wechat-rest.json")
        return (try? ContractDocument.parse(Array(Data(contentsOf: file))).get()) ?? .null
    }()

    private func published(_ routes: String, groups: String = "") throws -> ConfigJSON {
        let config = try loadConfig(file: """
            {"upstreams": {"wx": {"endpoints": ["http://127.0.0.1:9"]}\(groups)}, "routes": [\(routes)]}
            """, environment: [:])
        return try XCTUnwrap(ContractMerge.published(config, documents: ["wx": wechat]))
    }

    private func tokenSchema(_ item: ConfigJSON?) -> ConfigJSON? {
        item?["get"]?["responses"]?["200"]?["content"]?["application/json"]?["schema"]
    }

    func testAPathAHostlessRouteReaches_isServedForEveryHost_andAHostsOtherDialectIsAVariant() throws {
        // The host route first: the order the routes are listed in decides nothing (RouteTable).
        let doc = try published("""
            {"host": "api.example.com", "prefix": "/cgi-bin/", "upstream": "wx", "dialect": "wechat"},
            {"prefix": "/cgi-bin/", "upstream": "wx"}
            """)
        for path in ["/cgi-bin/token", "/cgi-bin/message/custom/send"] {
            let item = doc["paths"]?[path]
            XCTAssertNil(item?["servers"], "\(path): a client with any Host reaches it")
            XCTAssertNil(item?["x-peel-hosts"], path)
            guard case .array(let variants)? = item?["x-peel-host-variants"] else { return XCTFail("\(path): no variant") }
            XCTAssertEqual(variants.count, 1)
            XCTAssertEqual(variants.first?["x-peel-hosts"], .array([.string("api.example.com")]))
            XCTAssertEqual(variants.first?["servers"], .array([.obj(["url": .string("//api.example.com")])]))
        }
        // The route without a host answers in the global dialect, api.example.com's route in wechat's.
        let wechatOnly = try published(#"{"prefix": "/cgi-bin/", "upstream": "wx", "dialect": "wechat"}"#)
        let unwrapped = try XCTUnwrap(tokenSchema(wechatOnly["paths"]?["/cgi-bin/token"]))
        let token = doc["paths"]?["/cgi-bin/token"]
        XCTAssertNotNil(tokenSchema(token))
        XCTAssertNotEqual(tokenSchema(token), unwrapped, "what a client with another Host gets")
        guard case .array(let variants)? = token?["x-peel-host-variants"] else { return XCTFail("no variant") }
        XCTAssertEqual(tokenSchema(variants.first), unwrapped)
    }

    func testAHostRouteServingAPathAsEveryHostGetsIt_isNoVariant() throws {
        let doc = try published("""
            {"host": "api.example.com", "prefix": "/cgi-bin/", "upstream": "wx", "dialect": "wechat"},
            {"prefix": "/cgi-bin/", "upstream": "wx", "dialect": "wechat"}
            """)
        let token = doc["paths"]?["/cgi-bin/token"]
        XCTAssertNotNil(token?["get"])
        XCTAssertNil(token?["servers"])
        XCTAssertNil(token?["x-peel-hosts"])
        XCTAssertNil(token?["x-peel-host-variants"])
    }

    func testAPathALongerPrefixTakes_isDescribedAsThatRouteServesIt() throws {
        // `/cgi-bin/token` goes to a group without a document for every host, so it is not
        // described; `/cgi-bin/message/…` stays api.example.com's alone.
        let doc = try published("""
            {"host": "api.example.com", "prefix": "/cgi-bin/", "upstream": "wx", "dialect": "wechat"},
            {"prefix": "/cgi-bin/token", "upstream": "other"}
            """, groups: #", "other": {"endpoints": ["http://127.0.0.1:9"]}"#)
        XCTAssertNil(doc["paths"]?["/cgi-bin/token"])
        XCTAssertEqual(doc["paths"]?["/cgi-bin/message/custom/send"]?["x-peel-hosts"], .array([.string("api.example.com")]))
    }

    func testWhichHostsAHostCovers() {
        typealias H = RouteTable<Int>.HostMatch
        XCTAssertTrue(H(nil).covers(H("a.example.com")))
        XCTAssertFalse(H("a.example.com").covers(H(nil)))
        XCTAssertTrue(H("*.example.com").covers(H("a.example.com")))
        XCTAssertTrue(H("*.example.com").covers(H("*.a.example.com")))
        XCTAssertFalse(H("*.a.example.com").covers(H("*.example.com")))
        XCTAssertFalse(H("*.example.com").covers(H("example.com")))
        XCTAssertFalse(H("a.example.com").covers(H("*.example.com")))
    }
}
