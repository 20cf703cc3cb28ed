import Foundation
import PeelEnvelope
@testable import PeelGateway
import XCTest

/// Issue 33's dialect rules as the config file and the flags write them: array indices, code lists,
/// auth code prefixes, settings that can never take effect, and check-config's effective values.
final class DialectRuleConfigTests: XCTestCase {
    private let env = ["PEEL_UPSTREAM": "http://127.0.0.1:1"]

    private func load(_ args: [String] = [], file: String? = nil) throws -> GatewayConfig {
        try loadConfig(args, file: file, environment: env)
    }

    private func refusal(_ args: [String] = [], file: String? = nil) -> ConfigError? {
        do {
            _ = try load(args, file: file)
            return nil
        } catch let e as ConfigError {
            return e
        } catch {
            return nil
        }
    }

    /// The refusal's key path after the file name (`dialect.message[0]`), and its words.
    private func refused(_ file: String) -> (path: String, problem: String)? {
        guard let e = refusal(file: file) else { return nil }
        return (e.option.components(separatedBy: ": ").last ?? e.option, e.problem)
    }

    // MARK: array indices

    func testArrayIndexPaths_loadAndBadOnesNameTheirKey() throws {
        let c = try load(file: #"{"dialect": {"code": "errors.0.extensions.code", "success": {"error": "errors"}, "message": "errors.0.message"}}"#)
        XCTAssertEqual(c.envelope.dialect.messages, ["errors.0.message"])
        let brackets = refused(#"{"dialect": {"message": ["msg", "errors[0].message"]}}"#)
        XCTAssertEqual(brackets?.path, "dialect.message[1]")
        XCTAssertTrue(brackets?.problem.contains("brackets") ?? false, brackets?.problem ?? "")
        let zero = refused(#"{"dialect": {"code": "errors.01.code"}}"#)
        XCTAssertEqual(zero?.path, "dialect.code")
        XCTAssertTrue(zero?.problem.contains("leading zero") ?? false, zero?.problem ?? "")
        let sign = refused(#"{"dialect": {"preset": "antd", "success": {"flag": "meta.-1"}}}"#)
        XCTAssertEqual(sign?.path, "dialect.success.flag")
        XCTAssertTrue(sign?.problem.contains("sign") ?? false, sign?.problem ?? "")
        let flag = refusal(["--message-field", "errors[0].message"])
        XCTAssertEqual(flag?.option, "--message-field")
        XCTAssertTrue(flag?.problem.contains("brackets") ?? false, flag?.problem ?? "")
    }

    // MARK: several code members

    func testCodeList_loadsAndCheckConfigPrintsItBackInTheSameForm() throws {
        let c = try load(file: #"{"dialect": {"code": ["name", "error"], "success": "code_or_absent", "success_codes": [], "auth_codes": [], "payload": {"rest": true}}}"#)
        XCTAssertEqual(c.envelope.dialect.codes, ["name", "error"])
        XCTAssertTrue(DialectConfig.json(c.envelope.dialect).contains(#""code":["name","error"]"#), DialectConfig.json(c.envelope.dialect))
        XCTAssertTrue(DialectConfig.json(Dialect.peel).contains(#""code":"code""#), "one member is a string")
        XCTAssertEqual(try roundTrip(c).envelope.dialect, c.envelope.dialect)
        XCTAssertEqual(refused(#"{"dialect": {"code": []}}"#)?.path, "dialect.code")
        XCTAssertEqual(refused(#"{"dialect": {"code": ["name", "error."]}}"#)?.path, "dialect.code[1]")
    }

    /// check-config's output for `c`, loaded back as a config file.
    private func roundTrip(_ c: GatewayConfig) throws -> GatewayConfig {
        let shown = ConfigLoader.describe(c)
        return try load(file: shown)
    }

    // MARK: auth code prefixes

    func testAuthCodePrefix_fromTheFileAndTheFlag() throws {
        let file = try load(file: #"{"dialect": {"preset": "alibaba", "auth_codes": ["+", "AuthFailure.*"]}}"#)
        XCTAssertEqual(file.envelope.dialect.authCodes, CodeSet(["A0230", "A0231", "AuthFailure.*"]))
        let flag = try load(["--dialect", "alibaba", "--auth-codes", #""AuthFailure.*",401"#])
        XCTAssertEqual(flag.envelope.dialect.authCodes.prefixes, ["AuthFailure."])
        XCTAssertTrue(flag.envelope.dialect.authCodes.contains("AuthFailure.TokenFailure"))
    }

    func testPrefix_isRefusedInSuccessCodes_andAloneInAuthCodes() {
        let success = refused(#"{"dialect": {"success_codes": [0, "OK*"]}}"#)
        XCTAssertEqual(success?.path, "dialect.success_codes[1]")
        XCTAssertTrue(success?.problem.contains("auth codes only") ?? false, success?.problem ?? "")
        XCTAssertEqual(refusal(["--success-codes", #""OK*""#])?.option, "--success-codes")
        XCTAssertEqual(refused(#"{"dialect": {"auth_codes": ["+", 401, "*"]}}"#)?.path, "dialect.auth_codes[2]")
        XCTAssertNotNil(refusal(["--auth-codes", #""*""#]))
    }

    func testPrefixOverlappingASuccessCode_isRefused() {
        let e = refused(#"{"dialect": {"success_codes": ["AuthFailure.None"], "auth_codes": ["AuthFailure.*"]}}"#)
        XCTAssertNotNil(e)
        XCTAssertTrue(e?.problem.contains("overlap") ?? false, e?.problem ?? "")
    }
}
