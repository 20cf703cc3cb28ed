import Foundation
import PeelEnvelope
@testable import PeelGateway
import XCTest

/// A generation's routes built from the config (issue 27): each rule's dialect, paths, key fields
/// and group, the key fields read once for all of them, and the prefix stripped.
final class RouteSetTests: XCTestCase {
    private func load(_ file: String) throws -> GatewayConfig {
        try loadConfig(file: file, environment: ["PEEL_UPSTREAM": "http://127.0.0.1:1"])
    }

    private func routes(_ config: GatewayConfig) throws -> RouteSet {
        try RouteSet(config, groups: UpstreamGroups(config, onTransition: { _, _ in }))
    }

    func testWithoutRoutesOneRouteTakesEveryCall() throws {
        let set = try routes(try load(#"{"dialect": "ruoyi"}"#))
        XCTAssertEqual(set.routes.count, 1)
        let r = try XCTUnwrap(set.choose(host: "any.example", path: "/whatever"))
        XCTAssertEqual(r.name, "/")
        XCTAssertEqual(r.group.name, "default")
        XCTAssertEqual(r.keyGroup, "", "without routes the cache keys carry no group")
        XCTAssertTrue(set.fallback === r)
        XCTAssertFalse(set.routed)
        XCTAssertEqual(r.envelope.dialect, try DialectConfig.preset("ruoyi", "t"))
        XCTAssertNotNil(set.choose(host: nil, path: "/"))
    }

    func testEachRuleIsARouteWithItsOwnDialectPathsAndKeys() throws {
        let config = try load(#"""
            {"dialect": "ruoyi", "offline_cache_key": ["Authorization"], "passthrough_paths": ["/files/"],
             "upstreams": {"wechat": {"endpoints": ["https://api.weixin.qq.com"]}},
             "routes": [{"prefix": "/wx/", "upstream": "wechat", "strip_prefix": true, "dialect": "wechat",
                         "offline_cache_key": ["X-Openid"], "passthrough_paths": []},
                        {"name": "app", "prefix": "/", "upstream": "default"},
                        {"host": "*.tenant.example", "prefix": "/", "upstream": "default", "dialect": "yudao"}]}
            """#)
        let set = try routes(config)
        XCTAssertEqual(set.routes.map(\.name), ["/wx/", "app", "*.tenant.example /"])
        let wx = try XCTUnwrap(set.choose(host: "a.tenant.example", path: "/wx/token"))
        XCTAssertEqual(wx.name, "/wx/")
        XCTAssertEqual(wx.group.name, "wechat")
        XCTAssertEqual(wx.keyGroup, "wechat")
        XCTAssertEqual(wx.picker.endpoints.map(\.description), ["https://api.weixin.qq.com"])
        XCTAssertEqual(wx.upstreamPath("/wx/token"), "/token")
        XCTAssertEqual(wx.upstreamPath("/wx/"), "/")
        XCTAssertNil(wx.upstreamPath("/wx/../admin"), "stripped, the path would climb above the group's base path")
        // One read of the request's fields serves every route: the union, each route's in its place.
        XCTAssertEqual(set.keyFields.names, ["authorization", "x-openid"])
        XCTAssertEqual(wx.keyPositions, [1])
        XCTAssertEqual(wx.envelope.dialect, try DialectConfig.preset("wechat", "t"))
        XCTAssertEqual(wx.keyFields.names, ["x-openid"])
        XCTAssertEqual(wx.envelope.passthroughPaths, [])
        let app = try XCTUnwrap(set.choose(host: "api.example", path: "/system/user/list"))
        XCTAssertEqual(app.name, "app")
        XCTAssertEqual(app.envelope.dialect, try DialectConfig.preset("ruoyi", "t"), "the global dialect where the rule sets none")
        XCTAssertEqual(app.keyFields.names, ["authorization"])
        XCTAssertEqual(app.keyPositions, [0])
        XCTAssertEqual(app.upstreamPath("/system/user/list"), "/system/user/list", "nothing stripped")
        XCTAssertEqual(app.group.name, "default")
        XCTAssertFalse(app.group === wx.group)
        // Peel's own answers (no route applied) are logged with no route name.
        XCTAssertNil(set.fallback.name)
        XCTAssertTrue(set.routed)
        XCTAssertEqual(app.envelope.passthroughPaths, ["/files/"])
        XCTAssertEqual(set.choose(host: "b.tenant.example", path: "/x")?.envelope.dialect, try DialectConfig.preset("yudao", "t"))
    }

    func testNoRouteApplies() throws {
        let config = try load(#"{"routes": [{"prefix": "/api/", "upstream": "default"}]}"#)
        XCTAssertNil(try routes(config).choose(host: "a", path: "/other"))
    }
}
