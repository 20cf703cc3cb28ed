@testable import PeelIO
import PeelTestSupport
import XCTest

/// Request bodies past the spool's threshold: written to a spool file as they arrive (charged to
/// the disk budget, not memory), dispatched with the file, and refused when the disk budget has no room.
final class ConnectionMachineSpoolTests: XCTestCase {
    private var dir: SpoolTestDirectory!

    override func setUpWithError() throws { dir = try SpoolTestDirectory() }
    override func tearDown() { dir = nil }

    private func spool(threshold: Int = 16, limit: Int = 1 << 20, perClient: Int = 1 << 20) -> Spool {
        Spool(directory: dir.path, threshold: threshold, limit: limit, perClient: perClient)
    }

    private func machine(_ spool: Spool, memory: MemoryBudget? = nil) -> ConnectionMachine {
        var l = ConnectionLimits()
        l.spool = spool
        l.budget = memory
        return ConnectionMachine(limits: l, peer: "192.0.2.7", now: 0)
    }

    /// Feeds `bytes` as ClientConnection reads them, at most `step` a read; the actions other than `.none`.
    private func deliver(_ bytes: [UInt8], to m: inout ConnectionMachine, step: Int = .max, now: Double = 0) -> [ConnectionMachine.Action] {
        var actions: [ConnectionMachine.Action] = []
        var i = 0
        while i < bytes.count {
            guard let space = m.readSpace(), let p = space.baseAddress, space.count > 0 else { break }
            let n = min(space.count, step, bytes.count - i)
            bytes[i..<(i + n)].withUnsafeBytes { p.copyMemory(from: $0.baseAddress!, byteCount: n) }
            i += n
            let a = m.received(n, now: now)
            if case .none = a { continue }
            actions.append(a)
        }
        return actions
    }

    private func put(_ body: [UInt8], extra: String = "") -> [UInt8] {
        Array("PUT /u HTTP/1.1\r\nHost: x\r\n\(extra)Content-Length: \(body.count)\r\n\r\n".utf8) + body
    }

