@testable import PeelIO
import XCTest

/// ConnectionMachine without sockets: bytes are delivered the way ClientConnection reads them, and
/// time is a number the test moves.
final class ConnectionMachineTests: XCTestCase {
    /// What a test compares of an action: a dispatched request's method, target and body as text.
    enum Seen: Equatable {
        case sendContinue, probe, cancel, close, linger
        case dispatch(String, String, body: String)
        case refuse(RequestError)
        case none

        /// Reads `action` out.
        init(_ action: ConnectionMachine.Action) {
            switch action {
            case .none: self = .none
            case .dispatch(let r): self = .dispatch(r.buffer.string(r.method), r.buffer.string(r.target), body: r.buffer.string(r.body))
            case .refuse(let e): self = .refuse(e)
            case .sendContinue: self = .sendContinue
            case .probe: self = .probe
            case .cancel: self = .cancel
            case .close: self = .close
            case .linger: self = .linger
            }
        }
    }

    /// The fake clock's start (any value: the machine only compares the times it is given).
    private let t0 = 1_000.0

    /// Limits whose timeouts all differ, so a deadline tells which one runs.
    private func limits(_ change: (inout ConnectionLimits) -> Void = { _ in }) -> ConnectionLimits {
        var l = ConnectionLimits()
        l.headerTimeout = 10
        l.bodyTimeout = 20
        l.idleTimeout = 30
        l.writeTimeout = 40
        l.lingerTime = 2
        change(&l)
        return l
    }

    /// A machine started at `t0`.
    private func machine(_ change: (inout ConnectionLimits) -> Void = { _ in }) -> ConnectionMachine {
        ConnectionMachine(limits: limits(change), now: t0)
    }

    /// Feeds `text` as ClientConnection does (readSpace, copy in, received), at most `step` bytes a
    /// read, until all is in or nothing may be read; returns the actions other than `.none`.
    @discardableResult
    private func deliver(_ text: String, to m: inout ConnectionMachine, now: Double, step: Int = .max) -> [Seen] {
        let bytes = Array(text.utf8)
        var seen: [Seen] = []
        var i = 0
        while i < bytes.count {
            guard let space = m.readSpace(), let p = space.baseAddress, space.count > 0 else { break }
            let n = min(space.count, step, bytes.count - i)
            bytes[i..<(i + n)].withUnsafeBytes { p.copyMemory(from: $0.baseAddress!, byteCount: n) }
            i += n
            let action = Seen(m.received(n, now: now))
            if action != .none { seen.append(action) }
        }
        XCTAssertEqual(i, bytes.count, "the machine stopped taking bytes")
        return seen
    }

    /// Feeds `text` and returns the one request it dispatches (failing otherwise).
    private func dispatched(_ text: String, to m: inout ConnectionMachine, now: Double, step: Int = .max,
                            file: StaticString = #filePath, line: UInt = #line) -> ParsedRequest? {
        var requests: [ParsedRequest] = []
        let bytes = Array(text.utf8)
        var i = 0
        while i < bytes.count {
            guard let space = m.readSpace(), let p = space.baseAddress, space.count > 0 else { break }
            let n = min(space.count, step, bytes.count - i)
            bytes[i..<(i + n)].withUnsafeBytes { p.copyMemory(from: $0.baseAddress!, byteCount: n) }
            i += n
            switch m.received(n, now: now) {
            case .dispatch(let r): requests.append(r)
            case .none: break
            case let other: XCTFail("unexpected \(Seen(other))", file: file, line: line)
            }
        }
        XCTAssertEqual(requests.count, 1, "requests dispatched", file: file, line: line)
        return requests.first
    }

    /// Answers the waiting request: starts the reply at `now` and finishes it a second later;
    /// returns whether the reply said it closes, and what the machine did after it.
    private func answer(_ m: inout ConnectionMachine, now: Double, closing: Bool = false) -> (closes: Bool, then: Seen) {
        let closes = m.replyStarted(closing: closing, now: now)
        return (closes, Seen(m.replyFinished(now: now + 1)))
    }

    /// A keep-alive GET without a body.
    private let get = "GET /a HTTP/1.1\r\nHost: x\r\n\r\n"

    // MARK: transitions

    func testFirstByte_movesIdleToHead_withTheHeaderDeadline() {
        var m = machine()
        XCTAssertEqual(m.phase, .idle)
        XCTAssertEqual(m.deadline, t0 + 30)
        XCTAssertTrue(m.wantsRead)
        XCTAssertEqual(deliver("G", to: &m, now: t0 + 5), [])
        XCTAssertEqual(m.phase, .head)
        XCTAssertEqual(m.deadline, t0 + 5 + 10)
    }

