@testable import PeelGateway
import XCTest

/// Peel's own CORS decisions when `--cors-origins` is set (Fetch standard §3.2).
final class CORSPolicyTests: XCTestCase {
    private func policy(_ origins: [String], credentials: Bool = false) -> CORSPolicy? {
        var s = GatewayConfig.CORS()
        s.origins = origins
        s.credentials = credentials
        return CORSPolicy(s)
    }
    private func dict(_ fields: [(String, String)]) -> [String: String] {
        Dictionary(fields, uniquingKeysWith: { a, b in a + ", " + b })
    }

    func testNoOrigins_meansPeelDoesNotManageCORS() {
        XCTAssertNil(policy([]))
    }

    func testAllowedOrigin_getsAllowOriginVaryAndExposedFields() throws {
        let p = try XCTUnwrap(policy(["https://app.example.com"]))
        let f = dict(p.answerFields(origin: "https://app.example.com"))
        XCTAssertEqual(f["Access-Control-Allow-Origin"], "https://app.example.com")
        XCTAssertEqual(f["Vary"], "Origin")
        XCTAssertEqual(f["Access-Control-Expose-Headers"], "X-Request-Id, Retry-After, Age, Cache-Status")
        XCTAssertNil(f["Access-Control-Allow-Credentials"])
    }

    func testOtherOrigins_getNoCORSFields_onlyVary() throws {
        let p = try XCTUnwrap(policy(["https://app.example.com"]))
        XCTAssertEqual(dict(p.answerFields(origin: "https://evil.example.com")), ["Vary": "Origin"])
        XCTAssertEqual(dict(p.answerFields(origin: "https://app.example.com.evil.com")), ["Vary": "Origin"])
        XCTAssertEqual(dict(p.answerFields(origin: nil)), ["Vary": "Origin"])
        let pre = dict(p.preflightFields(origin: "https://evil.example.com", requestMethod: "PUT", requestHeaders: nil))
        XCTAssertNil(pre["Access-Control-Allow-Origin"])
        XCTAssertNil(pre["Access-Control-Allow-Methods"])
    }

    func testWildcard_answersStar() throws {
        let p = try XCTUnwrap(policy(["*"]))
        XCTAssertEqual(dict(p.answerFields(origin: "https://any.example"))["Access-Control-Allow-Origin"], "*")
    }

    func testCredentials_addAllowCredentials() throws {
        let p = try XCTUnwrap(policy(["https://app.example.com"], credentials: true))
        XCTAssertEqual(dict(p.answerFields(origin: "https://app.example.com"))["Access-Control-Allow-Credentials"], "true")
    }

    func testPreflight_echoesWhatWasRequested() throws {
        let p = try XCTUnwrap(policy(["https://app.example.com"]))
        let f = dict(p.preflightFields(origin: "https://app.example.com", requestMethod: "PUT",
                                       requestHeaders: "authorization, content-type, x-trace"))
        XCTAssertEqual(f["Access-Control-Allow-Origin"], "https://app.example.com")
        XCTAssertEqual(f["Access-Control-Allow-Methods"], "PUT")
        XCTAssertEqual(f["Access-Control-Allow-Headers"], "authorization, content-type, x-trace")
        XCTAssertEqual(f["Access-Control-Max-Age"], "600")
    }

    func testPreflight_doesNotEchoValuesThatAreNotTokens() throws {
        let p = try XCTUnwrap(policy(["*"]))
        let f = dict(p.preflightFields(origin: "https://a.example", requestMethod: "PUT", requestHeaders: "x-a; evil=\"1\""))
        XCTAssertNil(f["Access-Control-Allow-Headers"])
    }

    func testIsPreflight_needsOriginAndRequestMethod() {
        XCTAssertTrue(CORSPolicy.isPreflight(method: "OPTIONS", origin: "https://a", requestMethod: "PUT"))
        XCTAssertFalse(CORSPolicy.isPreflight(method: "OPTIONS", origin: "https://a", requestMethod: nil))
        XCTAssertFalse(CORSPolicy.isPreflight(method: "OPTIONS", origin: nil, requestMethod: "PUT"))
        XCTAssertFalse(CORSPolicy.isPreflight(method: "GET", origin: "https://a", requestMethod: "PUT"))
    }

