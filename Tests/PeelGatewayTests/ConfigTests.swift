import PeelEnvelope
import Foundation
@testable import PeelGateway
import PeelIO
import XCTest

final class ConfigTests: XCTestCase {
    private let env = ["PEEL_UPSTREAM": "https://api.example.com/v1/"]

    func testDefaults_matchTheContract() throws {
        let c = try ConfigLoader.load(arguments: [], environment: env)
        XCTAssertEqual(c.upstream.origin, "https://api.example.com")
        XCTAssertEqual(c.upstream.basePath, "/v1")
        XCTAssertEqual(c.listeners.client, HostPort(host: "127.0.0.1", port: 8080))
        XCTAssertEqual(c.listeners.admin, HostPort(host: "127.0.0.1", port: 9090))
        XCTAssertEqual(c.calls.timeout, 30)
        XCTAssertEqual(c.calls.connectTimeout, 5)
        XCTAssertEqual(c.probe.path, "/")
        XCTAssertEqual(c.probe.interval, 2)
        XCTAssertEqual(c.probe.timeout, 1)
        XCTAssertEqual(c.probe.fall, 3)
        XCTAssertEqual(c.probe.rise, 2)
        XCTAssertEqual(c.envelope.dialect, .peel)
        XCTAssertEqual(c.envelope.dialect.successCodes, CodeSet([0]))
        XCTAssertEqual(c.envelope.dialect.authCodes, CodeSet([7]))
        XCTAssertEqual(c.memory.maxBody, 10_485_760)
        XCTAssertEqual(c.calls.maxResponseBody, 67_108_864)
        XCTAssertTrue(c.logs.access)
        XCTAssertEqual(c.listeners.workers, GatewayConfig.cpuCount)
    }

    func testIssue13Options_defaultsSizesAndOff() throws {
        let d = try ConfigLoader.load(arguments: [], environment: env)
        XCTAssertEqual(d.reachability.path, "/_peel/reachability")
        XCTAssertEqual(d.reachability.maxStreams, 1000)
        XCTAssertEqual(d.offline.capacity, 0, "the offline cache is opt-in")
        XCTAssertEqual(d.offline.maxAge, 86_400)
        let c = try ConfigLoader.load(arguments: ["--offline-cache", "64MiB", "--reachability-path", "off", "--max-streams", "5",
                                                  "--offline-cache-max-age", "3600"], environment: env)
        XCTAssertEqual(c.offline.capacity, 64 << 20)
        XCTAssertNil(c.reachability.path)
        XCTAssertEqual(c.reachability.maxStreams, 5)
        XCTAssertEqual(c.offline.maxAge, 3600)
        for (text, bytes) in [("1048576", 1 << 20), ("512KiB", 512 << 10), ("1 GB", 1_000_000_000), ("2mb", 2_000_000), ("0", 0)] {
            XCTAssertEqual(try ConfigLoader.load(arguments: ["--offline-cache", text], environment: env).offline.capacity, bytes, text)
        }
        for bad in ["64XB", "-1", "MiB", "1.5MiB", "2TiB"] {
            XCTAssertThrowsError(try ConfigLoader.load(arguments: ["--offline-cache", bad], environment: env), bad) { e in
                XCTAssertEqual((e as? ConfigError)?.option, "--offline-cache")
            }
        }
        XCTAssertThrowsError(try ConfigLoader.load(arguments: ["--reachability-path", "status"], environment: env))
    }