    func testCompleteHead_withBodyPending_movesHeadToBody_withTheBodyDeadline() {
        var m = machine()
        deliver("POST /p HTTP/1.1\r\n", to: &m, now: t0)
        XCTAssertEqual(m.phase, .head)
        XCTAssertEqual(deliver("Content-Length: 5\r\n\r\nhe", to: &m, now: t0 + 3), [])
        XCTAssertEqual(m.phase, .body)
        XCTAssertEqual(m.deadline, t0 + 3 + 20)
        // More body bytes do not move the body deadline: it bounds the whole body.
        deliver("l", to: &m, now: t0 + 4)
        XCTAssertEqual(m.deadline, t0 + 3 + 20)
    }

    func testCompleteBody_dispatchesTheRequest_andWaitsWithoutDeadline() throws {
        var m = machine()
        deliver("POST /p?q=1 HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n", to: &m, now: t0)
        let r = try XCTUnwrap(dispatched("hello", to: &m, now: t0 + 1))
        XCTAssertEqual(r.buffer.string(r.method), "POST")
        XCTAssertEqual(r.buffer.string(r.target), "/p?q=1")
        XCTAssertEqual(r.buffer.string(r.body), "hello")
        XCTAssertEqual(r.minorVersion, 1)
        XCTAssertTrue(r.keepAlive)
        XCTAssertEqual(r.fields.map { r.buffer.string(Int($0.nameStart)..<Int($0.nameEnd)) }, ["Host", "Content-Length"])
        XCTAssertEqual(m.phase, .waiting)
        XCTAssertNil(m.deadline)
        XCTAssertTrue(m.wantsRead, "pipelined requests are read ahead while one waits")
    }

    func testReplyStarted_movesWaitingToWriting_withTheWriteDeadline() {
        var m = machine()
        XCTAssertEqual(deliver(get, to: &m, now: t0), [.dispatch("GET", "/a", body: "")])
        XCTAssertFalse(m.replyStarted(closing: false, now: t0 + 2))
        XCTAssertEqual(m.phase, .writing)
        XCTAssertEqual(m.deadline, t0 + 2 + 40)
    }

    func testReplyFinished_onKeepAlive_returnsToIdle_withAFreshIdleDeadline() {
        var m = machine()
        deliver(get, to: &m, now: t0)
        let (closes, then) = answer(&m, now: t0 + 2)
        XCTAssertFalse(closes)
        XCTAssertEqual(then, .none)
        XCTAssertEqual(m.phase, .idle)
        XCTAssertEqual(m.deadline, t0 + 3 + 30)
        XCTAssertEqual(m.buffer.count, 0)
        // The connection serves the next request.
        XCTAssertEqual(deliver("GET /b HTTP/1.1\r\n\r\n", to: &m, now: t0 + 4), [.dispatch("GET", "/b", body: "")])
    }

    // Closing with the client's bytes unread would reset the connection under the answer: every
    // close after an answer shuts the sending side and reads out until the client closes.
    func testConnectionClose_lingersAfterTheReplyThenClosesOnEndOfInput() {
        var m = machine()
        let r = dispatched("GET / HTTP/1.1\r\nConnection: keep-alive, Close\r\n\r\n", to: &m, now: t0)
        XCTAssertEqual(r?.keepAlive, false)
        let (closes, then) = answer(&m, now: t0)
        XCTAssertTrue(closes, "the reply must say Connection: close")
        XCTAssertEqual(then, .linger)
        XCTAssertEqual(m.phase, .lingering)
        XCTAssertEqual(m.deadline, t0 + 1 + 2, "linger time from the end of the reply")
        XCTAssertTrue(m.wantsRead)
        XCTAssertEqual(Seen(m.endOfInput(now: t0 + 1.1)), .close)
        XCTAssertEqual(m.phase, .closed)
        XCTAssertNil(m.deadline)
        XCTAssertFalse(m.wantsRead)
    }

    func testConnectionClose_afterTheClientsEndOfInput_closesWithoutLingering() {
        var m = machine()
        _ = dispatched("GET / HTTP/1.1\r\nConnection: close\r\n\r\n", to: &m, now: t0)
        XCTAssertEqual(Seen(m.endOfInput(now: t0)), .probe)
        let (closes, then) = answer(&m, now: t0)
        XCTAssertTrue(closes)
        XCTAssertEqual(then, .close)
        XCTAssertEqual(m.phase, .closed)
    }

    func testEndlessStream_closesAtTheClientsEndOfInput() {
        var m = machine()
        _ = dispatched(get, to: &m, now: t0)
        XCTAssertFalse(m.replyStarted(closing: false, now: t0))
        XCTAssertEqual(Seen(m.streamEndsWithInput()), .none)
        XCTAssertTrue(m.wantsRead, "an endless stream must hear its client leave")
        XCTAssertEqual(Seen(m.endOfInput(now: t0 + 1)), .close)
        XCTAssertEqual(m.phase, .closed)
    }

