import Foundation
import XCTest

/// The README's "How a request flows" names each function control reaches with its `file:line`:
/// the list stays true only if every reference still lands on the function it names.
final class RequestFlowDocTests: XCTestCase {
    func testEveryFileLineInTheRequestFlow_landsOnTheFunctionItNames() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let readme = try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
        let start = try XCTUnwrap(readme.range(of: "### How a request flows"))
        let section = readme[start.upperBound...].prefix { _ in true }
        let end = section.range(of: "\n## ")?.lowerBound ?? section.endIndex
        let flow = String(section[..<end])
        // `Module/Folder/File.swift:LINE` `name`
        let pattern = try NSRegularExpression(pattern: #"`(Peel[A-Za-z]+/[A-Za-z0-9/+]+\.swift):([0-9]+)`(?: `([A-Za-z]+)`)?"#)
        let matches = pattern.matches(in: flow, range: NSRange(flow.startIndex..., in: flow))
        XCTAssertGreaterThanOrEqual(matches.count, 20, "the flow lists its stages with file:line")
        var named = 0
        for m in matches {
            let path = String(flow[Range(m.range(at: 1), in: flow)!])
            let line = Int(flow[Range(m.range(at: 2), in: flow)!])!
            let source = try String(contentsOf: root.appendingPathComponent("Sources").appendingPathComponent(path), encoding: .utf8)
            let lines = source.split(separator: "\n", omittingEmptySubsequences: false)
            XCTAssertLessThanOrEqual(line, lines.count, "\(path):\(line) is past the end of the file")
            guard line <= lines.count else { continue }
            let text = lines[line - 1]
            if let r = Range(m.range(at: 3), in: flow) {
                let name = String(flow[r])
                named += 1
                XCTAssertTrue(text.contains("func \(name)") || text.contains("\(name)(") || (name == "init" && text.contains("init")),
                              "\(path):\(line) is `\(text.trimmingCharacters(in: .whitespaces))`, not `\(name)` (scripts/request-flow-lines.py moves the references)")
            } else {
                XCTAssertFalse(text.trimmingCharacters(in: .whitespaces).isEmpty, "\(path):\(line) is an empty line")
            }
        }
        XCTAssertGreaterThanOrEqual(named, 20)
    }
}
