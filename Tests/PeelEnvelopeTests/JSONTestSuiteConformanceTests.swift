import Foundation
import PeelEnvelope
import XCTest

/// Runs the shared JSONTestSuite corpus when it is present; the built-in cases stand without it.
final class JSONTestSuiteConformanceTests: XCTestCase {
    /// `<repo>/../shared/testdata/JSONTestSuite/test_parsing`, found from this file's path.
    private var corpus: URL {
        URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent()  // PeelEnvelopeTests
            .deletingLastPathComponent()  // Tests
            .deletingLastPathComponent()  // repo root
            .appendingPathComponent("../shared/testdata/JSONTestSuite/test_parsing")
            .standardizedFileURL
    }

    func testJSONTestSuite_yAcceptedNRejectedIReported() throws {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: corpus.path))?.sorted() ?? []
        guard !names.isEmpty else {
            // Not a skipped test: the suite still passes on its built-in RFC 8259 cases.
            print("JSONTestSuite: skipped the corpus, \(corpus.path) is absent; built-in cases still ran")
            return
        }
        var wronglyRejected: [String] = []
        var wronglyAccepted: [String] = []
        var counts = (y: 0, n: 0, i: 0)
        for name in names where name.hasSuffix(".json") {
            let bytes = [UInt8](try Data(contentsOf: corpus.appendingPathComponent(name)))
            let accepted = JSONScanner.validate(bytes)
            switch name.first {
            case "y":
                counts.y += 1
                if !accepted { wronglyRejected.append(name) }
            case "n":
                counts.n += 1
                if accepted { wronglyAccepted.append(name) }
            default:
                counts.i += 1
                print("JSONTestSuite: \(name) \(accepted ? "accepted" : "rejected")")
            }
        }
        print("JSONTestSuite: \(counts.y) y_, \(counts.n) n_, \(counts.i) i_ files from \(corpus.path)")
        XCTAssertGreaterThan(counts.y + counts.n, 0)
        XCTAssertTrue(wronglyRejected.isEmpty, "y_ files rejected: \(wronglyRejected)")
        XCTAssertTrue(wronglyAccepted.isEmpty, "n_ files accepted: \(wronglyAccepted)")
    }
}
