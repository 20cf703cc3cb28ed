import Foundation
import PeelEnvelope
@testable import PeelGateway
import XCTest

/// Dialect configuration edge cases: malformed member paths, one member one role, the option an
/// error names, check-config output that reads back.
final class DialectConfigEdgeTests: XCTestCase {
    private let env = ["PEEL_UPSTREAM": "http://127.0.0.1:1"]

    private func load(_ args: [String], file: String? = nil) throws -> GatewayConfig {
        try loadConfig(args, file: file, environment: env)
    }

    // Finding 1: `"success": {"flag": "ok."}` loads (check-config prints it), and the first
    // upstream answer kills the process: Fatal error "Unexpectedly found nil while unwrapping an
    // Optional value" at Dialect.swift:16 from Envelope.swift:275. Reproduced with the binary:
    //   echo '{"dialect": {"preset": "antd", "success": {"flag": "ok."}}}' > crash.json
    //   peel --upstream http://127.0.0.1:$P --config crash.json --listen 127.0.0.1:18725 --admin-listen off
    //   curl http://127.0.0.1:18725/x   → connection dropped, peel exits 132 (SIGILL)
    func testsuccessMemberWithAnEmptyPathStep_isRefusedAtLoad() {
        for file in [#"{"dialect": {"preset": "antd", "success": {"flag": "ok."}}}"#,
                     #"{"dialect": {"preset": "jsend", "success": {"status": ".status"}}}"#,
                     #"{"dialect": {"preset": "error-object", "success": {"error": "error..x"}}}"#] {
            XCTAssertThrowsError(try load([], file: file), file)
        }
    }

    // Finding 5: before issue 25, `--code-field`, `--message-field` and `--data-field` had to
    // differ ("code, message and data fields must differ"). Now `--code-field x --message-field x`
    // loads, and every failure envelope is then a 502 ("x is not a string"); a flag dialect whose
    // code member is its flag member (`"code": "success"` under antd) loads and fails every call
    // ("success is not an integer or a string").
    func testcodeAndMessageMembersMustDiffer() {
        XCTAssertThrowsError(try load(["--code-field", "x", "--message-field", "x"]))
        XCTAssertThrowsError(try load([], file: #"{"dialect": {"preset": "antd", "code": "success"}}"#))
    }

    // Lesser: `check-config` shows the top-level `message_field` as the dialect's first message
    // path only. Reading that output back (its `dialect` object plus its `message_field`) narrows
    // Alipay's ["sub_msg", "msg"] to ["sub_msg"]: a gateway failure with only `msg` then loses its
    // message.
    func testcheckConfigOutput_readsBackAsTheSameDialect() throws {
        let shown = ConfigLoader.describe(try load(["--dialect", "alipay"]))
        let object = try JSONSerialization.jsonObject(with: Data(shown.utf8)) as! [String: Any]
        var file: [String: Any] = ["dialect": object["dialect"]!]
        for key in ["message_field", "code_field", "success_codes", "auth_codes", "code_status"] { file[key] = object[key] }
        let back = try load([], file: String(decoding: try JSONSerialization.data(withJSONObject: file), as: UTF8.self))
        XCTAssertEqual(back.envelope.dialect, .alipay)
    }

    // Lesser: SPEC "a one-line message naming the option". A field option that clashes with the
    // dialect is reported against `--dialect`, an option the user never gave:
    // `peel --upstream http://x --data-field message` → "--dialect: payload member message is also
    // an envelope member" (before issue 25: "--data-field: code, message and data fields must differ").
    func testfieldOptionClash_namesTheFieldOption() {
        do {
            _ = try load(["--data-field", "message"])
            XCTFail("--data-field message loads")
        } catch let e as ConfigError {
            XCTAssertEqual(e.option, "--data-field", e.problem)
        } catch {
            XCTFail("\(error)")
        }
    }
}
