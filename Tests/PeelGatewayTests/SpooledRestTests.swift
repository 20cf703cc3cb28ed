@testable import PeelGateway
import PeelEnvelope
import PeelIO
import XCTest

/// A rest-of-object answer (RuoYi's `{total, rows}`) judged from a spool file is sent from the file:
/// the kept members' ranges with sendfile, Peel's braces and commas between them, so it holds no
/// memory and a client share far smaller than the answer still gets it whole.
final class SpooledRestTests: XCTestCase {
    private static let list = (0..<20_000).map { #"{"userId":\#($0),"userName":"user\#($0)"}"# }.joined(separator: ",")

    /// A RuoYi TableDataInfo of about 800 KB, its envelope members around the ones that stay.
    private static let table = RawUpstream.answer(#"{"code":200,"total":20000, "msg":"查询成功" ,"rows":[\#(list)],"extra":true}"#,
                                                  fields: ["Content-Type: application/json"])

    private func harness(share: Int?) throws -> RawHarness {
        try RawHarness(configure: { c in
            c.envelope.dialect = .ruoyi
            c.spooling.threshold = 64 * 1024
            c.memory.maxBody = 16 * 1024
            c.memory.maxBufferedPerClient = share
        }) { _ in .send(Self.table) }
    }

    func testUnderAClientShareSmallerThanTheAnswer_itIsSentWholeFromTheFile() throws {
        let h = try harness(share: 256 * 1024)
        defer { h.stop() }
        let r = try h.request("GET", "/system/user/list")
        XCTAssertEqual(r.status, 200, r.text.prefix(300).description)
        // Three runs of kept members (total; rows; extra) joined as the in-memory judge joins them.
        XCTAssertEqual(r.text, #"{"total":20000,"rows":[\#(Self.list)],"extra":true}"#)
    }
}
