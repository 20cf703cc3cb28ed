import Foundation
import PeelEnvelope
@testable import PeelGateway
import XCTest

/// The config file's `upstreams` and `routes` sections decoded strictly into typed values, errors
/// naming the 0-based path of the offending key (issues 26 and 27).
final class RoutingConfigTests: XCTestCase {
    private func load(_ file: String, upstreamFlag: Bool = false) throws -> GatewayConfig {
        try loadConfig(file: file, environment: upstreamFlag ? ["PEEL_UPSTREAM": "http://127.0.0.1:1/api"] : [:])
    }

    /// The error's option with the temporary file's path cut off, and its problem.
    private func refusal(_ file: String, upstreamFlag: Bool = false) -> (at: String, problem: String)? {
        do {
            _ = try load(file, upstreamFlag: upstreamFlag)
            return nil
        } catch let e as ConfigError {
            let at = e.option.range(of: ".json: ").map { String(e.option[$0.upperBound...]) } ?? e.option
            return (at, e.problem)
        } catch {
            return nil
        }
    }

    /// The issue's own example.
    private let example = #"""
        {"upstreams": {
           "app":    {"endpoints": ["http://10.0.0.1:8080", {"url": "http://10.0.0.2:8080", "weight": 2}],
                      "balance": "round_robin",
                      "probe": {"path": "/health", "interval": 2, "timeout": 1, "fall": 3, "rise": 2},
                      "eject": {"after": 3, "base": 5, "max": 300, "max_share": 0.5}},
           "wechat": {"endpoints": ["https://api.weixin.qq.com"], "timeout": 10}},
         "routes": [
           {"prefix": "/wx/", "upstream": "wechat", "strip_prefix": true, "dialect": "wechat"},
           {"host": "*.example.com", "prefix": "/", "upstream": "app", "dialect": "ruoyi"},
           {"prefix": "/", "upstream": "app", "dialect": {"preset": "ruoyi", "auth_codes": [401, 403]}}]}
        """#

    func testTheIssuesExampleDecodesIntoTypedGroupsAndRoutes() throws {
        let c = try load(example)
        let r = try XCTUnwrap(c.routing)
        XCTAssertEqual(r.upstreams.map(\.name), ["app", "wechat"])
        let app = r.upstreams[0]
        XCTAssertEqual(app.endpoints.map(\.url.description), ["http://10.0.0.1:8080", "http://10.0.0.2:8080"])
        XCTAssertEqual(app.endpoints.map(\.weight), [1, 2])
        XCTAssertEqual(app.balance, .roundRobin)
        XCTAssertEqual(app.probe, UpstreamGroup.Probe(path: "/health", interval: 2, timeout: 1, fall: 3, rise: 2))
        XCTAssertEqual(app.eject, UpstreamGroup.Eject(after: 3, base: 5, max: 300, maxShare: 0.5))
        XCTAssertEqual(r.upstreams[1].timeout, 10)
        XCTAssertEqual(r.upstreams[1].endpoints[0].url.scheme, "https")
        XCTAssertEqual(r.routes.map(\.label), ["/wx/", "*.example.com /", "/"])
        XCTAssertEqual(r.routes[0].stripPrefix, true)
        XCTAssertEqual(r.routes[0].dialect, try DialectConfig.preset("wechat", "t"))
        XCTAssertEqual(r.routes[2].dialect?.authCodes, CodeSet([.integer(401), .integer(403)]))
        XCTAssertNil(r.routes[1].passthroughPaths)
        // No --upstream is needed when routes say where calls go.
        // check-config prints the sections, and what it prints loads back to the same values.
        let described = ConfigLoader.describe(c)
        let json = try JSONSerialization.jsonObject(with: Data(described.utf8)) as? [String: Any]
        let routes = try XCTUnwrap(json?["routes"] as? [[String: Any]])
        XCTAssertEqual(routes.count, 3)
        XCTAssertEqual(routes[1]["host"] as? String, "*.example.com")
        let sections = "{\"upstreams\": \(r.json.upstreams), \"routes\": \(r.json.routes)}"
        XCTAssertEqual(try load(sections).routing, r)
    }

    func testTheIssuesRefusals_nameTheOffendingKeysPath() {
        let group = #""upstreams": {"app": {"endpoints": ["http://10.0.0.1:8080"]}}"#
        let cases: [(String, String)] = [
            (#"{\#(group), "routes": [{"prefix": "/", "upstream": "app"}, {"prefix": "/x", "upstream": "nope"}]}"#, "routes[1].upstream"),
            (#"{\#(group), "routes": [{"prefix": "/", "upstream": "app"}, {"prefix": "/x", "upstrem": "app"}]}"#, "routes[1].upstrem"),
            (#"{\#(group), "routes": [{"prefix": "/", "upstream": "app"}, {"prefix": "/a", "upstream": "app"}, {"prefix": "/", "upstream": "app"}]}"#,
             "routes[2]"),
            (#"{"upstreams": {"app": {"endpoints": ["http://10.0.0.1:8080", "http://10.0.0.2:8080/#top"]}}, "routes": [{"prefix": "/", "upstream": "app"}]}"#,
             "upstreams.app.endpoints[1]"),
        ]
        for (file, path) in cases {
            XCTAssertEqual(refusal(file)?.at, path, file)
        }
    }

    func testEveryValueHasItsType() {
        let route = #""routes": [{"prefix": "/", "upstream": "app"}]"#
        func group(_ body: String) -> String { #"{"upstreams": {"app": {\#(body)}}, \#(route)}"# }
        let cases: [(String, String)] = [
            (group(#""endpoints": []"#), "upstreams.app.endpoints"),
            (group(#""endpoints": "http://a""#), "upstreams.app.endpoints"),
            (group(#""endpoints": ["ftp://a"]"#), "upstreams.app.endpoints[0]"),
            (group(#""endpoints": ["http://a", "http://a"]"#), "upstreams.app.endpoints[1]"),
            (group(#""endpoints": [{"url": "http://a", "weight": 0}]"#), "upstreams.app.endpoints[0].weight"),
            (group(#""endpoints": [{"url": "http://a", "wieght": 2}]"#), "upstreams.app.endpoints[0].wieght"),
            (group(#""endpoints": ["http://a"], "balance": "random""#), "upstreams.app.balance"),
            (group(#""endpoints": ["http://a"], "timeout": "10""#), "upstreams.app.timeout"),
            (group(#""endpoints": ["http://a"], "timeout": 1, "connect_timeout": 2"#), "upstreams.app.connect_timeout"),
            (group(#""endpoints": ["http://a"], "probe": {"path": "health"}"#), "upstreams.app.probe.path"),
            (group(#""endpoints": ["http://a"], "probe": {"fall": 1.5}"#), "upstreams.app.probe.fall"),
            (group(#""endpoints": ["http://a"], "eject": {"max_share": 0}"#), "upstreams.app.eject.max_share"),
            (group(#""endpoints": ["http://a"], "eject": {"base": 10, "max": 5}"#), "upstreams.app.eject.max"),
            (group(#""endpoints": ["http://a"], "eject": {"after": 3, "ratio": 1}"#), "upstreams.app.eject.ratio"),
            (#"{"upstreams": {"a b": {"endpoints": ["http://a"]}}, \#(route)}"#, "upstreams.a b"),
            (#"{"upstreams": {"app": {"endpoints": ["http://a"]}}}"#, "routes"),
            (#"{"upstreams": {"app": {"endpoints": ["http://a"]}}, "routes": []}"#, "routes"),
            (#"{"upstreams": {"app": {"endpoints": ["http://a"]}}, "routes": {"prefix": "/"}}"#, "routes"),
            (#"{"upstreams": {"app": {"endpoints": ["http://a"]}}, "routes": [{"upstream": "app"}]}"#, "routes[0].prefix"),
            (#"{"upstreams": {"app": {"endpoints": ["http://a"]}}, "routes": [{"prefix": "api", "upstream": "app"}]}"#, "routes[0].prefix"),
            (#"{"upstreams": {"app": {"endpoints": ["http://a"]}}, "routes": [{"prefix": "/", "upstream": "app", "host": "a.com:8080"}]}"#,
             "routes[0].host"),
            (#"{"upstreams": {"app": {"endpoints": ["http://a"]}}, "routes": [{"prefix": "/", "upstream": "app", "host": "*"}]}"#, "routes[0].host"),
            (#"{"upstreams": {"app": {"endpoints": ["http://a"]}}, "routes": [{"prefix": "/", "upstream": "app", "strip_prefix": "yes"}]}"#,
             "routes[0].strip_prefix"),
            (#"{"upstreams": {"app": {"endpoints": ["http://a"]}}, "routes": [{"prefix": "/", "upstream": "app", "dialect": "soap"}]}"#,
             "routes[0].dialect"),
            (#"{"upstreams": {"app": {"endpoints": ["http://a"]}}, "routes": [{"prefix": "/", "upstream": "app", "dialect": {"preset": "ruoyi", "cod": "x"}}]}"#,
             "routes[0].dialect.cod"),
            (#"{"upstreams": {"app": {"endpoints": ["http://a"]}}, "routes": [{"prefix": "/", "upstream": "app", "offline_cache_key": ["x y"]}]}"#,
             "routes[0].offline_cache_key"),
        ]
        for (file, path) in cases {
            XCTAssertEqual(refusal(file)?.at, path, file)
        }
    }

    func testUpstreamMakesTheDefaultGroup_whichRoutesMayName() throws {
        let c = try load(#"{"routes": [{"prefix": "/", "upstream": "default"}, {"host": "API.Example.com", "prefix": "/v2/", "upstream": "default"}]}"#,
                         upstreamFlag: true)
        XCTAssertEqual(c.upstream.basePath, "/api")
        XCTAssertEqual(c.routing?.routes.map(\.label), ["/", "api.example.com /v2/"], "hosts are kept lowercased")
        // Without --upstream there is no default group, and a file that defines one alongside it is refused.
        XCTAssertEqual(refusal(#"{"routes": [{"prefix": "/", "upstream": "default"}]}"#)?.at, "routes[0].upstream")
        XCTAssertEqual(refusal(#"{"upstreams": {"default": {"endpoints": ["http://a"]}}, "routes": [{"prefix": "/", "upstream": "default"}]}"#,
                               upstreamFlag: true)?.at, "upstreams.default")
        // The same prefix under another host is another route; the same host twice is not.
        XCTAssertNoThrow(try load(#"{"routes": [{"prefix": "/", "upstream": "default"}, {"prefix": "/", "host": "a.com", "upstream": "default"}]}"#,
                                  upstreamFlag: true))
        XCTAssertEqual(refusal(#"{"routes": [{"prefix": "/", "host": "a.com", "upstream": "default"}, {"prefix": "/", "host": "A.com", "upstream": "default"}]}"#,
                               upstreamFlag: true)?.at, "routes[1]")
        // Without routes and without --upstream, nothing says where calls go.
        XCTAssertEqual(refusal(#"{"timeout": 5}"#)?.at, "--upstream")
    }

    func testUpstreamsWithoutRoutesIsRefused_evenWhenEmpty() {
        XCTAssertEqual(refusal(#"{"upstreams": {}}"#)?.at, "routes")
        XCTAssertEqual(refusal(#"{"upstreams": {}}"#, upstreamFlag: true)?.at, "routes")
    }

    func testCheckConfigsWholeOutputLoadsBack_withoutUpstream() throws {
        let c = try load(#"{"upstreams": {"default": {"endpoints": ["http://10.0.0.1:8080"]}}, "routes": [{"prefix": "/", "upstream": "default"}]}"#)
        let shown = ConfigLoader.describe(c)
        XCTAssertNil(refusal(shown)?.at, shown)
        XCTAssertEqual(try load(shown).routing, c.routing)
        // With --upstream, its URL is shown and makes the default group again.
        let withFlag = try load(#"{"routes": [{"prefix": "/", "upstream": "default"}]}"#, upstreamFlag: true)
        XCTAssertEqual(try load(ConfigLoader.describe(withFlag)).routing, withFlag.routing)
    }

    func testARoutesKeyFieldsFollowTheOptionsRules() throws {
        XCTAssertEqual(refusal(#"{"routes": [{"prefix": "/", "upstream": "default", "offline_cache_key": ["Cache-Control"]}]}"#,
                               upstreamFlag: true)?.at, "routes[0].offline_cache_key")
        let c = try load(#"{"routes": [{"prefix": "/", "upstream": "default", "offline_cache_key": ["Cookie", "cookie", "X-Tenant"]}]}"#,
                         upstreamFlag: true)
        XCTAssertEqual(c.routing?.routes[0].offlineCacheKey, ["cookie", "x-tenant"])
    }

    func testAGroupsProbePathFollowsTheOptionsRules() {
        XCTAssertNotNil(refusal(#"{"probe_path": "/health%"}"#, upstreamFlag: true))
        let group = { (path: String) in
            #"{"upstreams": {"app": {"endpoints": ["http://a"], "probe": {"path": ""# + path + #""}}}, "routes": [{"prefix": "/", "upstream": "app"}]}"#
        }
        XCTAssertEqual(refusal(group("/health%"))?.at, "upstreams.app.probe.path")
        XCTAssertNil(refusal(group("/health?deep=1")))
    }

    func testAnEndpointObjectsURLIsNamedByItsKey_andOneOriginWrittenTwoWaysIsOneEndpoint() {
        func file(_ endpoints: String) -> String {
            #"{"upstreams": {"app": {"endpoints": ["# + endpoints + #"]}}, "routes": [{"prefix": "/", "upstream": "app"}]}"#
        }
        XCTAssertEqual(refusal(file(#"{"url": "ftp://a"}"#))?.at, "upstreams.app.endpoints[0].url")
        XCTAssertEqual(refusal(file(#""http://a", "http://a:80""#))?.at, "upstreams.app.endpoints[1]")
        XCTAssertEqual(refusal(file(#""http://a", "http://A""#))?.at, "upstreams.app.endpoints[1]")
        XCTAssertEqual(refusal(file(#""https://a", {"url": "https://a:443/"}"#))?.at, "upstreams.app.endpoints[1].url")
        XCTAssertNil(refusal(file(#""http://a", "https://a", "http://a:8080", "http://a/v2""#)))
    }

    func testARouteMayNameAnIPv6Literal() throws {
        let c = try load(#"{"routes": [{"prefix": "/", "upstream": "default", "host": "[::1]"}]}"#, upstreamFlag: true)
        XCTAssertEqual(c.routing?.routes[0].host, "[::1]")
        let long = try load(#"{"routes": [{"prefix": "/", "upstream": "default", "host": "[0:0:0:0:0:0:0:1]"}]}"#, upstreamFlag: true)
        XCTAssertEqual(long.routing?.routes[0].host, "[::1]", "kept in the form a request's Host is matched in")
        XCTAssertEqual(refusal(#"{"routes": [{"prefix": "/", "upstream": "default", "host": "[1:2:3]"}]}"#, upstreamFlag: true)?.at,
                       "routes[0].host")
        XCTAssertEqual(refusal(#"{"routes": [{"prefix": "/", "upstream": "default", "host": "[::1"}]}"#, upstreamFlag: true)?.at,
                       "routes[0].host")
        XCTAssertEqual(refusal(#"{"routes": [{"prefix": "/", "upstream": "default", "host": "[example]"}]}"#, upstreamFlag: true)?.at,
                       "routes[0].host")
    }

    func testAGroupsCABundle_mustBeReadable_andEndpointsMustPassCurlsParser() {
        XCTAssertThrowsError(try loadConfig(file: #"""
            {"upstreams": {"app": {"endpoints": ["https://127.0.0.1:1"], "ca_file": "/nonexistent/ca.pem"}}, "routes": [{"prefix": "/", "upstream": "app"}]}
            """#, environment: [:])) { error in
            XCTAssertEqual((error as? ConfigError)?.option.hasSuffix("upstreams.app.ca_file"), true, "\(error)")
        }
        XCTAssertThrowsError(try loadConfig(file: #"{"timeout": 5}"#, environment: ["PEEL_UPSTREAM": "http://api,x"])) { error in
            XCTAssertEqual((error as? ConfigError)?.problem, "curl's URL parser refuses it", "\(error)")
        }
    }
}