    private func body(_ n: Int) -> [UInt8] { (0..<n).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) } }

    func testBodyOfExactlyTheThreshold_staysInMemory_andOneByteMoreGoesToAFile() throws {
        let s = spool(threshold: 100)
        var m = machine(s)
        guard case .dispatch(let small)? = deliver(put(body(100)), to: &m).first else { return XCTFail("not dispatched") }
        XCTAssertNil(small.spooled)
        XCTAssertEqual(small.body.count, 100)
        var m2 = machine(s)
        guard case .dispatch(let big)? = deliver(put(body(101)), to: &m2, step: 7).first else { return XCTFail("not dispatched") }
        let file = try XCTUnwrap(big.spooled)
        XCTAssertTrue(big.body.isEmpty)
        XCTAssertEqual(file.read(0..<file.count), body(101))
        XCTAssertEqual(s.bytes, 101)
        XCTAssertEqual(big.buffer.string(big.method), "PUT")
    }

    func testSpooledBody_chargesNoMemory_andAMegabyteArrivesExact() throws {
        let s = spool(threshold: 1024)
        let memory = MemoryBudget(limit: 64 * 1024, perClient: 64 * 1024)
        var m = machine(s, memory: memory)
        let b = body(1 << 20)
        guard case .dispatch(let r)? = deliver(put(b), to: &m, step: 50_000).first else { return XCTFail("not dispatched") }
        // Only the read window the body passes through is memory, charged as such.
        XCTAssertEqual(memory.bytes, ConnectionMachine.spoolWindow)
        XCTAssertEqual(try XCTUnwrap(r.spooled).read(0..<(1 << 20)), b)
        XCTAssertLessThanOrEqual(r.buffer.capacity, 4096 + ConnectionMachine.spoolWindow)
    }

    func testPipelinedRequest_afterASpooledBody_isReadAsTheNextOne() throws {
        var m = machine(spool(threshold: 8))
        let actions = deliver(put(body(40)) + Array("GET /next HTTP/1.1\r\nHost: x\r\n\r\n".utf8), to: &m, step: 50)
        XCTAssertEqual(actions.count, 1)
        _ = m.replyStarted(closing: false, now: 1)
        guard case .dispatch(let next) = m.replyFinished(now: 2) else { return XCTFail("the pipelined GET was lost") }
        XCTAssertEqual(next.buffer.string(next.target), "/next")
    }

    func testDeclaredLength_pastTheDiskBudgetOrAClientsShare_isRefusedAtTheHead() {
        var whole = machine(spool(threshold: 8, limit: 100, perClient: 1000))
        let a1 = deliver(put(body(101)), to: &whole, step: 60)
        guard case .refuse(let e1)? = a1.first else { return XCTFail("not refused: \(a1)") }
        XCTAssertEqual(e1, .overSpoolBudget)
        let shared = spool(threshold: 8, limit: 1000, perClient: 100)
        var share = machine(shared)
        guard case .refuse(let e2)? = deliver(put(body(101)), to: &share, step: 60).first else { return XCTFail("not refused") }
        XCTAssertEqual(e2, .overSpoolClientShare)
        XCTAssertEqual(shared.bytes, 0)
        XCTAssertEqual(e2.status, 503)
    }

    func testExpectContinue_isAnsweredBeforeTheSpooledBody() {
        var m = machine(spool(threshold: 8))
        let head = Array("PUT /u HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 20\r\n\r\n".utf8)
        guard case .sendContinue? = deliver(head, to: &m).first else { return XCTFail("no 100 Continue") }
        guard case .dispatch(let r)? = deliver(body(20), to: &m).first else { return XCTFail("not dispatched") }
        XCTAssertEqual(r.spooled?.count, 20)
    }

    func testBodyArrivingWholeWithItsHead_staysInMemory() {
        // Only what one head-sized read holds (max_head): a body past a real threshold never does.
        var m = machine(spool(threshold: 8))
        guard case .dispatch(let r)? = deliver(put(body(40)), to: &m).first else { return XCTFail("not dispatched") }
        XCTAssertNil(r.spooled)
        XCTAssertEqual(r.body.count, 40)
    }

    func testBodyTimeout_whileSpooling_givesTheDiskBudgetBack() {
        let s = spool(threshold: 8)
        var m = machine(s)
        XCTAssertTrue(deliver(Array(put(body(100)).dropLast(10)), to: &m).isEmpty)
        XCTAssertEqual(s.bytes, 90)
        XCTAssertEqual(s.files, 1)
        guard case .refuse(.bodyTimeout) = m.timerFired(now: 61) else { return XCTFail("no 408") }
        XCTAssertEqual(s.bytes, 0)
        XCTAssertEqual(s.files, 0)
    }

    // MARK: chunked bodies

    /// `body` in chunks of `size` bytes, with an extension and a trailer to skip.
    private func chunkedPut(_ body: [UInt8], size: Int, extra: String = "") -> [UInt8] {
        var out = Array("PUT /u HTTP/1.1\r\nHost: x\r\n\(extra)Transfer-Encoding: chunked\r\n\r\n".utf8)
        var i = 0
        while i < body.count {
            let n = min(size, body.count - i)
            out += Array((String(n, radix: 16) + ";ext=1\r\n").utf8) + body[i..<(i + n)] + Array("\r\n".utf8)
            i += n
        }
        return out + Array("0\r\nX-Trailer: t\r\n\r\n".utf8)
    }

    func testChunkedBody_pastTheThreshold_goesToAFile_exactly_andTheBufferStaysSmall() throws {
        let s = spool(threshold: 1024)
        let memory = MemoryBudget(limit: 1 << 20, perClient: 1 << 20)
        var m = machine(s, memory: memory)
        let b = body(1 << 20)
        var dispatched: ParsedRequest?
        for a in deliver(chunkedPut(b, size: 10_000), to: &m, step: 7_001) {
            if case .dispatch(let r) = a { dispatched = r } else { return XCTFail("unexpected \(a)") }
        }
        let r = try XCTUnwrap(dispatched)
        let file = try XCTUnwrap(r.spooled)
        XCTAssertEqual(file.count, b.count)
        XCTAssertEqual(file.read(0..<file.count), b)
        XCTAssertTrue(r.body.isEmpty)
        XCTAssertEqual(r.buffer.string(r.target), "/u")
        XCTAssertLessThanOrEqual(r.buffer.capacity, 4096 + 2 * ConnectionMachine.spoolWindow)
        XCTAssertEqual(s.bytes, b.count)
        XCTAssertEqual(memory.bytes, ConnectionMachine.spoolWindow)
    }

    func testChunkedBody_underTheThreshold_staysInMemory() {
        var m = machine(spool(threshold: 1024))
        let b = body(1000)
        guard case .dispatch(let r)? = deliver(chunkedPut(b, size: 100), to: &m, step: 50).first else { return XCTFail("not dispatched") }
        XCTAssertNil(r.spooled)
        XCTAssertEqual(Array(r.buffer.slice(r.body)), b)
    }

    func testPipelinedRequest_afterASpooledChunkedBody_isReadAsTheNextOne() throws {
        var m = machine(spool(threshold: 64))
        let b = body(5_000)
        let actions = deliver(chunkedPut(b, size: 333) + Array("GET /next HTTP/1.1\r\nHost: x\r\n\r\n".utf8), to: &m, step: 900)
        guard actions.count == 1, case .dispatch(let r) = actions[0] else { return XCTFail("\(actions)") }
        XCTAssertEqual(try XCTUnwrap(r.spooled).read(0..<b.count), b)
        _ = m.replyStarted(closing: false, now: 1)
        guard case .dispatch(let next) = m.replyFinished(now: 2) else { return XCTFail("the pipelined GET was lost") }
        XCTAssertEqual(next.buffer.string(next.target), "/next")
    }

    func testChunkedBody_pastTheDiskShare_isRefused_andTheBytesGoBack() {
        let s = spool(threshold: 64, limit: 1 << 20, perClient: 2_000)
        var m = machine(s)
        let actions = deliver(chunkedPut(body(5_000), size: 500), to: &m, step: 700)
        guard case .refuse(let e)? = actions.first else { return XCTFail("not refused: \(actions)") }
        XCTAssertEqual(e, .overSpoolClientShare)
        XCTAssertEqual(s.bytes, 0)
        XCTAssertEqual(s.files, 0)
    }

    func testChunkedBody_pastMaxBody_isRefused413_evenWhenSpooled() {
        var l = ConnectionLimits()
        l.spool = spool(threshold: 64)
        l.maxBody = 3_000
        var m = ConnectionMachine(limits: l, peer: "192.0.2.7", now: 0)
        let actions = deliver(chunkedPut(body(5_000), size: 500), to: &m, step: 700)
        guard case .refuse(let e)? = actions.first else { return XCTFail("not refused: \(actions)") }
        XCTAssertEqual(e, .bodyTooLarge)
        XCTAssertEqual(l.spool?.bytes, 0)
    }

    func testChunkedBody_whenTheFileCannotBeWritten_isRefused503() throws {
        // A directory that is gone: the file cannot be created when the body passes the threshold.
        let s = Spool(directory: "/nonexistent-peel-spool", threshold: 64, limit: 1 << 20, perClient: 1 << 20)
        var m = machine(s)
        let actions = deliver(chunkedPut(body(5_000), size: 500), to: &m, step: 700)
        guard case .refuse(.spoolWrite)? = actions.first else { return XCTFail("not refused: \(actions)") }
        XCTAssertEqual(s.files, 0)
    }
}
