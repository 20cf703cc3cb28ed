import Foundation
import PeelEnvelope
@testable import PeelGateway
import XCTest

/// A generation's routes built from the config (issue 27, step 2, beside the single route).
final class RouteSetTests: XCTestCase {
    private func load(_ file: String) throws -> GatewayConfig {
        try loadConfig(file: file, environment: ["PEEL_UPSTREAM": "http://127.0.0.1:1"])
    }

    func testWithoutRoutesOneRouteTakesEveryCall() throws {
        let set = try RouteSet(try load(#"{"dialect": "ruoyi"}"#))
        XCTAssertEqual(set.routes.count, 1)
        let r = try XCTUnwrap(set.choose(host: "any.example", path: "/whatever"))
        XCTAssertEqual(r.name, "/")
        XCTAssertEqual(r.group, "default")
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
        let set = try RouteSet(config)
        XCTAssertEqual(set.routes.map(\.name), ["/wx/", "app", "*.tenant.example /"])
        let wx = try XCTUnwrap(set.choose(host: "a.tenant.example", path: "/wx/token"))
        XCTAssertEqual(wx.name, "/wx/")
        XCTAssertEqual(wx.group, "wechat")
        XCTAssertEqual(wx.envelope.dialect, try DialectConfig.preset("wechat", "t"))
        XCTAssertEqual(wx.keyFields.names, ["x-openid"])
        XCTAssertEqual(wx.envelope.passthroughPaths, [])
        let app = try XCTUnwrap(set.choose(host: "api.example", path: "/system/user/list"))
        XCTAssertEqual(app.name, "app")
        XCTAssertEqual(app.envelope.dialect, try DialectConfig.preset("ruoyi", "t"), "the global dialect where the rule sets none")
        XCTAssertEqual(app.keyFields.names, ["authorization"])
        XCTAssertEqual(app.envelope.passthroughPaths, ["/files/"])
        XCTAssertEqual(set.choose(host: "b.tenant.example", path: "/x")?.envelope.dialect, try DialectConfig.preset("yudao", "t"))
    }

    func testNoRouteApplies() throws {
        let config = try load(#"{"routes": [{"prefix": "/api/", "upstream": "default"}]}"#)
        XCTAssertNil(try RouteSet(config).choose(host: "a", path: "/other"))
    }
}
