import Foundation
@testable import PeelGateway
import PeelIO
import XCTest

/// Passive ejection and the choice of endpoint, pure or with hand-made groups: no socket (issue 27).
final class EndpointHealthTests: XCTestCase {
    private func book(_ count: Int, after: Int = 3, base: Double = 5, max: Double = 300, share: Double = 0.5,
                      rise: Int = 2) -> EjectionBook {
        EjectionBook(count: count, settings: .init(UpstreamGroup.Eject(after: after, base: base, max: max, maxShare: share), rise: rise))
    }

    func testEjectedAfterConsecutiveConnectFailures_anAnswerStartsTheCountOver() {
        var b = book(3)
        XCTAssertFalse(b.liveFailed(0, at: 0))
        XCTAssertFalse(b.liveFailed(0, at: 0))
        b.liveAnswered(0)
        XCTAssertFalse(b.liveFailed(0, at: 1))
        XCTAssertFalse(b.liveFailed(0, at: 1))
        XCTAssertTrue(b.liveFailed(0, at: 1), "the third failure in a row ejects")
        XCTAssertTrue(b.isEjected(0))
        XCTAssertEqual(b.entries[0].until, 6)
        XCTAssertEqual(b.entries[0].ejections, 1)
    }

    func testBackAfterRisePassingProbes_noSoonerThanTheEjectionEnds() {
        var b = book(3, rise: 2)
        for _ in 0..<3 { _ = b.liveFailed(1, at: 10) }
        XCTAssertTrue(b.isEjected(1))
        XCTAssertFalse(b.probePassed(1, at: 11))
        XCTAssertFalse(b.probePassed(1, at: 12), "two passes, but the five seconds are not over")
        b.probeFailed(1)
        XCTAssertFalse(b.probePassed(1, at: 15.5), "a failed probe starts the passes over")
        XCTAssertTrue(b.probePassed(1, at: 16))
        XCTAssertFalse(b.isEjected(1))
    }

    func testEjectionDoublesWhileItRepeats_upToMax_andStartsOverAfterALongRun() {
        var b = book(2, after: 1, base: 5, max: 12, share: 1, rise: 1)
        XCTAssertTrue(b.liveFailed(0, at: 0))
        XCTAssertEqual(b.entries[0].until, 5)
        XCTAssertTrue(b.probePassed(0, at: 5))
        XCTAssertTrue(b.liveFailed(0, at: 6))
        XCTAssertEqual(b.entries[0].until, 16, "twice the base")
        XCTAssertTrue(b.probePassed(0, at: 16))
        XCTAssertTrue(b.liveFailed(0, at: 17))
        XCTAssertEqual(b.entries[0].until, 29, "four times the base, held to max (12)")
        XCTAssertTrue(b.probePassed(0, at: 29))
        // In the pool for longer than max: the next ejection is the base again.
        XCTAssertTrue(b.liveFailed(0, at: 42))
        XCTAssertEqual(b.entries[0].until, 47)
        XCTAssertEqual(b.entries[0].ejections, 4)
    }

    func testMaxShareCapsEjection_butOneMayAlwaysBeEjected() {
        var b = book(3, after: 1, share: 0.5)
        XCTAssertEqual(b.cap, 1, "half of three, rounded down")
        XCTAssertTrue(b.liveFailed(0, at: 0))
        XCTAssertFalse(b.liveFailed(1, at: 0), "a second ejection would pass max_share")
        XCTAssertFalse(b.isEjected(1))
        var single = book(1, after: 1, share: 0.1)
        XCTAssertEqual(single.cap, 1)
        XCTAssertTrue(single.liveFailed(0, at: 0), "a group of one can lose its only endpoint")
    }

    func testCarriedAcrossAReload_endpointsThatStayKeepTheirEntries() {
        var b = book(3, after: 1, share: 1)
        XCTAssertTrue(b.liveFailed(2, at: 0))
        let next = b.carried(to: [2, nil], settings: b.settings)
        XCTAssertTrue(next.isEjected(0), "the old third endpoint is the new first")
        XCTAssertFalse(next.isEjected(1))
    }

