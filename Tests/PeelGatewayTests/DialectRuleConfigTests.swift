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

    // MARK: settings that can never take effect

    func testUnusedSettings_areRefusedWithTheirKeyPath() {
        let cases: [(String, String, String)] = [
            (#"{"dialect": {"success": "code", "success_codes": []}}"#, "dialect.success_codes", "at least one success code"),
            (#"{"dialect": {"preset": "antd", "success_codes": [0]}}"#, "dialect.success_codes", "never used"),
            (#"{"dialect": {"success": {"flag": "ok"}, "success_codes": [0]}}"#, "dialect.success_codes", "never used"),
            (#"{"dialect": {"preset": "alipay", "ignore": ["sign"]}}"#, "dialect.ignore", "top-level members are never in it"),
            (#"{"dialect": {"preset": "wechat", "siblings": "keep"}}"#, "dialect.siblings", "never used"),
            (#"{"dialect": {"preset": "wechat", "siblings": "drop"}}"#, "dialect.siblings", "never used"),
            (#"{"dialect": {"preset": "antd", "code": null, "auth_codes": [401]}}"#, "dialect.auth_codes", "no code member"),
            (#"{"dialect": {"preset": "antd", "code": null, "code_status": {"1001": 409}}}"#, "dialect.code_status", "no code member"),
            (#"{"dialect": {"code_status": {"7": 401}}}"#, "dialect.code_status", "auth code"),
            (#"{"dialect": {"code_status": {"0": 400}}}"#, "dialect.code_status", "success code"),
            (#"{"dialect": {"ignore": ["code"]}}"#, "dialect.ignore", "leaves it out already"),
            (#"{"dialect": {"ignore": ["trace", "trace"]}}"#, "dialect.ignore", "twice"),
            (#"{"dialect": {"message": ["msg", "msg"]}}"#, "dialect.message", "twice"),
            (#"{"dialect": {"preset": "antd", "auth_flag": "success"}}"#, "dialect.auth_flag", "another role"),
            (#"{"dialect": {"code": "data.code"}}"#, "dialect.payload", "also an envelope member"),
        ]
        for (file, path, words) in cases {
            let e = refused(file)
            XCTAssertEqual(e?.path, path, file)
            XCTAssertTrue(e?.problem.contains(words) ?? false, "\(file): \(e?.problem ?? "loads")")
        }
    }

    func testTopLevelDialectErrors_nameTheFileAndTheKey() {
        guard let e = refusal(file: #"{"dialect": {"success": "code", "success_codes": []}}"#) else { return XCTFail("loads") }
        XCTAssertTrue(e.option.hasSuffix(".json: dialect.success_codes"), e.option)
        XCTAssertFalse(e.option.contains("--dialect"))
        XCTAssertEqual(refusal(["--dialect", "antd", "--success-codes", "0"])?.option, "--success-codes")
        let fromFileKey = refusal(file: #"{"dialect": "antd", "success_codes": [0]}"#)
        XCTAssertTrue(fromFileKey?.option.hasSuffix(".json: success_codes") ?? false, fromFileKey?.option ?? "loads")
    }

    func testRouteDialectErrors_nameTheKeyToo() {
        let file = #"{"upstreams": {"a": {"endpoints": ["http://127.0.0.1:1"]}}, "routes": [{"prefix": "/", "upstream": "a", "dialect": {"preset": "alipay", "ignore": ["sign"]}}]}"#
        let e = refusal(file: file)
        XCTAssertTrue(e?.option.hasSuffix("routes[0].dialect.ignore") ?? false, e?.option ?? "loads")
    }

    func testWhatAPresetBringsForNothing_isDroppedNotRefused() throws {
        // A flag rule on the default preset: its success code 0 has nothing to do; so do auth codes without a code.
        let flag = try load(file: #"{"dialect": {"success": {"flag": "ok"}}}"#)
        XCTAssertTrue(flag.envelope.dialect.successCodes.isEmpty)
        XCTAssertEqual(flag.envelope.dialect.authCodes, CodeSet([7]), "the code is still read, so auth codes still work")
        let noCode = try load(file: #"{"dialect": {"preset": "antd", "code": null}}"#)
        XCTAssertTrue(noCode.envelope.dialect.authCodes.isEmpty)
        let rest = try load(file: #"{"dialect": {"preset": "ruoyi", "payload": {"rest": true}}}"#)
        XCTAssertEqual(rest.envelope.dialect.siblings, .drop, "ruoyi's keep says nothing without a payload member")
    }

    // MARK: check-config prints effective values only

    func testCheckConfig_showsCodesOnceWithoutPlus_andLoadsBack() throws {
        let c = try load(["--auth-codes", "+401", "--success-codes", #"+"OK""#, "--code-status", "1001=409"])
        let shown = ConfigLoader.describe(c)
        XCTAssertFalse(shown.contains(#""+""#), shown)
        let object = try JSONSerialization.jsonObject(with: Data(shown.utf8)) as! [String: Any]
        for key in ["auth_codes", "success_codes", "code_status", "code_field", "message_field", "data_field"] {
            XCTAssertTrue(object[key] is NSNull, "\(key) is shown once, in dialect")
        }
        let dialect = object["dialect"] as! [String: Any]
        XCTAssertEqual(dialect["auth_codes"] as? [Int], [7, 401])
        XCTAssertEqual(try roundTrip(c).envelope.dialect, c.envelope.dialect)
    }

    func testCheckConfig_printsOnlyKeysThatTakeEffect_andEveryPresetLoadsBack() throws {
        let antd = DialectConfig.json(.antd)
        XCTAssertFalse(antd.contains("success_codes"), antd)
        let wechat = DialectConfig.json(.wechat)
        XCTAssertFalse(wechat.contains("siblings"), wechat)
        let alipay = DialectConfig.json(.alipay)
        XCTAssertFalse(alipay.contains("ignore"), alipay)
        for d in Dialect.presets {
            let c = try load(["--dialect", d.preset])
            XCTAssertEqual(try roundTrip(c).envelope.dialect, d, d.preset)
        }
    }

    func testCheckConfig_routeDialectsLoadBack() throws {
        let file = #"{"upstreams": {"a": {"endpoints": ["http://127.0.0.1:1"]}}, "routes": [{"prefix": "/v1", "upstream": "a", "dialect": {"preset": "peel", "code": ["name", "error"], "success": "code_or_absent", "success_codes": [], "auth_codes": ["AuthFailure.*"], "payload": {"rest": true}}}, {"prefix": "/", "upstream": "a", "dialect": "alipay"}]}"#
        let c = try load(file: file)
        let back = try roundTrip(c)
        XCTAssertEqual(back.routing?.routes.map(\.dialect), c.routing?.routes.map(\.dialect))
    }

    // MARK: auth_flag and the new presets

    func testAuthFlag_loadsAndReadsBack_evenWhenTakenAwayFromABP() throws {
        let set = try load(file: #"{"dialect": {"preset": "antd", "auth_flag": "meta.unAuthorizedRequest"}}"#)
        XCTAssertEqual(set.envelope.dialect.authFlag, "meta.unAuthorizedRequest")
        XCTAssertEqual(try roundTrip(set).envelope.dialect, set.envelope.dialect)
        let removed = try load(file: #"{"dialect": {"preset": "abp", "auth_flag": null}}"#)
        XCTAssertNil(removed.envelope.dialect.authFlag)
        XCTAssertTrue(DialectConfig.json(removed.envelope.dialect).contains(#""auth_flag":null"#))
        XCTAssertEqual(try roundTrip(removed).envelope.dialect, removed.envelope.dialect)
        XCTAssertFalse(DialectConfig.json(.peel).contains("auth_flag"), "shown only where it says something")
        XCTAssertEqual(refused(#"{"dialect": {"auth_flag": "a[0]"}}"#)?.path, "dialect.auth_flag")
    }

    func testNewPresets_loadByName() throws {
        for name in ["tencent", "baidu", "slack", "telegram", "gin-vue-admin", "abp"] {
            XCTAssertEqual(try load(["--dialect", name]).envelope.dialect.preset, name)
        }
        XCTAssertTrue(ConfigLoader.helpText.contains("gin-vue-admin"), "--help lists every preset")
    }

    // MARK: the status rule

    func testStatusRule_refusesWhatCanNeverTakeEffect_withItsKeyPath() throws {
        XCTAssertEqual(refused(#"{"dialect": {"preset": "rest", "payload": "data"}}"#)?.path, "dialect.payload")
        XCTAssertEqual(refused(#"{"dialect": {"preset": "rest", "ignore": ["meta"]}}"#)?.path, "dialect.ignore")
        XCTAssertEqual(refused(#"{"dialect": {"preset": "rest", "field_errors": "errors"}}"#)?.path, "dialect.field_errors")
        XCTAssertEqual(refused(#"{"dialect": {"preset": "rest", "extras": ["trace"]}}"#)?.path, "dialect.extras")
        XCTAssertEqual(refused(#"{"dialect": {"preset": "rest", "auth_flag": "unauth"}}"#)?.path, "dialect.auth_flag")
        // A failure envelope with a message member is read by the dialect: its field errors apply.
        let read = try load(file: #"{"dialect": {"preset": "rest", "message": "msg", "field_errors": "errors"}}"#)
        XCTAssertEqual(read.envelope.dialect.fieldErrors?.path, "errors")
        // What the peel preset brought (its payload member) has nothing to do under the status rule: dropped.
        let switched = try load(file: #"{"dialect": {"preset": "peel", "success": "status"}}"#)
        XCTAssertEqual(switched.envelope.dialect.payload, .rest)
    }
}

