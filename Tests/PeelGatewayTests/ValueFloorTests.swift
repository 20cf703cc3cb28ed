import Foundation
@testable import PeelGateway
import XCTest

/// Issue 18: no value that passes validation and silently means "forever" or "always".
final class ValueFloorTests: XCTestCase {
    private let env = ["PEEL_UPSTREAM": "http://127.0.0.1:1"]

    private func refused(_ args: [String], naming option: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertThrowsError(try ConfigLoader.load(arguments: args, environment: env), "\(args)", file: file, line: line) { e in
            XCTAssertEqual((e as? ConfigError)?.option, option, file: file, line: line)
            XCTAssertFalse((e as? ConfigError)?.description.contains("\n") ?? true, "one line", file: file, line: line)
        }
    }

    func testTimeoutsBelowOneMillisecond_areRefused() throws {
        for name in ["--timeout", "--connect-timeout", "--probe-timeout", "--client-timeout", "--header-timeout", "--body-timeout"] {
            refused([name, "0.0009"], naming: name)
            XCTAssertNoThrow(try ConfigLoader.load(arguments: [name, "0.001"], environment: env), name)
        }
        refused(["--shutdown-timeout", "0.0005"], naming: "--shutdown-timeout")
        XCTAssertEqual(try ConfigLoader.load(arguments: ["--shutdown-timeout", "0"], environment: env).lifecycle.shutdownTimeout, 0)
        XCTAssertThrowsError(try ConfigLoader.load(arguments: [], environment: env.merging(["PEEL_TIMEOUT": "0.0001"]) { $1 })) { e in
            XCTAssertEqual((e as? ConfigError)?.option, "PEEL_TIMEOUT")
        }
    }

    func testProbeInterval_hasAFloor() throws {
        refused(["--probe-interval", "0.0001"], naming: "--probe-interval")
        refused(["--probe-interval", "0.09"], naming: "--probe-interval")
        XCTAssertEqual(try ConfigLoader.load(arguments: ["--probe-interval", "0.1"], environment: env).probe.interval, 0.1)
    }

    func testProbePath_mustBeAnOriginFormTarget() throws {
        for bad in ["/health check", "/a\u{01}b", "/%zz", "/%4", "/caf\u{e9}", "/a#frag", "/a\\b"] {
            refused(["--probe-path", bad], naming: "--probe-path")
        }
        for good in ["/", "/health", "/api/v1/ping?full=1&x=%20y", "/a:b@c;d=e,f", "/~user/!$'()*+"] {
            XCTAssertEqual(try ConfigLoader.load(arguments: ["--probe-path", good], environment: env).probe.path, good)
        }
    }

    func testCheckConfigOutput_isValidJSONWithControlCharacters() throws {
        let c = try ConfigLoader.load(arguments: ["--problem-type-base", "urn:x\u{01}\u{1f}\"\\:", "--code-field", "c\u{7}"], environment: env)
        let text = ConfigLoader.describe(c)
        let parsed = try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]
        XCTAssertEqual(parsed?["problem_type_base"] as? String, "urn:x\u{01}\u{1f}\"\\:")
        XCTAssertEqual((parsed?["dialect"] as? [String: Any])?["code"] as? String, "c\u{7}", "shown once, in the effective dialect")
        XCTAssertFalse(text.unicodeScalars.contains { $0.value < 0x20 && $0 != "\n" }, "no raw control characters")
    }
}
