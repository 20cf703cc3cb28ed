@testable import PeelIO
import XCTest

/// A connection whose request is answered with a 101 becomes a tunnel's: the machine stops its
/// timeouts and reading, and hands over what the client sent past the request.
final class ConnectionMachineTunnelTests: XCTestCase {
    private let t0 = 1000.0

    private func waiting(_ text: String) -> ConnectionMachine {
        var m = ConnectionMachine(limits: ConnectionLimits(), now: t0)
        let bytes = Array(text.utf8)
        let space = m.readSpace()!
        bytes.withUnsafeBytes { space.baseAddress!.copyMemory(from: $0.baseAddress!, byteCount: bytes.count) }
        guard case .dispatch = m.received(bytes.count, now: t0) else {
            XCTFail("the upgrade request was not dispatched")
            return m
        }
        return m
    }

    private let upgrade = "GET /chat HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n"

    func testTunnel_handsOverTheBytesReadPastTheRequest() {
        var m = waiting(upgrade + "\u{81}\u{05}early")
        XCTAssertEqual(m.tunnel(), Array("\u{81}\u{05}early".utf8))
        XCTAssertEqual(m.phase, .tunneled)
    }

    func testTunnel_stopsTheMachinesTimeoutsAndReading() {
        var m = waiting(upgrade)
        XCTAssertEqual(m.tunnel(), [])
        XCTAssertNil(m.deadline)
        XCTAssertFalse(m.wantsRead)
        if case .close = m.timerFired(now: t0 + 100_000) { XCTFail("a tunneled connection timed out") }
        if case .close = m.drain() { XCTFail("a drain closed a tunnel the gateway ends") }
        XCTAssertEqual(m.phase, .tunneled)
    }

    func testTunnel_whenNotWaitingForAnAnswer_isRefused() {
        var m = ConnectionMachine(limits: ConnectionLimits(), now: t0)
        XCTAssertNil(m.tunnel())
        XCTAssertEqual(m.phase, .idle)
    }
}

/// The bounds and ends of a tunnel's two byte streams, driven by a fake clock.
final class TunnelFlowTests: XCTestCase {
    private func flow(halfCloses: Bool = true, highWater: Int = 100, idle: Double = 10) -> TunnelFlow {
        var limits = TunnelLimits()
        limits.highWater = highWater
        limits.idleTimeout = idle
        return TunnelFlow(limits: limits, upstreamHalfCloses: halfCloses, now: 0)
    }

    func testRead_pausesASideWhoseBytesTheOtherHasNotTaken() {
        var f = flow()
        f.read(60, from: .upstream, now: 1)
        XCTAssertEqual(f.readRoom(from: .upstream), 40)
        f.read(40, from: .upstream, now: 1)
        XCTAssertFalse(f.wantsRead(from: .upstream), "a client that does not read holds at most the high-water mark")
        XCTAssertTrue(f.wantsRead(from: .client))
        XCTAssertEqual(f.wrote(30, to: .client, now: 2), .none)
        XCTAssertEqual(f.readRoom(from: .upstream), 30)
        XCTAssertEqual(f.bytesOut, 100)
    }

    func testEndOfInput_isPassedOnOnceTheBytesBeforeItAreWritten() {
        var f = flow()
        f.read(10, from: .client, now: 1)
        XCTAssertEqual(f.endOfInput(.client), .none)
        XCTAssertEqual(f.wrote(10, to: .upstream, now: 2), .shutdownWrite(.upstream))
        XCTAssertEqual(f.endOfInput(.upstream), .close)
        XCTAssertEqual(f.closedBy, .client)
    }

    func testEndOfInput_towardATLSUpstream_closesOnceDrained() {
        var f = flow(halfCloses: false)
        XCTAssertEqual(f.endOfInput(.client), .close)
        XCTAssertEqual(f.closedBy, .client)
    }

    func testEndOfInput_towardATLSUpstream_firstWritesWhatTheUpstreamSentToTheClient() {
        var f = flow(halfCloses: false)
        f.read(10, from: .client, now: 1)
        f.read(50, from: .upstream, now: 1)
        XCTAssertEqual(f.endOfInput(.client), .none)
        XCTAssertEqual(f.wrote(10, to: .upstream, now: 2), .none, "the upstream's 50 bytes are still queued")
        XCTAssertFalse(f.wantsRead(from: .upstream), "closing: nothing more is read")
        XCTAssertFalse(f.wantsRead(from: .client))
        XCTAssertEqual(f.wrote(20, to: .client, now: 3), .none)
        XCTAssertEqual(f.wrote(30, to: .client, now: 3), .close)
        XCTAssertEqual(f.closedBy, .client)
        var g = flow(halfCloses: false)
        g.read(5, from: .upstream, now: 1)
        XCTAssertEqual(g.endOfInput(.client), .none, "nothing queued upstream, but 5 bytes for the client")
        XCTAssertEqual(g.wrote(5, to: .client, now: 2), .close)
    }

    func testUpstreamEnd_halfClosesTheClient() {
        var f = flow()
        XCTAssertEqual(f.endOfInput(.upstream), .shutdownWrite(.client))
        XCTAssertTrue(f.wantsRead(from: .client))
        XCTAssertEqual(f.endOfInput(.client), .close)
        XCTAssertEqual(f.closedBy, .upstream)
    }

    func testTimer_closesAnIdleTunnelOnlyAfterTheIdleTimeout() {
        var f = flow(idle: 10)
        f.read(1, from: .client, now: 5)
        XCTAssertEqual(f.timerFired(now: 14.9), .none)
        XCTAssertEqual(f.deadline, 15)
        XCTAssertEqual(f.timerFired(now: 15), .close)
        XCTAssertEqual(f.closedBy, .idle)
        XCTAssertNil(f.deadline)
    }

    func testFailure_closesAtOnce_andShutdownNamesItself() {
        var f = flow()
        XCTAssertEqual(f.failed(.upstream), .close)
        XCTAssertEqual(f.closedBy, .upstream)
        var g = flow()
        XCTAssertEqual(g.end(.shutdown), .close)
        XCTAssertEqual(g.closedBy, .shutdown)
        XCTAssertEqual(g.end(.idle), .none)
    }
}
