import CCurl
import XCTest
@testable import PeelIO

/// The request header lines curl reads, kept in the handle's own buffers (issue 20).
final class HeaderBlockTests: XCTestCase {
    /// The lines as curl walks them: data, then next, to the end.
    private func walk(_ list: UnsafeMutablePointer<curl_slist>?) -> [String] {
        var out: [String] = []
        var node = list
        while let n = node {
            out.append(String(cString: n.pointee.data))
            node = n.pointee.next
        }
        return out
    }

    func testTheListCurlReadsHoldsEveryLineInOrder() {
        let block = HeaderBlock()
        var list = UpstreamHeaderList(block: block)
        list.append("X-A", "1")
        list.append("Accept", "")
        list.append(line: "Expect:")
        XCTAssertEqual(walk(block.list()), ["X-A: 1", "Accept:", "Expect:"])
        XCTAssertEqual(block.lines, ["X-A: 1", "Accept:", "Expect:"])
    }

    func testGrowingPastBothBuffers_keepsEveryLine_andResetStartsAfresh() {
        let block = HeaderBlock()
        var list = UpstreamHeaderList(block: block)
        var expected: [String] = []
        for i in 0..<300 {
            let value = String(repeating: "v", count: i % 7 == 0 ? 2000 : i)
            list.append("X-\(i)", value)
            expected.append(value.isEmpty ? "X-\(i):" : "X-\(i): \(value)")
        }
        XCTAssertEqual(walk(block.list()), expected)
        block.reset()
        XCTAssertNil(block.list())
        var again = UpstreamHeaderList(block: block)
        again.append("Host", "h")
        XCTAssertEqual(walk(block.list()), ["Host: h"], "nothing of the last transfer's lines survives a reset")
    }
}
