import Foundation
import PeelEnvelope
@testable import PeelGateway
import XCTest

/// `--dialect`, the code options as JSON scalars, and dialects described in the config file.
final class DialectConfigTests: XCTestCase {
    private let env = ["PEEL_UPSTREAM": "http://127.0.0.1:1"]

    private func load(_ args: [String], file: String? = nil, env extra: [String: String] = [:]) throws -> GatewayConfig {
        try loadConfig(args, file: file, environment: env.merging(extra) { $1 })
    }

    private func refusal(_ args: [String], file: String? = nil) -> ConfigError? {
        do {
            _ = try load(args, file: file)
            return nil
        } catch let e as ConfigError {
            return e
        } catch {
            return nil
        }
    }

    func testDialectFlag_picksAPreset_andUnknownNamesListThePresets() throws {
        XCTAssertEqual(try load(["--dialect", "ruoyi"]).envelope.dialect, .ruoyi)
        XCTAssertEqual(try load([], env: ["PEEL_DIALECT": "wechat"]).envelope.dialect, .wechat)
        let e = refusal(["--dialect", "ruoyi-vue"])
        XCTAssertEqual(e?.option, "--dialect")
        XCTAssertTrue(e?.problem.contains("peel, ruoyi, yudao, alibaba, wechat, jsend, antd, jeecg, alipay, error-object") ?? false,
                      e?.problem ?? "")
    }

