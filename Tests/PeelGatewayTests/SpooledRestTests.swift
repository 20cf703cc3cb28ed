@testable import PeelGateway
import PeelEnvelope
import PeelIO
import XCTest

/// A rest-of-object answer (RuoYi's `{total, rows}`) judged from a spool file is built in memory:
/// it is held under the memory budget and its client's share like any buffered answer, so one
/// address cannot pin memory outside both budgets with slow readers.
final class SpooledRestTests: XCTestCase {
    /// A RuoYi TableDataInfo of about `rows` × 40 bytes, answered with its length.
    private static func table(rows: Int) -> String {
        let list = (0..<rows).map { #"{"userId":\#($0),"userName":"user\#($0)"}"# }.joined(separator: ",")
        return RawUpstream.answer(#"{"code":200,"msg":"查询成功","total":\#(rows),"rows":[\#(list)]}"#,
                                  fields: ["Content-Type: application/json"])
    }

    private func harness(share: Int?) throws -> RawHarness {
        try RawHarness(configure: { c in
            c.envelope.dialect = .ruoyi
            c.spooling.threshold = 64 * 1024
            c.memory.maxBody = 16 * 1024
            c.memory.maxBufferedPerClient = share
        }) { _ in .send(Self.table(rows: 20_000)) }
    }

    func testOverTheClientsShare_itIs503_notHeldOutsideTheBudget() throws {
        let h = try harness(share: 256 * 1024)
        defer { h.stop() }
        let r = try h.request("GET", "/system/user/list")
        XCTAssertEqual(r.status, 503, r.text.prefix(300).description)
        XCTAssertTrue(r.text.contains("server-busy"), r.text.prefix(300).description)
    }

    func testWithinTheShare_itIsTheRestOfTheObject() throws {
        let h = try harness(share: nil)
        defer { h.stop() }
        let r = try h.request("GET", "/system/user/list")
        XCTAssertEqual(r.status, 200)
        XCTAssertTrue(r.text.hasPrefix(#"{"total":20000,"rows":[{"userId":0,"#), String(r.text.prefix(80)))
        XCTAssertFalse(r.text.contains("\"code\""))
    }
}
