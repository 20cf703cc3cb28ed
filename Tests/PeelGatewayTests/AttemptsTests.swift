@testable import PeelGateway
import PeelIO
import XCTest

/// One call's attempts beside the picker: which failures may move to another endpoint, for which
/// methods, how many times, and that an attempt counts in its endpoint's calls in flight until it ends.
final class AttemptsTests: XCTestCase {
    /// Attempts for a call whose first attempt sent a GET to a group of `endpoints`.
    private func attempts(_ picker: EndpointPicker) -> Attempts {
        var a = Attempts()
        a.keep(UpstreamRequest(method: "GET", target: .origin(picker.endpoints[0], path: "/a", query: nil)),
               endpoints: picker.endpoints.count)
        return a
    }

    private func group(endpoints: Int) throws -> (EndpointPicker, UpstreamGroupState) {
        let urls = (1...endpoints).map { "\"http://127.0.0.1:\($0)\"" }.joined(separator: ", ")
        let config = try loadConfig(file: #"{"upstreams": {"app": {"endpoints": [\#(urls)]}}, "routes": [{"prefix": "/", "upstream": "app"}]}"#,
                                    environment: [:])
        let groups = UpstreamGroups(config, onTransition: { _, _ in })
        let g = try XCTUnwrap(groups.named("app"))
        return (try EndpointPicker(g), g)
    }

    func testAConnectionNeverMade_movesAnyMethod_aLostOneMovesOnlyIdempotentOnes() throws {
        let (picker, g) = try group(endpoints: 3)
        var a = attempts(picker)
        a.start(on: g.endpoints[0], at: 0)
        for failure: UpstreamFailure in [.refused("no"), .connectTimeout("slow"), .dns("none"), .tls("bad")] {
            XCTAssertNotNil(a.next(after: failure, wentOut: false, idempotent: false, picker: picker), "\(failure): nothing was sent")
            XCTAssertNil(a.next(after: failure, wentOut: true, idempotent: false, picker: picker),
                         "\(failure) on curl's own retry of a POST that went out: not sent again")
            XCTAssertNotNil(a.next(after: failure, wentOut: true, idempotent: true, picker: picker))
        }
        for failure: UpstreamFailure in [.reset("gone"), .notResent("twice")] {
            XCTAssertNil(a.next(after: failure, wentOut: true, idempotent: false, picker: picker), "\(failure): RFC 9110 §9.2.2")
            XCTAssertNotNil(a.next(after: failure, wentOut: true, idempotent: true, picker: picker))
        }
        for failure: UpstreamFailure in [.timeout("slow"), .tooLarge, .protocolError("bad"), .overBudget] {
            XCTAssertNil(a.next(after: failure, wentOut: true, idempotent: true, picker: picker), "\(failure): the endpoint answered or may have")
        }
    }

    func testEachAttemptTakesAnEndpointNotTried_atMostThree_andNoneWithOneEndpoint() throws {
        let (picker, g) = try group(endpoints: 4)
        var a = attempts(picker)
        var used: Set<Int> = []
        var next: Int? = try XCTUnwrap(picker.pick())
        while let i = next {
            XCTAssertTrue(used.insert(i).inserted, "endpoint \(i) tried twice")
            a.start(on: g.endpoints[i], at: i)
            next = a.next(after: .refused("no"), wentOut: false, idempotent: true, picker: picker)
        }
        XCTAssertEqual(a.count, Attempts.limit)
        XCTAssertEqual(used.count, Attempts.limit)

        let (single, one) = try group(endpoints: 1)
        var b = attempts(single)
        b.start(on: one.endpoints[0], at: 0)
        XCTAssertNil(b.sent, "nothing kept where no other endpoint could take it")
        XCTAssertNil(b.next(after: .refused("no"), wentOut: false, idempotent: true, picker: single))
    }

    func testAnAttemptCountsInItsEndpointsCallsInFlight_untilItEnds_once() throws {
        let (_, g) = try group(endpoints: 2)
        var a = Attempts()
        a.start(on: g.endpoints[0], at: 0)
        XCTAssertEqual(g.endpoints[0].inFlight.load(ordering: .relaxed), 1)
        a.start(on: g.endpoints[1], at: 1)
        XCTAssertEqual(g.endpoints[0].inFlight.load(ordering: .relaxed), 0, "a new attempt ends the one before")
        XCTAssertEqual(g.endpoints[1].inFlight.load(ordering: .relaxed), 1)
        a.end()
        a.end()
        XCTAssertEqual(g.endpoints[1].inFlight.load(ordering: .relaxed), 0, "ended once, however often it is told")
        XCTAssertEqual(a.index, 1)
        XCTAssertEqual(a.count, 2)
    }
}