    func testPrecedence_flagOverEnvironmentOverFileOverDefault() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("peel-config-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("peel.json")
        try Data(#"{"upstream":"http://file.example","timeout":11,"connect_timeout":2,"fall":9,"code_status":{"1001":409},"auth_codes":[7,401],"access_log":"off"}"#.utf8).write(to: file)
        let c = try ConfigLoader.load(arguments: ["--config", file.path, "--timeout", "13"],
                                      environment: ["PEEL_TIMEOUT": "12", "PEEL_FALL": "4"])
        XCTAssertEqual(c.upstream.host, "file.example")
        XCTAssertEqual(c.calls.timeout, 13, "flag wins")
        XCTAssertEqual(c.probe.fall, 4, "environment beats file")
        XCTAssertEqual(c.calls.connectTimeout, 2, "file beats default")
        XCTAssertEqual(c.envelope.dialect.codeStatus, CodeStatusMap([1001: 409]))
        XCTAssertEqual(c.envelope.dialect.authCodes, CodeSet([7, 401]))
        XCTAssertFalse(c.logs.access)
    }

    func testStrict_rejectsUnknownKeysBadValuesAndLaxJSON() throws {
        func option(_ args: [String], _ e: [String: String] = [:], file: String? = nil) -> String? {
            var args = args
            var path: URL? = nil
            if let file {
                path = FileManager.default.temporaryDirectory.appendingPathComponent("peel-\(UUID().uuidString).json")
                try? Data(file.utf8).write(to: path!)
                args += ["--config", path!.path]
            }
            defer { if let path { try? FileManager.default.removeItem(at: path) } }
            do {
                _ = try ConfigLoader.load(arguments: args, environment: e)
                return nil
            } catch {
                return error.option
            }
        }
        XCTAssertEqual(option([]), "--upstream")
        XCTAssertEqual(option(["--upstream", "ftp://x"]), "--upstream")
        XCTAssertEqual(option(["--upstream", "http://x", "--bogus", "1"]), "--bogus")
        XCTAssertEqual(option(["--upstream", "http://x", "--workers", "0"]), "--workers")
        XCTAssertEqual(option(["--upstream", "http://x", "--listen", "nonsense"]), "--listen")
        XCTAssertEqual(option(["--upstream", "http://x"], ["PEEL_RISE": "-1"]), "PEEL_RISE")
        XCTAssertEqual(option(["--upstream", "http://x", "--access-log", "yaml"]), "--access-log")
        XCTAssertEqual(option(["--upstream", "http://x", "--connect-timeout", "60"]), "--connect-timeout")
        XCTAssertNil(option(["--upstream", "http://x", "--timeout", "2"]), "the default connect timeout follows a shorter --timeout")
        XCTAssertEqual(option(["--upstream", "http://x", "--auth-codes", "0"]), "--auth-codes")
        XCTAssertNotNil(option(["--upstream", "http://x"], file: #"{"timeout": 3, "colour": "red"}"#)?.contains("colour"))
        XCTAssertEqual(option(["--upstream", "http://x"], file: #"{"timeout": 3,}"#), "--config", "trailing comma must be refused")
    }

    func testUpstreamURL_parsesHostsPortsAndBasePaths() throws {
        let v6 = try UpstreamURL.parse("http://[::1]:8081/api/").get()
        XCTAssertEqual(v6.host, "::1")
        XCTAssertEqual(v6.port, 8081)
        XCTAssertEqual(v6.basePath, "/api")
        XCTAssertEqual(v6.origin, "http://[::1]:8081")
        XCTAssertThrowsError(try UpstreamURL.parse("http://user:pw@host").get())
        XCTAssertThrowsError(try UpstreamURL.parse("http://host:0").get())
        XCTAssertThrowsError(try UpstreamURL.parse("http://host/a?b=1").get())
    }

    func testDescribe_isValidJSONWithEveryOption() throws {
        let c = try ConfigLoader.load(arguments: ["--code-status", "1001=409"], environment: env)
        let text = ConfigLoader.describe(c)
        let obj = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
        XCTAssertEqual(obj["upstream"] as? String, "https://api.example.com/v1")
        // The code map's effect is shown once, in the effective dialect; the option itself reads as not set.
        XCTAssertEqual(((obj["dialect"] as? [String: Any])?["code_status"] as? [String: Int])?["1001"], 409)
        XCTAssertTrue(obj["code_status"] is NSNull)
        XCTAssertEqual(obj["admin_listen"] as? String, "127.0.0.1:9090")
    }

    // Each option is declared once (ConfigLoader.options); the README's table must say the same
    // flag, value placeholder, variable and default, and name no option that is not declared.
    func testReadmeOptionsTable_matchesTheDeclarations() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let text = try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
        var rows: [String: (value: String, env: String, defaultText: String)] = [:]
        func unquote(_ s: Substring) -> String { s.trimmingCharacters(in: .whitespaces).replacingOccurrences(of: "`", with: "") }
        for line in text.split(separator: "\n") where line.hasPrefix("| `--") {
            let cells = line.replacingOccurrences(of: "\\|", with: "\u{1}").split(separator: "|", omittingEmptySubsequences: false)
                .map { $0.replacingOccurrences(of: "\u{1}", with: "|") }
            XCTAssertGreaterThanOrEqual(cells.count, 5, String(line))
            guard cells.count >= 5 else { continue }
            let flags = cells[1].components(separatedBy: " / ")
            let envs = cells[2].components(separatedBy: " / ")
            let defaults = cells[3].components(separatedBy: " / ")
            for (k, flag) in flags.enumerated() {
                let parts = unquote(Substring(flag)).split(separator: " ", maxSplits: 1).map(String.init)
                let name = String(parts[0].dropFirst(2))
                rows[name] = (parts.count > 1 ? parts[1] : "", unquote(Substring(envs[min(k, envs.count - 1)])),
                              unquote(Substring(defaults[min(k, defaults.count - 1)])))
            }
        }
        XCTAssertGreaterThan(rows.count, 20, "the README's options table was not found")
        for spec in ConfigLoader.options {
            guard let row = rows[spec.name] else {
                XCTFail("\(spec.flag) is declared but not in the README's options table")
                continue
            }
            XCTAssertEqual(row.value, spec.value, "\(spec.flag) value placeholder")
            XCTAssertEqual(row.env, spec.env, "\(spec.flag) variable")
            XCTAssertEqual(row.defaultText, spec.defaultText, "\(spec.flag) default")
            XCTAssertNotNil(spec.show, "\(spec.flag) has no shown value (check-config)")
        }
        let declared = Set(ConfigLoader.options.map(\.name) + ["config"])
        for name in rows.keys { XCTAssertTrue(declared.contains(name), "README names --\(name), which is not declared") }
    }

    func testCheckConfig_showsEveryOptionOnce() throws {
        let c = try ConfigLoader.load(arguments: ["--timeout", "12.5"], environment: env)
        let doc = try JSONSerialization.jsonObject(with: Data(ConfigLoader.describe(c).utf8)) as? [String: Any]
        XCTAssertEqual(doc?.count, ConfigLoader.options.count)
        XCTAssertEqual(doc?["timeout"] as? Double, 12.5)
        XCTAssertEqual(doc?["body_timeout"] as? Double, 60)
    }

    // MARK: issue 19: lists extend with +

    func testAListBeginningWithPlus_addsToItsDefault_inFlagsEnvironmentAndFile() throws {
        let defaults = GatewayConfig().envelope.passthroughContentTypes
        let flag = try ConfigLoader.load(arguments: ["--passthrough-content-types", "+application/x-ndjson"], environment: env)
        XCTAssertEqual(flag.envelope.passthroughContentTypes, defaults + ["application/x-ndjson"])
        let replaced = try ConfigLoader.load(arguments: ["--passthrough-content-types", "application/x-ndjson"], environment: env)
        XCTAssertEqual(replaced.envelope.passthroughContentTypes, ["application/x-ndjson"], "without + the list still replaces")
        var e = env
        e["PEEL_AUTH_CODES"] = "+401, 403"
        XCTAssertEqual(try ConfigLoader.load(arguments: [], environment: e).envelope.dialect.authCodes, CodeSet([7, 401, 403]))
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("peel-plus-\(getpid()).json")
        try Data(#"{"compression": ["+gzip"], "passthrough_content_types": ["+text/plain", "image/*"], "cors_origins": "+https://*.example.com"}"#.utf8).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let f = try ConfigLoader.load(arguments: ["--config", file.path], environment: env)
        XCTAssertEqual(f.envelope.passthroughContentTypes, defaults + ["text/plain"], "repeats of the default are dropped")
        XCTAssertEqual(f.compression.codings, GatewayConfig().compression.codings)
        XCTAssertEqual(f.cors.origins, ["https://*.example.com"])
        XCTAssertTrue(ConfigLoader.describe(flag).contains("application/x-ndjson"), "check-config shows the result")
        XCTAssertThrowsError(try ConfigLoader.load(arguments: ["--auth-codes", "+"], environment: env))
    }

    func testPreserveHostAndExposeHeaders_areOptions() throws {
        let c = try ConfigLoader.load(arguments: ["--preserve-host", "on", "--cors-expose-headers", "X-Total-Count,Link"], environment: env)
        XCTAssertTrue(c.calls.preserveHost)
        XCTAssertEqual(c.cors.exposeHeaders, ["X-Total-Count", "Link"])
        XCTAssertFalse(try ConfigLoader.load(arguments: [], environment: env).calls.preserveHost)
        XCTAssertThrowsError(try ConfigLoader.load(arguments: ["--cors-expose-headers", "bad name"], environment: env))
    }

    func testForwardFields_fromFlagEnvironmentAndFile_andRefusedWhenUnknown() throws {
        XCTAssertEqual(try ConfigLoader.load(arguments: [], environment: env).calls.forwardFields, .xForwarded)
        XCTAssertEqual(try ConfigLoader.load(arguments: ["--forward-fields", "both"], environment: env).calls.forwardFields, .both)
        var e = env
        e["PEEL_FORWARD_FIELDS"] = "none"
        XCTAssertEqual(try ConfigLoader.load(arguments: [], environment: e).calls.forwardFields, .none)
        let file = NSTemporaryDirectory() + "peel-forward-fields-\(getpid()).json"
        try Data(#"{"upstream": "http://127.0.0.1:1", "forward_fields": "forwarded"}"#.utf8).write(to: URL(fileURLWithPath: file))
        defer { try? FileManager.default.removeItem(atPath: file) }
        XCTAssertEqual(try ConfigLoader.load(arguments: ["--config", file], environment: [:]).calls.forwardFields, .forwarded)
        do {
            _ = try ConfigLoader.load(arguments: ["--forward-fields", "x-real-ip"], environment: env)
            XCTFail("an unknown choice is refused")
        } catch {
            XCTAssertEqual(error.option, "--forward-fields")
            XCTAssertEqual(error.problem, "must be x-forwarded, forwarded, both or none")
        }
    }
}