    func testGroupVerdict() {
        XCTAssertEqual(GroupVerdict.state(available: [false, true], states: [.reachable, .unknown]), .unknown)
        XCTAssertEqual(GroupVerdict.state(available: [false, true], states: [.reachable, .reachable]), .reachable)
        XCTAssertEqual(GroupVerdict.state(available: [false, false], states: [.reachable, .reachable]), .unreachable,
                       "ejected endpoints are not available however their probes read")
    }

    // MARK: the group and the picker

    private func group(_ file: String) throws -> (UpstreamGroups, UpstreamGroupState) {
        let config = try loadConfig(file: file, environment: [:])
        let groups = UpstreamGroups(config, onTransition: { _, _ in })
        return (groups, try XCTUnwrap(groups.named("app")))
    }

    private let three = #"""
        {"upstreams": {"app": {"endpoints": ["http://127.0.0.1:1", "http://127.0.0.1:2", {"url": "http://127.0.0.1:3", "weight": 2}],
                               "eject": {"after": 1, "max_share": 1}}},
         "routes": [{"prefix": "/", "upstream": "app"}]}
        """#

    func testRoundRobinFollowsWeights_skipsWhatIsOut_andTried() throws {
        let (_, g) = try group(three)
        let picker = try EndpointPicker(g)
        var counts = [0, 0, 0]
        for _ in 0..<400 { counts[picker.pick()!] += 1 }
        XCTAssertEqual(counts, [100, 100, 200])
        // Smooth: any four picks in a row (the weights' total) hold each endpoint by its weight.
        let order = (0..<12).map { _ in picker.pick()! }
        for start in 0...8 {
            XCTAssertEqual(order[start..<start + 4].sorted(), [0, 1, 2, 2], "\(order)")
        }
        XCTAssertNil(picker.pick(tried: 0b111))
        XCTAssertEqual(picker.pick(tried: 0b101), 1)
        // One connect failure ejects (after 1): the endpoint leaves the pool.
        g.endpoints[2].liveFailed(.refused("test"))
        XCTAssertFalse(g.endpoints[2].available.load(ordering: .relaxed))
        XCTAssertEqual(Set((0..<10).map { _ in picker.pick()! }), [0, 1])
        XCTAssertEqual(g.ejection.entries[2].ejections, 1)
    }

    func testGroupGoesDownWhenNoEndpointIsLeft_andAnnouncesIt() throws {
        let config = try loadConfig(file: three, environment: [:])
        let seen = Locked<[ReachabilityTransition]>([])
        let groups = UpstreamGroups(config, onTransition: { _, t in seen.withLock { $0.append(t) } })
        let g = try XCTUnwrap(groups.named("app"))
        XCTAssertEqual(g.state, .unknown)
        for e in g.endpoints { e.liveFailed(.refused("no")) }
        XCTAssertTrue(g.isDown)
        XCTAssertEqual(seen.withLock { $0.map(\.to) }, [.unreachable])
        XCTAssertEqual(seen.withLock { $0.first?.publicReason }, "endpoint ejected: connect refused")
        XCTAssertNil(try EndpointPicker(g).pick())
    }

    func testLeastRequest_prefersTheEndpointWithFewerCallsInFlight() throws {
        let (_, g) = try group(#"""
            {"upstreams": {"app": {"endpoints": ["http://127.0.0.1:1", "http://127.0.0.1:2"], "balance": "least_request"}},
             "routes": [{"prefix": "/", "upstream": "app"}]}
            """#)
        let picker = try EndpointPicker(g)
        g.endpoints[0].inFlight.store(10, ordering: .relaxed)
        XCTAssertEqual(Set((0..<50).map { _ in picker.pick()! }), [1], "with two endpoints both are always drawn")
        g.endpoints[0].inFlight.store(0, ordering: .relaxed)
        g.endpoints[1].inFlight.store(3, ordering: .relaxed)
        XCTAssertEqual(picker.pick(), 0)
        XCTAssertEqual(picker.pick(tried: 0b01), 1, "what was tried is not drawn")
    }

    func testWeightedLeastRequest_sharesByWeightWhenIdle_andByWeightOverLoad() throws {
        let (_, g) = try group(#"""
            {"upstreams": {"app": {"endpoints": [{"url": "http://127.0.0.1:1", "weight": 1}, {"url": "http://127.0.0.1:2", "weight": 3}],
                                   "balance": "least_request", "eject": {"after": 1, "max_share": 1}}},
             "routes": [{"prefix": "/", "upstream": "app"}]}
            """#)
        let picker = try EndpointPicker(g)
        var counts = [0, 0]
        for _ in 0..<400 { counts[picker.pick()!] += 1 }
        XCTAssertEqual(counts, [100, 300], "idle endpoints share calls by weight")
        // Weight 3 with 5 calls in flight reads 3/6 against weight 1 with none, 1/1: the light one
        // now takes two calls of three.
        g.endpoints[1].inFlight.store(5, ordering: .relaxed)
        counts = [0, 0]
        for _ in 0..<300 { counts[picker.pick()!] += 1 }
        XCTAssertEqual(counts, [200, 100])
        XCTAssertEqual(picker.pick(tried: 0b01), 1, "what was tried is not drawn")
        // Loaded far past their weights, both still take calls.
        g.endpoints[0].inFlight.store(5_000_000, ordering: .relaxed)
        g.endpoints[1].inFlight.store(9_000_000, ordering: .relaxed)
        XCTAssertEqual(Set((0..<4).map { _ in picker.pick()! }), [0, 1])
        g.endpoints[0].liveFailed(.refused("no"))
        XCTAssertEqual(Set((0..<20).map { _ in picker.pick()! }), [1], "an endpoint out of the pool gets nothing")
    }

    func testAReloadKeepsTheStateOfEndpointsThatStay() throws {
        let config = try loadConfig(file: three, environment: [:])
        let first = UpstreamGroups(config, onTransition: { _, _ in })
        let old = try XCTUnwrap(first.named("app"))
        old.endpoints[1].liveFailed(.refused("no"))
        XCTAssertTrue(old.ejection.isEjected(1))
        let smaller = try loadConfig(file: #"""
            {"upstreams": {"app": {"endpoints": ["http://127.0.0.1:2", "http://127.0.0.1:4"], "eject": {"after": 1, "max_share": 1}}},
             "routes": [{"prefix": "/", "upstream": "app"}]}
            """#, environment: [:])
        let next = try XCTUnwrap(UpstreamGroups(smaller, previous: first, onTransition: { _, _ in }).named("app"))
        XCTAssertTrue(next.endpoints[0] === old.endpoints[1], "the endpoint that stays is the same state")
        XCTAssertTrue(next.ejection.isEjected(0), "and stays ejected")
        XCTAssertFalse(next.ejection.isEjected(1))
        XCTAssertFalse(next.endpoints[0].available.load(ordering: .relaxed))
        // Evidence about it now reaches the new generation's group.
        next.endpoints[0].liveAnswered()
        XCTAssertTrue(next.endpoints[0].owner.withLock { $0.group } === next)
    }

    func testEvidenceForAGroupAReloadReplaced_goesToTheGroupThatHoldsTheEndpoint() throws {
        let config = try loadConfig(file: three, environment: [:])
        let first = UpstreamGroups(config, onTransition: { _, _ in })
        let old = try XCTUnwrap(first.named("app"))
        let e = old.endpoints[1]
        // A call reads the endpoint's group, then a reload replaces that group before the failure
        // is recorded (the reload runs inside the first attempt): the old group refuses it, and it
        // lands in the new one.
        var next: UpstreamGroupState?
        var tried: [ObjectIdentifier] = []
        e.withOwner { g in
            tried.append(ObjectIdentifier(g))
            if next == nil { next = UpstreamGroups(config, previous: first, onTransition: { _, _ in }).named("app") }
            return g.liveFailed(e, .refused("late"))
        }
        let now = try XCTUnwrap(next)
        XCTAssertEqual(tried, [ObjectIdentifier(old), ObjectIdentifier(now)])
        XCTAssertFalse(old.ejection.isEjected(1), "the replaced group took nothing")
        XCTAssertTrue(now.ejection.isEjected(1), "the failure ejected it in the group that serves")
        XCTAssertFalse(e.available.load(ordering: .relaxed))
        // Later evidence goes straight to the new group.
        XCTAssertFalse(old.liveAnswered(e))
        XCTAssertTrue(now.liveAnswered(e))
    }

    func testEvidenceThatWaitsOnAHandover_landsInTheNewGroup() throws {
        let (_, old) = try group(three)
        let e = old.endpoints[1]
        let done = DispatchSemaphore(value: 0)
        let next = old.handOver { book, prior in
            // The failure reads the old group as the owner and waits on its lock while the new
            // group is built from the book.
            Thread.detachNewThread { e.liveFailed(.refused("during")); done.signal() }
            Thread.sleep(forTimeInterval: 0.05)
            return UpstreamGroupState(name: "app", endpoints: old.endpoints, weights: old.weights, balance: old.balance,
                                      ejection: book, prior: prior, onTransition: { _, _ in })
        }
        XCTAssertEqual(done.wait(timeout: .now() + 5), .success)
        XCTAssertFalse(old.ejection.isEjected(1), "the book was read before the failure")
        XCTAssertTrue(next.ejection.isEjected(1), "so the failure belongs to the new group")
    }

    func testAReplacedGroup_leavesThePoolToTheGroupThatServes() throws {
        let config = try loadConfig(file: three, environment: [:])
        let announced = Locked<[ReachabilityState]>([])
        let first = UpstreamGroups(config, onTransition: { _, t in announced.withLock { $0.append(t.to) } })
        let old = try XCTUnwrap(first.named("app"))
        let removed = old.endpoints[0], kept = old.endpoints[1]
        let smaller = try loadConfig(file: #"""
            {"upstreams": {"app": {"endpoints": ["http://127.0.0.1:2", "http://127.0.0.1:4"], "eject": {"after": 1, "max_share": 1}}},
             "routes": [{"prefix": "/", "upstream": "app"}]}
            """#, environment: [:])
        let next = try XCTUnwrap(UpstreamGroups(smaller, previous: first, onTransition: { _, _ in }).named("app"))
        kept.liveFailed(.refused("no"))
        XCTAssertTrue(next.ejection.isEjected(0))
        XCTAssertFalse(kept.available.load(ordering: .relaxed))
        // A late failure of the endpoint the reload removed reaches the old group, whose stale book
        // must not put the kept endpoint back in the pool.
        removed.liveFailed(.refused("late"))
        XCTAssertFalse(kept.available.load(ordering: .relaxed))
        XCTAssertEqual(announced.withLock { $0 }, [])
    }

    func testAReloadThatChangesAGroupsState_announcesIt() throws {
        let two = try loadConfig(file: #"""
            {"upstreams": {"app": {"endpoints": ["http://127.0.0.1:1", "http://127.0.0.1:2"], "eject": {"after": 1, "max_share": 0.5}}},
             "routes": [{"prefix": "/", "upstream": "app"}]}
            """#, environment: [:])
        let first = UpstreamGroups(two, onTransition: { _, _ in })
        let g = try XCTUnwrap(first.named("app"))
        g.endpoints[0].liveFailed(.refused("no"))
        XCTAssertTrue(g.ejection.isEjected(0))
        XCTAssertFalse(g.isDown, "the other endpoint is left")
        let one = try loadConfig(file: #"""
            {"upstreams": {"app": {"endpoints": ["http://127.0.0.1:1"], "eject": {"after": 1}}}, "routes": [{"prefix": "/", "upstream": "app"}]}
            """#, environment: [:])
        let seen = Locked<[ReachabilityTransition]>([])
        let reloaded = UpstreamGroups(one, previous: first, onTransition: { _, t in seen.withLock { $0.append(t) } })
        let next = try XCTUnwrap(reloaded.named("app"))
        XCTAssertTrue(next.isDown, "only the ejected endpoint is left")
        XCTAssertTrue(seen.withLock { $0.isEmpty }, "announced only once the workers serve it")
        reloaded.announceReload()
        XCTAssertEqual(seen.withLock { $0.map(\.to) }, [.unreachable], "apps hear of it")
        XCTAssertEqual(seen.withLock { $0.first?.publicReason }, "configuration changed")
    }

    func testAnEndpointBackFromEjection_startsItsFailureCountOver() {
        var b = EjectionBook(count: 2, settings: .init(UpstreamGroup.Eject(after: 2, base: 1, max: 10, maxShare: 1), rise: 1))
        _ = b.liveFailed(0, at: 0)
        XCTAssertTrue(b.liveFailed(0, at: 0))
        // A call in flight while it was out fails too.
        XCTAssertFalse(b.liveFailed(0, at: 0.5))
        XCTAssertTrue(b.probePassed(0, at: 1))
        XCTAssertFalse(b.liveFailed(0, at: 2), "one failure after its return is not two")
    }
}