    func testEndlessStream_afterTheClientsEndOfInput_closesAtOnce() {
        var m = machine()
        _ = dispatched(get, to: &m, now: t0)
        XCTAssertEqual(Seen(m.endOfInput(now: t0)), .probe)
        _ = m.replyStarted(closing: false, now: t0)
        XCTAssertEqual(Seen(m.streamEndsWithInput()), .close)
    }

    func testEndlessStream_withItsReadAheadFull_stillListensToTheClient() {
        var m = machine { $0.maxPipelined = 100 }
        _ = dispatched(get, to: &m, now: t0)
        _ = m.replyStarted(closing: false, now: t0)
        _ = m.streamEndsWithInput()
        while let space = m.readSpace(), space.count > 0 { deliver(String(repeating: "x", count: space.count), to: &m, now: t0) }
        XCTAssertTrue(m.wantsRead, "a full read-ahead must not stop the read that sees the client leave")
        XCTAssertTrue(m.dropsInput)
        XCTAssertEqual(Seen(m.endOfInput(now: t0 + 1)), .close)
    }

    func testEndlessStream_finished_theNextRequestIsReadAsUsual() {
        var m = machine()
        _ = dispatched(get, to: &m, now: t0)
        _ = m.replyStarted(closing: false, now: t0)
        _ = m.streamEndsWithInput()
        m.streamFinished()
        XCTAssertEqual(Seen(m.replyFinished(now: t0 + 1)), .none)
        _ = dispatched(get, to: &m, now: t0 + 2)
        _ = m.replyStarted(closing: false, now: t0 + 2)
        XCTAssertEqual(Seen(m.endOfInput(now: t0 + 3)), .none, "a plain answer still reaches a half-closed client")
    }

    func testOtherStream_keepsWritingToAHalfClosedClient() {
        var m = machine()
        _ = dispatched(get, to: &m, now: t0)
        _ = m.replyStarted(closing: false, now: t0)
        XCTAssertEqual(Seen(m.endOfInput(now: t0 + 1)), .none)
        XCTAssertEqual(m.phase, .writing)
    }

    func testLingering_endsAtTheLingerTime() {
        var m = machine()
        _ = dispatched("GET / HTTP/1.0\r\n\r\n", to: &m, now: t0)
        XCTAssertEqual(answer(&m, now: t0).then, .linger)
        XCTAssertEqual(Seen(m.timerFired(now: t0 + 2.9)), .none)
        XCTAssertEqual(Seen(m.timerFired(now: t0 + 3)), .close)
    }

    func testHTTP10WithoutKeepAlive_closesAfterTheReply() {
        var m = machine()
        let r = dispatched("GET / HTTP/1.0\r\n\r\n", to: &m, now: t0)
        XCTAssertEqual(r?.minorVersion, 0)
        XCTAssertEqual(r?.keepAlive, false)
        let (closes, then) = answer(&m, now: t0)
        XCTAssertTrue(closes)
        XCTAssertEqual(then, .linger)
        XCTAssertEqual(m.phase, .lingering)
    }

    func testHTTP10WithKeepAlive_staysOpen() {
        var m = machine()
        let r = dispatched("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", to: &m, now: t0)
        XCTAssertEqual(r?.keepAlive, true)
        let (closes, then) = answer(&m, now: t0)
        XCTAssertFalse(closes)
        XCTAssertEqual(then, .none)
        XCTAssertEqual(m.phase, .idle)
    }

    func testReplyThatClosesItself_closesTheConnection() {
        var m = machine()
        deliver(get, to: &m, now: t0)
        let (closes, then) = answer(&m, now: t0, closing: true)
        XCTAssertTrue(closes)
        XCTAssertEqual(then, .linger)
    }

    func testRefusal_waitsWritesLingersThenClosesOnEndOfInput() {
        var m = machine()
        XCTAssertEqual(deliver("GET /a HTTP/1.1\r\nBad Name: x\r\n\r\n", to: &m, now: t0),
                       [.refuse(.malformed(.spaceBeforeColon))])
        XCTAssertEqual(m.phase, .waiting)
        XCTAssertNil(m.deadline)
        XCTAssertTrue(m.replyStarted(closing: false, now: t0 + 1), "a refusal always closes")
        XCTAssertEqual(m.phase, .writing)
        XCTAssertEqual(Seen(m.replyFinished(now: t0 + 2)), .linger)
        XCTAssertEqual(m.phase, .lingering)
        XCTAssertEqual(m.deadline, t0 + 2 + 2)
        XCTAssertTrue(m.wantsRead, "lingering reads and discards")
        XCTAssertEqual(m.readSpace()?.count, 0, "nothing is kept while lingering")
        XCTAssertEqual(Seen(m.received(0, now: t0 + 3)), .none)
        XCTAssertEqual(Seen(m.endOfInput(now: t0 + 3)), .close)
        XCTAssertEqual(m.phase, .closed)
    }

