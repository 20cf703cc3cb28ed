@testable import PeelGateway
import PeelIO
import XCTest

/// What PeelIO is told of a configuration: every setting reaches the upstream client options, the
/// connection limits and the body budget, at start and on reload alike.
final class IOSettingsTests: XCTestCase {
    /// A configuration whose every IO-bound value differs from its default.
    private func unusual() -> GatewayConfig {
        var c = GatewayConfig()
        c.calls.timeout = 7
        c.calls.connectTimeout = 2.5
        c.calls.maxResponseBody = 1_000_000
        c.calls.caFile = "/etc/ssl/extra.pem"
        c.calls.maxInFlight = 123
        c.calls.idleTimeout = 9
        c.clients.trustedProxies = [IPNetwork("10.0.0.0/8")!]
        c.memory.maxBody = 2_000_000
        c.clients.timeout = 11
        c.clients.bodyTimeout = 13
        c.clients.headerTimeout = 3
        c.memory.maxBuffered = 64_000_000
        c.memory.maxBufferedPerClient = 4_000_000
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
        let b = MemoryBudget(GatewayConfig.Memory())
        XCTAssertEqual(b.limit, GatewayConfig.Memory().maxBuffered)
        XCTAssertEqual(b.perClientLimit, GatewayConfig.Memory().bufferedPerClient)
        b.apply(unusual().memory)
        XCTAssertEqual(b.limit, 64_000_000)
        XCTAssertEqual(b.perClientLimit, 4_000_000)
    }

    func testAProbersClient_keepsItsEndpointsTimeouts_andAFewConnections() throws {
        var c = unusual()
        c.probe.timeout = 1
        let url = try UpstreamURL.parse("https://10.0.0.1:8443/base").get()
        let o = UpstreamOptions(probe: ProbeSettings(c.probe, calls: c.calls, group: nil, url: url))
        XCTAssertEqual(o.timeout, 1)
        XCTAssertEqual(o.connectTimeout, 1, "a connect never outlasts the probe")
        XCTAssertEqual(o.caFile, "/etc/ssl/extra.pem")
        XCTAssertEqual(o.maxResponseBody, 1 << 20)
        XCTAssertEqual(o.maxIdleConnections, 2)
        XCTAssertNil(o.budget)
    }
}
