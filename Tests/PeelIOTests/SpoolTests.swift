@testable import PeelIO
import PeelTestSupport
import XCTest

/// The spool: where a buffered answer goes past the threshold, what it is charged to, how write
/// failures stop the transfer, and that its files have no name from the moment they exist.
final class SpoolTests: XCTestCase {
    private var dir: SpoolTestDirectory!

    override func setUpWithError() throws { dir = try SpoolTestDirectory() }
    override func tearDown() { dir = nil }

    private func spool(threshold: Int = 16, limit: Int = 1 << 20, perClient: Int = 1 << 20) -> Spool {
        Spool(directory: dir.path, threshold: threshold, limit: limit, perClient: perClient)
    }

    private func transfer(_ spool: Spool, memory: MemoryBudget? = nil, client: String? = "192.0.2.7") -> UpstreamTransfer {
        let t = UpstreamTransfer()
        t.limit = 1 << 20
        t.spool = spool
        t.budget = memory
        t.clientAddress = client
        return t
    }

    private func keep(_ t: UpstreamTransfer, _ bytes: [UInt8]) -> Bool { bytes.withUnsafeBytes { t.keep($0) } }

    private func bytes(_ n: Int, from start: Int = 0) -> [UInt8] { (start..<start + n).map { UInt8(truncatingIfNeeded: $0 &* 31) } }

    func testBodyOfExactlyTheThreshold_staysInMemory_andOneByteMoreSpoolsAllOfIt() throws {
        let s = spool(threshold: 16)
        let memory = MemoryBudget(limit: 1 << 20)
        let t = transfer(s, memory: memory)
        XCTAssertTrue(keep(t, bytes(10)))
        XCTAssertTrue(keep(t, bytes(6, from: 10)))
        XCTAssertNil(t.spoolWriter, "16 bytes under a 16-byte threshold stay in memory")
        XCTAssertEqual(t.body, bytes(16))
        XCTAssertEqual(memory.bytes, 16)

        XCTAssertTrue(keep(t, bytes(1, from: 16)))
        let writer = try XCTUnwrap(t.spoolWriter)
        XCTAssertEqual(writer.count, 17)
        XCTAssertTrue(t.body.isEmpty, "what memory held went to the file")
        XCTAssertEqual(memory.bytes, SpoolWriter.stagingSize, "the memory budget holds the gathering buffer instead of the bytes")
        XCTAssertEqual(s.bytes, 17, "and the disk budget holds them")
        XCTAssertEqual(s.budget.held(by: "192.0.2.7"), 17)
        XCTAssertTrue(keep(t, bytes(100, from: 17)))

        let file = try writer.finish().get()
        XCTAssertEqual(file.count, 117)
        XCTAssertEqual(file.read(0..<117), bytes(117), "the file holds every byte, in order")
        XCTAssertEqual(try file.withBytes { Array($0) }.get(), bytes(117))
        XCTAssertEqual(file.read(100..<500), bytes(17, from: 100), "a read past the end stops at it")
        XCTAssertEqual(s.files, 1)
    }

    func testSpooledAnswer_givesTheGatheringBuffersMemoryBack_whenItIsWhole() throws {
        let memory = MemoryBudget(limit: 1 << 20)
        let t = transfer(spool(threshold: 16), memory: memory)
        XCTAssertTrue(keep(t, bytes(100)))
        XCTAssertEqual(memory.bytes, SpoolWriter.stagingSize)
        t.releaseBudget()
        XCTAssertEqual(memory.bytes, 0)
    }

    func testSpooledBodyLetGo_closesTheFileAndGivesTheDiskBudgetBack() throws {
        let s = spool(threshold: 4)
        let t = transfer(s)
        XCTAssertTrue(keep(t, bytes(50)))
        var file: SpooledBody? = try XCTUnwrap(t.spoolWriter).finish().get()
        t.spoolWriter = nil
        XCTAssertEqual(s.files, 1)
        XCTAssertEqual(s.bytes, 50)
        file = nil
        XCTAssertNil(file)
        XCTAssertEqual(s.files, 0)
        XCTAssertEqual(s.bytes, 0)
        XCTAssertEqual(s.budget.clientCount, 0)
    }

    func testUnfinishedWriter_dropped_givesEverythingBack() {
        let s = spool(threshold: 4)
        let t = transfer(s)
        XCTAssertTrue(keep(t, bytes(50)))
        XCTAssertEqual(s.files, 1)
        t.spoolWriter = nil
        XCTAssertEqual(s.files, 0)
        XCTAssertEqual(s.bytes, 0)
    }

    func testThresholdZero_keepsEveryAnswerInMemory() {
        let s = spool(threshold: 0)
        let t = transfer(s)
        XCTAssertTrue(keep(t, bytes(100_000)))
        XCTAssertNil(t.spoolWriter)
        XCTAssertEqual(t.body.count, 100_000)
        XCTAssertEqual(s.files, 0)
    }