    func testDrain_closesAnIdleConnectionAtOnce() {
        var m = machine()
        XCTAssertEqual(Seen(m.drain()), .close)
        XCTAssertEqual(m.phase, .closed)
    }

    func testDrain_letsABusyConnectionFinishItsReplyThenCloses() {
        var m = machine()
        deliver(get, to: &m, now: t0)
        XCTAssertEqual(Seen(m.drain()), .none)
        XCTAssertEqual(m.phase, .waiting)
        let (closes, then) = answer(&m, now: t0)
        XCTAssertTrue(closes, "the reply must say Connection: close")
        XCTAssertEqual(then, .linger)
    }

    func testDrain_whileReadingAHead_letsTheRequestFinishThenCloses() {
        var m = machine()
        deliver("GET /a HTTP/1.1\r\n", to: &m, now: t0)
        XCTAssertEqual(Seen(m.drain()), .none)
        XCTAssertEqual(deliver("\r\n", to: &m, now: t0), [.dispatch("GET", "/a", body: "")])
        XCTAssertEqual(answer(&m, now: t0).then, .linger)
    }

    // MARK: timeouts

    func testIdleTimeout_closes() {
        var m = machine()
        XCTAssertEqual(Seen(m.timerFired(now: t0 + 29.9)), .none)
        XCTAssertEqual(m.phase, .idle)
        XCTAssertEqual(Seen(m.timerFired(now: t0 + 30)), .close)
        XCTAssertEqual(m.phase, .closed)
    }

    func testIdleTimeout_afterAReply_countsFromTheReplysEnd() {
        var m = machine()
        deliver(get, to: &m, now: t0 + 25)
        _ = answer(&m, now: t0 + 26)
        XCTAssertEqual(Seen(m.timerFired(now: t0 + 30)), .none)
        XCTAssertEqual(Seen(m.timerFired(now: t0 + 27 + 30)), .close)
    }

    func testHeaderTimeout_refuses408_andClosesWithoutLingering() {
        var m = machine()
        deliver("GET /a HTTP/1.1\r\nHost:", to: &m, now: t0 + 1)
        XCTAssertEqual(m.deadline, t0 + 11)
        XCTAssertEqual(Seen(m.timerFired(now: t0 + 10.9)), .none)
        XCTAssertEqual(Seen(m.timerFired(now: t0 + 11)), .refuse(.headTimeout))
        XCTAssertEqual(RequestError.headTimeout.status, 408)
        XCTAssertEqual(m.phase, .waiting)
        XCTAssertTrue(m.replyStarted(closing: false, now: t0 + 11))
        XCTAssertEqual(Seen(m.replyFinished(now: t0 + 11)), .close, "a slow client is not lingered for")
        XCTAssertEqual(m.phase, .closed)
    }

    func testBodyTimeout_refuses408_andClosesWithoutLingering() {
        var m = machine()
        deliver("PUT /a HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc", to: &m, now: t0 + 1)
        XCTAssertEqual(m.phase, .body)
        XCTAssertEqual(Seen(m.timerFired(now: t0 + 20.9)), .none)
        XCTAssertEqual(Seen(m.timerFired(now: t0 + 21)), .refuse(.bodyTimeout))
        XCTAssertEqual(RequestError.bodyTimeout.status, 408)
        XCTAssertTrue(m.replyStarted(closing: false, now: t0 + 21))
        XCTAssertEqual(Seen(m.replyFinished(now: t0 + 21)), .close)
    }

    func testWriteTimeout_closes_andEachWritePushesItOut() {
        var m = machine()
        deliver(get, to: &m, now: t0)
        _ = m.replyStarted(closing: false, now: t0 + 1)
        XCTAssertEqual(m.deadline, t0 + 41)
        m.wrote(now: t0 + 30)
        XCTAssertEqual(m.deadline, t0 + 70)
        XCTAssertEqual(Seen(m.timerFired(now: t0 + 41)), .none, "the write at +30 moved the deadline")
        XCTAssertEqual(m.phase, .writing)
        XCTAssertEqual(Seen(m.timerFired(now: t0 + 70)), .close)
        XCTAssertEqual(m.phase, .closed)
    }