    func testConfig_refusesCredentialsWithStarAndBadOrigins() {
        let env = ["PEEL_UPSTREAM": "http://u.example"]
        XCTAssertThrowsError(try ConfigLoader.load(arguments: ["--cors-origins", "*", "--cors-credentials", "on"], environment: env)) {
            XCTAssertEqual(($0 as? ConfigError)?.option, "--cors-credentials")
        }
        XCTAssertThrowsError(try ConfigLoader.load(arguments: ["--cors-origins", "https://a.example/path"], environment: env))
        let ok = try? ConfigLoader.load(arguments: ["--cors-origins", "https://a.example, http://localhost:3000",
                                                   "--cors-credentials", "on"], environment: env)
        XCTAssertEqual(ok?.cors.origins, ["https://a.example", "http://localhost:3000"])
        XCTAssertEqual(ok?.cors.credentials, true)
    }

    // MARK: issue 19

    func testSubdomainWildcard_matchesWholeLeadingLabelsOnly() throws {
        let p = try XCTUnwrap(policy(["https://*.example.com", "http://*.example.org:8080"]))
        for ok in ["https://a.example.com", "https://a.b.example.com", "https://A-1.Example.com", "http://x.example.org:8080"] {
            XCTAssertTrue(p.allows(ok), ok)
        }
        for bad in ["https://example.com", "https://example.com.evil.net", "https://badexample.com", "http://a.example.com",
                    "https://a.example.com:8443", "http://x.example.org", "http://x.example.org:8081", "https://.example.com",
                    "https://a..example.com", "https://a.example.com/", "https://a@b.example.com"] {
            XCTAssertFalse(p.allows(bad), bad)
        }
        XCTAssertEqual(dict(p.answerFields(origin: "https://a.b.example.com"))["Access-Control-Allow-Origin"], "https://a.b.example.com")
        XCTAssertNil(dict(p.answerFields(origin: "https://example.com.evil.net"))["Access-Control-Allow-Origin"])
    }

    func testAStarAnywhereElse_isRefusedWithAReason() {
        XCTAssertNil(OriginPattern.problem("https://*.example.com"))
        XCTAssertNil(OriginPattern.problem("http://*.example.com:8080"))
        XCTAssertNil(OriginPattern.problem("https://app.example.com"))
        for bad in ["https://*example.com", "https://a.*.example.com", "*.example.com", "https://example.*", "https://*.*.example.com",
                    "https://*.com", "https://*.example.com:99999", "https://*.exa mple.com"] {
            XCTAssertNotNil(OriginPattern.problem(bad), bad)
        }
        XCTAssertThrowsError(try ConfigLoader.load(arguments: ["--cors-origins", "https://*example.com"],
                                                   environment: ["PEEL_UPSTREAM": "http://127.0.0.1:1"])) { e in
            XCTAssertTrue("\(e)".contains("--cors-origins"), "\(e)")
            XCTAssertTrue("\(e)".contains("leading labels"), "\(e)")
        }
    }

    func testExposedList_isPeelsOwnThenConfiguredThenTheUpstreams_eachOnce() throws {
        var s = GatewayConfig.CORS()
        s.origins = ["https://app.example.com"]
        s.exposeHeaders = ["Content-Disposition", "x-request-id"]
        let p = try XCTUnwrap(CORSPolicy(s))
        let f = dict(p.answerFields(origin: "https://app.example.com", upstreamExposed: ["X-Total-Count", "Link", "age"]))
        XCTAssertEqual(f["Access-Control-Expose-Headers"], "X-Request-Id, Retry-After, Age, Cache-Status, Content-Disposition, X-Total-Count, Link")
    }
}