    func testCodeFlags_takeIntegersAndQuotedStrings() throws {
        let c = try load(["--success-codes", #"0,"00000""#, "--auth-codes", #""A0230",401"#])
        XCTAssertEqual(c.envelope.dialect.successCodes, CodeSet([0, "00000"]))
        XCTAssertEqual(c.envelope.dialect.authCodes, CodeSet(["A0230", 401]))
        for bad in ["00000", "1e3", "0x10", "A0230"] {
            let e = refusal(["--success-codes", bad])
            XCTAssertEqual(e?.option, "--success-codes", bad)
            XCTAssertTrue(e?.problem.contains("write an integer (200) or a string in double quotes") ?? false, e?.problem ?? bad)
        }
    }

    func testPlus_addsToTheChosenDialectsList_whicheverSourceNamedIt() throws {
        let c = try load(["--auth-codes", "+403"], file: #"{"dialect": "ruoyi"}"#)
        XCTAssertEqual(c.envelope.dialect.authCodes, CodeSet([401, 403]))
        XCTAssertEqual(c.envelope.dialect.successCodes, CodeSet([200]), "the preset's own list stays")
        let f = try load(["--dialect", "alibaba"], file: #"{"auth_codes": ["+", "A0301"]}"#)
        XCTAssertEqual(f.envelope.dialect.authCodes, CodeSet(["A0230", "A0231", "A0301"]))
    }

    func testConfigFile_keepsJSONTypes() throws {
        let c = try load([], file: #"{"success_codes": ["00000", 0], "code_status": {"1001": 409, "A0230": 401, "00042": 400}}"#)
        XCTAssertEqual(c.envelope.dialect.successCodes, CodeSet(["00000", 0]), "a JSON string stays a string")
        XCTAssertEqual(c.envelope.dialect.codeStatus, CodeStatusMap([1001: 409, "A0230": 401, "00042": 400]))
        XCTAssertEqual(refusal([], file: #"{"success_codes": [1.5]}"#)?.option.hasSuffix("success_codes[0]"), true)
        XCTAssertEqual(refusal([], file: #"{"success_codes": [true]}"#)?.option.hasSuffix("success_codes[0]"), true)
        XCTAssertNotNil(refusal([], file: #"{"success_codes": "00000"}"#), "a bare string follows the flag syntax")
    }

    func testConfigFile_dialectObjects() throws {
        let preset = try load([], file: #"{"dialect": {"preset": "ruoyi", "auth_codes": [401, 403]}}"#)
        var expected = Dialect.ruoyi
        expected.authCodes = CodeSet([401, 403])
        XCTAssertEqual(preset.envelope.dialect, expected)
        let custom = try load([], file: #"""
            {"dialect": {"code": "resultCode", "success": "code", "success_codes": ["SUCCESS"], "message": ["resultMsg", "error.message"],
                         "payload": {"rest": true}, "ignore": ["traceId"], "extras": ["error.details"]}}
            """#)
        XCTAssertEqual(custom.envelope.dialect.code, "resultCode")
        XCTAssertEqual(custom.envelope.dialect.messages, ["resultMsg", "error.message"])
        XCTAssertEqual(custom.envelope.dialect.payload, .rest)
        XCTAssertEqual(custom.envelope.dialect.ignore, ["traceId"])
        let pattern = try load([], file: #"{"dialect": {"preset": "alipay", "payload": {"pattern": "*_responce", "failure": "error_response"}}}"#)
        XCTAssertEqual(pattern.envelope.dialect.payload, .pattern(suffix: "_responce", failure: "error_response"))
    }

    func testConfigFile_dialectErrorsNameThePath() {
        XCTAssertTrue(refusal([], file: #"{"dialect": {"preset": "ruoyi", "sucess": "code"}}"#)?.option.hasSuffix("dialect.sucess") ?? false)
        XCTAssertTrue(refusal([], file: #"{"dialect": {"message": ["msg", ""]}}"#)?.option.hasSuffix("dialect.message[1]") ?? false)
        XCTAssertTrue(refusal([], file: #"{"dialect": {"payload": {"pattern": "response"}}}"#)?.option.hasSuffix("dialect.payload.pattern") ?? false)
        XCTAssertTrue(refusal([], file: #"{"dialect": {"success": {"flag": ""}}}"#)?.option.hasSuffix("dialect.success.flag") ?? false)
        XCTAssertNotNil(refusal([], file: #"{"dialect": {"code": "msg", "message": ["msg"], "payload": "msg"}}"#), "payload cannot be an envelope member")
        XCTAssertEqual(refusal(["--auth-codes", "0"])?.problem, "auth codes overlap success codes")
        XCTAssertEqual(refusal(["--auth-codes", "0"])?.option, "--auth-codes")
    }

    func testFieldFlags_overrideThePreset() throws {
        let c = try load(["--dialect", "ruoyi", "--message-field", "message", "--data-field", "result"])
        XCTAssertEqual(c.envelope.dialect.messages, ["message"])
        XCTAssertEqual(c.envelope.dialect.payload, .member("result"))
        XCTAssertEqual(c.envelope.dialect.successCodes, CodeSet([200]))
    }

    func testCheckConfig_showsTheDialect_andItReadsBack() throws {
        for d in Dialect.presets {
            let shown = ConfigLoader.describe(try load(["--dialect", d.preset]))
            let object = try JSONSerialization.jsonObject(with: Data(shown.utf8)) as! [String: Any]
            let dialect = object["dialect"] as! [String: Any]
            XCTAssertEqual(dialect["preset"] as? String, d.preset)
            let back = try JSONSerialization.data(withJSONObject: ["dialect": dialect])
            XCTAssertEqual(try load([], file: String(decoding: back, as: UTF8.self)).envelope.dialect, d, d.preset)
        }
    }

    func testDialectsListing_answersEverySample() {
        let text = DialectCatalog.text()
        for d in Dialect.presets { XCTAssertTrue(text.contains("\(d.preset): "), d.preset) }
        XCTAssertTrue(text.contains(#"-> 200 {"token":"eyJhbGciOiJIUzUxMiJ9.e30.c2ln"}"#), text)
        XCTAssertTrue(text.contains(#""kind":"auth-expired""#))
    }

    func testReadmeDialectsListing_isWhatPeelPrints() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let text = try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
        guard let start = text.range(of: "<!-- peel dialects -->\n```\n"), let end = text.range(of: "\n```\n<!-- /peel dialects -->") else {
            return XCTFail("the README's dialects listing was not found")
        }
        let listed = String(text[start.upperBound..<end.lowerBound])
        XCTAssertEqual(listed, DialectCatalog.text().trimmingCharacters(in: .newlines),
                       "regenerate the README block with `peel dialects`")
    }

    // Issue 26: the config file is read into a typed tree (no Foundation `Any`): a name given twice
    // is refused with its path instead of the last one silently winning, and numbers keep their text.
    func testConfigFile_duplicateNamesAreRefusedWithTheirPath() {
        XCTAssertTrue(refusal([], file: #"{"timeout": 5, "timeout": 6}"#)?.option.hasSuffix(": timeout") ?? false)
        let nested = refusal([], file: #"{"dialect": {"preset": "ruoyi", "code_status": {"500": 502, "500": 503}}}"#)
        XCTAssertTrue(nested?.option.hasSuffix(": dialect.code_status.500") ?? false, nested?.option ?? "")
        XCTAssertEqual(nested?.problem, "is given twice")
        XCTAssertEqual(refusal([], file: #"{"dialect": {"preset": "alibaba", "auth_codes": [1e3]}}"#)?.problem,
                       "1e3 is not a code: an integer within 64 bits or a string")
    }
}