    func testLingerTime_endsLingering() {
        var m = machine()
        deliver("BAD\r\n", to: &m, now: t0)
        _ = m.replyStarted(closing: false, now: t0)
        XCTAssertEqual(Seen(m.replyFinished(now: t0 + 1)), .linger)
        XCTAssertEqual(Seen(m.timerFired(now: t0 + 2.9)), .none)
        XCTAssertEqual(m.phase, .lingering)
        XCTAssertEqual(Seen(m.timerFired(now: t0 + 3)), .close)
        XCTAssertEqual(m.phase, .closed)
    }

    func testWaiting_hasNoDeadline_andTheTimerDoesNothing() {
        var m = machine()
        deliver(get, to: &m, now: t0)
        XCTAssertNil(m.deadline)
        XCTAssertEqual(Seen(m.timerFired(now: t0 + 1_000_000)), .none)
        XCTAssertEqual(m.phase, .waiting)
    }

    func testTimerFiredBeforeTheDeadline_doesNothingInAnyPhase() {
        var m = machine()
        for (text, phase) in [("G", ConnectionMachine.Phase.head), ("ET / HTTP/1.1\r\nContent-Length: 1\r\n\r\n", .body), ("x", .waiting)] {
            deliver(text, to: &m, now: t0)
            XCTAssertEqual(m.phase, phase)
            XCTAssertEqual(Seen(m.timerFired(now: t0 + 9.99)), .none, "\(phase)")
            XCTAssertEqual(m.phase, phase)
        }
        _ = m.replyStarted(closing: false, now: t0)
        XCTAssertEqual(Seen(m.timerFired(now: t0 + 39.99)), .none)
        XCTAssertEqual(m.phase, .writing)
    }

    // MARK: pipelining

    func testTwoPipelinedRequests_areDispatchedOneAtATimeInOrder() {
        var m = machine()
        XCTAssertEqual(deliver("GET /1 HTTP/1.1\r\n\r\nPOST /2 HTTP/1.1\r\nContent-Length: 2\r\n\r\nhi", to: &m, now: t0),
                       [.dispatch("GET", "/1", body: "")])
        XCTAssertEqual(m.phase, .waiting)
        XCTAssertFalse(m.replyStarted(closing: false, now: t0))
        XCTAssertEqual(m.phase, .writing, "the second waits for the first reply to finish")
        XCTAssertEqual(Seen(m.replyFinished(now: t0)), .dispatch("POST", "/2", body: "hi"))
        XCTAssertEqual(answer(&m, now: t0).then, .none)
        XCTAssertEqual(m.phase, .idle)
    }

    func testThreePipelinedRequests_areDispatchedOneAtATimeInOrder() {
        var m = machine()
        let text = "GET /1 HTTP/1.1\r\n\r\nGET /2 HTTP/1.1\r\n\r\nGET /3 HTTP/1.1\r\n\r\n"
        XCTAssertEqual(deliver(text, to: &m, now: t0), [.dispatch("GET", "/1", body: "")])
        XCTAssertEqual(answer(&m, now: t0).then, .dispatch("GET", "/2", body: ""))
        XCTAssertEqual(answer(&m, now: t0).then, .dispatch("GET", "/3", body: ""))
        XCTAssertEqual(answer(&m, now: t0).then, .none)
        XCTAssertEqual(m.phase, .idle)
    }

    func testBytesReadWhileWaitingOrWriting_areKeptForTheNextRequest() {
        var m = machine()
        deliver(get, to: &m, now: t0)
        XCTAssertEqual(deliver("POST /2 HTTP/1.1\r\nContent-", to: &m, now: t0), [])
        XCTAssertEqual(m.phase, .waiting)
        _ = m.replyStarted(closing: false, now: t0)
        XCTAssertEqual(deliver("Length: 3\r\n\r\nab", to: &m, now: t0), [])
        XCTAssertEqual(Seen(m.replyFinished(now: t0 + 5)), .none)
        XCTAssertEqual(m.phase, .body, "the kept bytes were parsed")
        XCTAssertEqual(m.deadline, t0 + 5 + 20)
        XCTAssertEqual(deliver("c", to: &m, now: t0 + 6), [.dispatch("POST", "/2", body: "abc")])
    }

