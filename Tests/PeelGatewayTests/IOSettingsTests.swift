@testable import PeelGateway
import PeelIO
import XCTest

/// What PeelIO is told of a configuration: every setting reaches the upstream client options, the
/// connection limits and the body budget, at start and on reload alike.
final class IOSettingsTests: XCTestCase {
    /// A configuration whose every IO-bound value differs from its default.
    private func unusual() -> GatewayConfig {
        var c = GatewayConfig()
        c.timeout = 7
        c.connectTimeout = 2.5
        c.maxUpstreamBody = 1_000_000
        c.caFile = "/etc/ssl/extra.pem"
        c.maxInFlight = 123
        c.upstreamIdleTimeout = 9
        c.trustedProxies = [IPNetwork("10.0.0.0/8")!]
        c.maxBody = 2_000_000
        c.clientTimeout = 11
        c.bodyTimeout = 13
        c.headerTimeout = 3
        c.maxBuffered = 64_000_000
        c.maxBufferedPerClient = 4_000_000
        return c
    }

    func testEveryUpstreamSetting_reachesTheClientOptions() {
        let budget = MemoryBudget(limit: 1)
        let o = IOSettings(unusual(), budget: budget).upstream
        XCTAssertEqual(o.timeout, 7)
        XCTAssertEqual(o.connectTimeout, 2.5)
        XCTAssertEqual(o.maxResponseBody, 1_000_000)
        XCTAssertEqual(o.caFile, "/etc/ssl/extra.pem")
        XCTAssertEqual(o.maxInFlight, 123)
        XCTAssertEqual(o.idleTimeout, 9)
        XCTAssertTrue(o.budget === budget)
    }

    func testEveryClientSetting_reachesTheConnectionLimits() {
        let budget = MemoryBudget(limit: 1)
        let l = IOSettings(unusual(), budget: budget).connection
        XCTAssertEqual(l.trustedProxies, [IPNetwork("10.0.0.0/8")!])
        XCTAssertEqual(l.maxBody, 2_000_000)
        XCTAssertEqual(l.idleTimeout, 11, "client_timeout bounds an idle keep-alive connection")
        XCTAssertEqual(l.writeTimeout, 11, "and a reply the client does not read")
        XCTAssertEqual(l.bodyTimeout, 13)
        XCTAssertEqual(l.headerTimeout, 3)
        XCTAssertTrue(l.budget === budget)
    }

    func testTheBudget_takesItsLimitsFromTheConfig_andFromAReload() {
        let b = MemoryBudget(GatewayConfig())
        XCTAssertEqual(b.limit, GatewayConfig().maxBuffered)
        XCTAssertEqual(b.perClientLimit, GatewayConfig().bufferedPerClient)
        b.apply(unusual())
        XCTAssertEqual(b.limit, 64_000_000)
        XCTAssertEqual(b.perClientLimit, 4_000_000)
    }

    func testAProbersClient_keepsItsEndpointsTimeouts_andAFewConnections() throws {
        var c = unusual()
        c.probeTimeout = 1
        let url = try UpstreamURL.parse("https://10.0.0.1:8443/base").get()
        let o = UpstreamOptions(probe: ProbeSettings(c, group: nil, url: url))
        XCTAssertEqual(o.timeout, 1)
        XCTAssertEqual(o.connectTimeout, 1, "a connect never outlasts the probe")
        XCTAssertEqual(o.caFile, "/etc/ssl/extra.pem")
        XCTAssertEqual(o.maxResponseBody, 1 << 20)
        XCTAssertEqual(o.maxIdleConnections, 2)
        XCTAssertNil(o.budget)
    }
}