    func testSpoolFile_hasNoNameInTheDirectory_fromItsCreation() throws {
        let s = spool(threshold: 4)
        let t = transfer(s)
        XCTAssertTrue(keep(t, bytes(5000)))
        let writer = try XCTUnwrap(t.spoolWriter)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: dir.path), [], "a killed Peel would leave this behind")
        var st = stat()
        XCTAssertEqual(fstat(writer.fd, &st), 0)
        XCTAssertEqual(st.st_nlink, 0, "the file has no link from the start")
        XCTAssertNil(writer.flush())
        XCTAssertEqual(fstat(writer.fd, &st), 0)
        XCTAssertEqual(Int(st.st_size), 5000)
    }

    func testDiskBudget_refusesPastTheWholeLimit_thenPastAClientsShare() {
        let s = spool(threshold: 8, limit: 100, perClient: 60)
        let a = transfer(s, client: "192.0.2.7")
        XCTAssertTrue(keep(a, bytes(50)))
        let b = transfer(s, client: "192.0.2.7")
        XCTAssertFalse(keep(b, bytes(20)), "50 + 20 passes the client's 60-byte share")
        XCTAssertEqual(b.state, .stopped(.overSpoolClientShare))
        XCTAssertEqual(s.bytes, 50, "a refused write takes nothing")
        let c = transfer(s, client: "192.0.2.8")
        XCTAssertTrue(keep(c, bytes(40)), "another client has its own share")
        let d = transfer(s, client: "192.0.2.9")
        XCTAssertFalse(keep(d, bytes(20)), "90 + 20 passes the 100-byte whole")
        XCTAssertEqual(d.state, .stopped(.overSpoolBudget))
        a.spoolWriter = nil
        XCTAssertTrue(keep(transfer(s, client: "192.0.2.9"), bytes(20)), "bytes given back make room")
    }

    func testMemoryBudget_boundsOnlyWhatStaysInMemory() {
        // A memory budget smaller than the answer: once spooled, the answer holds only the
        // gathering buffer of it, and one too small for that buffer refuses the answer.
        let memory = MemoryBudget(limit: SpoolWriter.stagingSize + 32)
        let s = spool(threshold: 16)
        let t = transfer(s, memory: memory)
        XCTAssertTrue(keep(t, bytes(16)))
        XCTAssertTrue(keep(t, bytes(1000, from: 16)))
        XCTAssertEqual(memory.bytes, SpoolWriter.stagingSize)
        XCTAssertEqual(t.spoolWriter?.count, 1016)
        let small = transfer(spool(threshold: 16), memory: MemoryBudget(limit: 32))
        XCTAssertTrue(keep(small, bytes(16)))
        XCTAssertFalse(keep(small, bytes(1000, from: 16)))
        XCTAssertEqual(small.state, .stopped(.overBudget))
    }

    func testWriteOnAFullDevice_failsTheWriteOrTheFinish_andGivesEverythingBack() throws {
        let s = spool()
        let fd = open("/dev/full", O_WRONLY | O_CLOEXEC)
        XCTAssertGreaterThanOrEqual(fd, 0, "/dev/full (Linux's always-full device) could not be opened")
        guard fd >= 0 else { return }
        var writer: SpoolWriter? = SpoolWriter.adopting(fd, spool: s, client: "192.0.2.7", gathers: true)
        // A piece smaller than the staging buffer is gathered; the failure comes with its write, at the end.
        XCTAssertNil(bytes(4096).withUnsafeBytes { writer!.append($0) })
        guard case .failure(.write(let e))? = writer?.finish() else { return XCTFail("the last write did not fail") }
        XCTAssertEqual(e.errno, ENOSPC)
        XCTAssertTrue(e.description.contains("No space left on device"), e.description)
        writer = nil
        XCTAssertEqual(s.bytes, 0, "the bytes that could not be written are not held")
        XCTAssertEqual(s.budget.held(by: "192.0.2.7"), 0)
        // A piece as large as the staging buffer is written at once, and fails at once.
        let fd2 = open("/dev/full", O_WRONLY | O_CLOEXEC)
        XCTAssertGreaterThanOrEqual(fd2, 0)
        guard fd2 >= 0 else { return }
        var big: SpoolWriter? = SpoolWriter.adopting(fd2, spool: s, client: "192.0.2.7")
        let failure = bytes(SpoolWriter.stagingSize).withUnsafeBytes { big!.append($0) }
        guard case .write(let e2) = failure else { return XCTFail("expected a write failure, got \(String(describing: failure))") }
        XCTAssertEqual(e2.errno, ENOSPC)
        big = nil
        XCTAssertEqual(s.bytes, 0)
    }

    func testGatheredPieces_reachTheFileExactly_acrossTheStagingBuffersEdges() throws {
        let s = spool(threshold: 1)
        let writer = try SpoolWriter.open(s, client: nil, gathers: true).get()
        let all = bytes(3 * SpoolWriter.stagingSize + 12_345)
        var i = 0
        var step = 1
        while i < all.count {
            let n = min(step, all.count - i)
            XCTAssertNil(all[i..<(i + n)].withUnsafeBytes { writer.append($0) })
            i += n
            step = step * 3 + 7
        }
        let file = try writer.finish().get()
        XCTAssertEqual(file.count, all.count)
        XCTAssertEqual(file.read(0..<all.count), all)
    }

    func testMissingDirectory_failsCreation_andTheCheckNamesIt() {
        let s = Spool(directory: dir.path + "/absent", threshold: 4, limit: 100, perClient: 100)
        let why = s.check()
        XCTAssertNotNil(why)
        XCTAssertTrue(why?.contains(dir.path + "/absent") ?? false, why ?? "")
        let t = transfer(s)
        XCTAssertFalse(keep(t, bytes(10)))
        guard case .stopped(.spoolWrite(let e)) = t.state else { return XCTFail("\(t.state)") }
        XCTAssertEqual(e.errno, ENOENT)
        XCTAssertEqual(s.files, 0)
        XCTAssertNil(spool().check(), "a writable directory passes")
    }

    func testAnswerPastTheLimit_isTooLarge_whetherSpooledOrNot() {
        let s = spool(threshold: 8)
        let t = transfer(s)
        t.limit = 100
        XCTAssertTrue(keep(t, bytes(60)))
        XCTAssertFalse(keep(t, bytes(41)))
        XCTAssertEqual(t.state, .stopped(.tooLarge))
    }
}