    func testWantsRead_stopsAtMaxPipelinedWhileWaiting_andResumesAfter() {
        var m = machine { $0.maxPipelined = 100 }
        deliver(get, to: &m, now: t0)
        let next = "GET /2 HTTP/1.1\r\nX-Pad: \(String(repeating: "p", count: 100))\r\n\r\n"
        // Sliced as bytes: "\r\n" is one Character.
        let bytes = Array(next.utf8)
        deliver(String(decoding: bytes[..<99], as: UTF8.self), to: &m, now: t0)
        XCTAssertTrue(m.wantsRead)
        deliver(String(decoding: bytes[99..<100], as: UTF8.self), to: &m, now: t0)
        XCTAssertFalse(m.wantsRead, "100 bytes read ahead is the limit")
        _ = m.replyStarted(closing: false, now: t0)
        XCTAssertFalse(m.wantsRead, "still full while writing")
        XCTAssertEqual(Seen(m.replyFinished(now: t0)), .none)
        XCTAssertEqual(m.phase, .head)
        XCTAssertTrue(m.wantsRead, "the rest of the head is read again")
        XCTAssertEqual(deliver(String(decoding: bytes[100...], as: UTF8.self), to: &m, now: t0), [.dispatch("GET", "/2", body: "")])
        XCTAssertTrue(m.wantsRead, "the buffer left waiting is empty")
    }

    func testValidThenInvalidPipelined_answersTheFirstThenRefusesTheSecond() {
        var m = machine()
        XCTAssertEqual(deliver("GET /ok HTTP/1.1\r\n\r\nGET /bad HTTP/2.0\r\n\r\n", to: &m, now: t0),
                       [.dispatch("GET", "/ok", body: "")])
        XCTAssertEqual(answer(&m, now: t0).then, .refuse(.malformed(.badVersion)))
        XCTAssertEqual(m.phase, .waiting)
        XCTAssertEqual(answer(&m, now: t0).then, .linger)
    }

    // MARK: hang-ups

    func testEndOfInput_inIdleHeadOrBody_closes() {
        for text in ["", "\r\n", "GET / HT", "PUT / HTTP/1.1\r\nContent-Length: 9\r\n\r\nabc"] {
            var m = machine()
            deliver(text, to: &m, now: t0)
            XCTAssertEqual(Seen(m.endOfInput(now: t0)), .close, text)
            XCTAssertEqual(m.phase, .closed, text)
        }
    }

    func testEndOfInput_whileWaiting_probesAnHTTP11ClientOnce() {
        var m = machine()
        deliver(get, to: &m, now: t0)
        XCTAssertEqual(Seen(m.endOfInput(now: t0)), .probe)
        XCTAssertEqual(m.phase, .waiting, "a half-closed client still gets its answer")
        XCTAssertFalse(m.wantsRead)
        XCTAssertEqual(Seen(m.endOfInput(now: t0)), .none, "one probe is enough")
        XCTAssertTrue(m.replyStarted(closing: false, now: t0), "nothing more can come: the reply closes")
        XCTAssertEqual(Seen(m.replyFinished(now: t0)), .close)
    }

    func testEndOfInput_whileWaiting_cancelsAnHTTP10Request() {
        var m = machine()
        deliver("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", to: &m, now: t0)
        XCTAssertEqual(Seen(m.endOfInput(now: t0)), .cancel)
        XCTAssertEqual(m.phase, .closed)
    }

    func testEndOfInput_whileARefusalWaits_changesNothing() {
        var m = machine()
        deliver("BAD\r\n", to: &m, now: t0)
        XCTAssertEqual(Seen(m.endOfInput(now: t0)), .none)
        _ = m.replyStarted(closing: false, now: t0)
        XCTAssertEqual(Seen(m.replyFinished(now: t0)), .close, "no linger for a client that already closed")
    }

    func testFailed_whileWaitingCancels_elsewhereCloses() {
        var m = machine()
        deliver(get, to: &m, now: t0)
        XCTAssertEqual(Seen(m.failed()), .cancel)
        XCTAssertEqual(m.phase, .closed)

        for text in ["", "GET / HT", "PUT / HTTP/1.1\r\nContent-Length: 9\r\n\r\nabc"] {
            var m = machine()
            deliver(text, to: &m, now: t0)
            XCTAssertEqual(Seen(m.failed()), .close, text)
            XCTAssertEqual(m.phase, .closed)
        }

        var writing = machine()
        deliver(get, to: &writing, now: t0)
        _ = writing.replyStarted(closing: false, now: t0)
        XCTAssertEqual(Seen(writing.failed()), .close)

        var refusing = machine()
        deliver("BAD\r\n", to: &refusing, now: t0)
        XCTAssertEqual(Seen(refusing.failed()), .close, "a refusal has no upstream call to cancel")

        var lingering = machine()
        deliver("BAD\r\n", to: &lingering, now: t0)
        _ = answer(&lingering, now: t0)
        XCTAssertEqual(lingering.phase, .lingering)
        XCTAssertEqual(Seen(lingering.failed()), .close)
    }

    func testEndOfInput_whileWriting_finishesTheReplyThenCloses() {
        var m = machine()
        deliver(get, to: &m, now: t0)
        XCTAssertFalse(m.replyStarted(closing: false, now: t0))
        XCTAssertEqual(Seen(m.endOfInput(now: t0)), .none)
        XCTAssertEqual(m.phase, .writing)
        m.wrote(now: t0 + 1)
        XCTAssertEqual(Seen(m.replyFinished(now: t0 + 1)), .close)
        XCTAssertEqual(m.phase, .closed)
    }

    func testHalfClosedClient_withAPipelinedSecondRequest_getsBothAnswersThenClose() {
        var m = machine()
        XCTAssertEqual(deliver("GET /1 HTTP/1.1\r\n\r\nGET /2 HTTP/1.1\r\n\r\n", to: &m, now: t0),
                       [.dispatch("GET", "/1", body: "")])
        XCTAssertEqual(Seen(m.endOfInput(now: t0)), .probe)
        XCTAssertFalse(m.replyStarted(closing: false, now: t0), "a request is still buffered")
        XCTAssertEqual(Seen(m.replyFinished(now: t0)), .dispatch("GET", "/2", body: ""))
        XCTAssertTrue(m.replyStarted(closing: false, now: t0), "the last one closes")
        XCTAssertEqual(Seen(m.replyFinished(now: t0)), .close)
    }

    func testHalfClosedClient_withAPartialPipelinedRequest_closesAfterTheReply() {
        // The rest of the second request can never come: waiting for it would end in a 408 after
        // header_timeout, written to a client that sent all it ever will.
        for partial in ["GET /2 HTTP/1.1\r\n", "PUT /2 HTTP/1.1\r\nContent-Length: 5\r\n\r\nab",
                        "PUT /2 HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n"] {
            var m = machine()
            deliver(get + partial, to: &m, now: t0)
            XCTAssertEqual(Seen(m.endOfInput(now: t0)), .probe)
            _ = m.replyStarted(closing: false, now: t0)
            XCTAssertEqual(Seen(m.replyFinished(now: t0)), .close, partial)
            XCTAssertEqual(m.phase, .closed, partial)
        }
    }

    // MARK: Expect

    func testExpect100Continue_bodyNotSent_sendsContinueOnceThenDispatches() {
        var m = machine()
        XCTAssertEqual(deliver("PUT /u HTTP/1.1\r\nExpect: 100-Continue\r\nContent-Length: 6\r\n\r\n", to: &m, now: t0),
                       [.sendContinue])
        XCTAssertEqual(m.phase, .body)
        XCTAssertEqual(deliver("abc", to: &m, now: t0), [], "100 Continue is sent once")
        XCTAssertEqual(deliver("def", to: &m, now: t0), [.dispatch("PUT", "/u", body: "abcdef")])
    }

    func testExpect100Continue_bodyAlreadyThere_dispatchesStraight() {
        var m = machine()
        XCTAssertEqual(deliver("PUT /u HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\nabc", to: &m, now: t0),
                       [.dispatch("PUT", "/u", body: "abc")])
    }

    func testExpect100Continue_onEachPipelinedRequest_isAnsweredForEach() {
        var m = machine()
        let put = "PUT /u HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\n"
        XCTAssertEqual(deliver(put, to: &m, now: t0), [.sendContinue])
        XCTAssertEqual(deliver("a" + put, to: &m, now: t0), [.dispatch("PUT", "/u", body: "a")])
        XCTAssertEqual(answer(&m, now: t0).then, .sendContinue)
        XCTAssertEqual(deliver("b", to: &m, now: t0), [.dispatch("PUT", "/u", body: "b")])
    }

    func testExpectOnHTTP10_isIgnored() {
        var m = machine()
        XCTAssertEqual(deliver("PUT /u HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n", to: &m, now: t0), [],
                       "no 1xx may be sent to HTTP/1.0")
        XCTAssertEqual(m.phase, .body)
        XCTAssertEqual(deliver("abc", to: &m, now: t0), [.dispatch("PUT", "/u", body: "abc")])

        var other = machine()
        XCTAssertEqual(deliver("GET / HTTP/1.0\r\nExpect: something-else\r\n\r\n", to: &other, now: t0),
                       [.dispatch("GET", "/", body: "")])
    }

    func testUnknownExpectation_isRefused417() {
        for text in ["GET / HTTP/1.1\r\nExpect: something-else\r\n\r\n",
                     "PUT / HTTP/1.1\r\nExpect: something-else\r\nContent-Length: 3\r\n\r\n"] {
            var m = machine()
            XCTAssertEqual(deliver(text, to: &m, now: t0), [.refuse(.expectationFailed)], text)
            XCTAssertEqual(m.phase, .waiting)
        }
        XCTAssertEqual(RequestError.expectationFailed.status, 417)
    }

    func testExpectWithContentLengthOverMaxBody_isRefused413BeforeAnyBodyByte() {
        var m = machine { $0.maxBody = 100 }
        XCTAssertEqual(deliver("PUT /u HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 101\r\n\r\n", to: &m, now: t0),
                       [.refuse(.bodyTooLarge)])
        XCTAssertEqual(RequestError.bodyTooLarge.status, 413)
        XCTAssertEqual(m.phase, .waiting)
        XCTAssertEqual(answer(&m, now: t0).then, .linger, "the client may already be sending: read it out")
    }

    // MARK: framing through the machine

    func testEmptyLinesBeforeARequest_areIgnored() {
        for step in [Int.max, 1] {
            var m = machine()
            XCTAssertEqual(deliver("\r\n\r\n", to: &m, now: t0 + 1, step: step), [], "step \(step)")
            XCTAssertEqual(m.phase, .idle, "empty lines do not start a request")
            XCTAssertEqual(m.deadline, t0 + 30, "nor keep an idle connection open")
            XCTAssertEqual(m.buffer.count, 0, "and are not kept")
            XCTAssertEqual(deliver("\r\nGET /e HTTP/1.1\r\n\r\n", to: &m, now: t0 + 1, step: step),
                           [.dispatch("GET", "/e", body: "")], "step \(step)")
        }
    }

    func testEmptyLine_splitBetweenCRAndLF_isIgnored() {
        var m = machine()
        XCTAssertEqual(deliver("\r", to: &m, now: t0), [])
        XCTAssertEqual(m.phase, .idle)
        XCTAssertEqual(deliver("\nGET / HTTP/1.1\r\n\r\n", to: &m, now: t0), [.dispatch("GET", "/", body: "")])
    }

    func testChunkedBodyWithExtensions_isDispatchedDechunked() {
        let text = "POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
            + "5;name=value\r\nhello\r\n1 ; a=\"b\"\r\n,\r\n6\r\n world\r\n0;last\r\nX-Trailer: t\r\n\r\n"
        for step in [Int.max, 7, 1] {
            var m = machine()
            XCTAssertEqual(deliver(text + get, to: &m, now: t0, step: step), [.dispatch("POST", "/c", body: "hello, world")],
                           "step \(step)")
            XCTAssertEqual(answer(&m, now: t0).then, .dispatch("GET", "/a", body: ""), "the request after it is intact")
        }
    }

    func testHeadDeliveredOneByteAtATime_isDispatched() throws {
        var m = machine()
        let text = "POST /one?b=y HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nX-Long: \(String(repeating: "v", count: 5000))\r\n\r\nbody"
        let r = try XCTUnwrap(dispatched(text, to: &m, now: t0, step: 1))
        XCTAssertEqual(r.buffer.string(r.method), "POST")
        XCTAssertEqual(r.buffer.string(r.target), "/one?b=y")
        XCTAssertEqual(r.buffer.string(r.body), "body")
        XCTAssertEqual(r.fields.count, 3)
    }

    func testHeadOverMaxHead_isRefused431() {
        var m = machine { $0.maxHead = 64 }
        let text = "GET / HTTP/1.1\r\nX-Pad: \(String(repeating: "p", count: 64))\r\n\r\n"
        XCTAssertEqual(deliver(text, to: &m, now: t0), [.refuse(.headTooLarge)])
        XCTAssertEqual(RequestError.headTooLarge.status, 431)
        XCTAssertEqual(answer(&m, now: t0).then, .linger)

        var byByte = machine { $0.maxHead = 64 }
        XCTAssertEqual(deliver(text, to: &byByte, now: t0, step: 1), [.refuse(.headTooLarge)])

        var fits = machine { $0.maxHead = 64 }
        XCTAssertEqual(deliver("GET / HTTP/1.1\r\nX-Pad: \(String(repeating: "p", count: 30))\r\n\r\n", to: &fits, now: t0),
                       [.dispatch("GET", "/", body: "")])
    }

    // From the review: only the first Expect was checked, and a declared length was reserved whole.
    func testRepeatedExpect_anyOtherExpectationIsRefused() {
        var m = machine()
        XCTAssertEqual(deliver("POST / HTTP/1.1\r\nExpect: foo\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n", to: &m, now: t0),
                       [.refuse(.expectationFailed)])
    }

    func testDeclaredBody_isNotReservedBeforeItArrives() {
        var m = machine()
        XCTAssertEqual(deliver("POST / HTTP/1.1\r\nContent-Length: 10000000\r\n\r\nx", to: &m, now: t0), [])
        XCTAssertEqual(m.phase, .body)
        XCTAssertLessThanOrEqual(m.readSpace()?.count ?? 0, 300_000, "a one-byte body reserved the declared length")
    }
}
