import Foundation
import PeelGateway
import PeelIO
import XCTest

final class ConfigTests: XCTestCase {
    private let env = ["PEEL_UPSTREAM": "https://api.example.com/v1/"]

    func testDefaults_matchTheContract() throws {
        let c = try ConfigLoader.load(arguments: [], environment: env)
        XCTAssertEqual(c.upstream.origin, "https://api.example.com")
        XCTAssertEqual(c.upstream.basePath, "/v1")
        XCTAssertEqual(c.listen, HostPort(host: "127.0.0.1", port: 8080))
        XCTAssertEqual(c.adminListen, HostPort(host: "127.0.0.1", port: 9090))
        XCTAssertEqual(c.timeout, 30)
        XCTAssertEqual(c.connectTimeout, 5)
        XCTAssertEqual(c.probePath, "/")
        XCTAssertEqual(c.probeInterval, 2)
        XCTAssertEqual(c.probeTimeout, 1)
        XCTAssertEqual(c.fall, 3)
        XCTAssertEqual(c.rise, 2)
        XCTAssertEqual(c.envelope.successCodes, [0])
        XCTAssertEqual(c.envelope.authCodes, [7])
        XCTAssertEqual(c.maxBody, 10_485_760)
        XCTAssertEqual(c.maxUpstreamBody, 67_108_864)
        XCTAssertTrue(c.accessLog)
        XCTAssertEqual(c.workers, GatewayConfig.cpuCount)
    }

    func testIssue13Options_defaultsSizesAndOff() throws {
        let d = try ConfigLoader.load(arguments: [], environment: env)
        XCTAssertEqual(d.reachabilityPath, "/_peel/reachability")
        XCTAssertEqual(d.maxStreams, 1000)
        XCTAssertEqual(d.offlineCache, 0, "the offline cache is opt-in")
        XCTAssertEqual(d.offlineCacheMaxAge, 86_400)
        let c = try ConfigLoader.load(arguments: ["--offline-cache", "64MiB", "--reachability-path", "off", "--max-streams", "5",
                                                  "--offline-cache-max-age", "3600"], environment: env)
        XCTAssertEqual(c.offlineCache, 64 << 20)
        XCTAssertNil(c.reachabilityPath)
        XCTAssertEqual(c.maxStreams, 5)
        XCTAssertEqual(c.offlineCacheMaxAge, 3600)
        for (text, bytes) in [("1048576", 1 << 20), ("512KiB", 512 << 10), ("1 GB", 1_000_000_000), ("2mb", 2_000_000), ("0", 0)] {
            XCTAssertEqual(try ConfigLoader.load(arguments: ["--offline-cache", text], environment: env).offlineCache, bytes, text)
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
        XCTAssertEqual(c.timeout, 13, "flag wins")
        XCTAssertEqual(c.fall, 4, "environment beats file")
        XCTAssertEqual(c.connectTimeout, 2, "file beats default")
        XCTAssertEqual(c.envelope.codeStatus, [1001: 409])
        XCTAssertEqual(c.envelope.authCodes, [7, 401])
        XCTAssertFalse(c.accessLog)
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
        XCTAssertEqual((obj["code_status"] as? [String: Int])?["1001"], 409)
        XCTAssertEqual(obj["admin_listen"] as? String, "127.0.0.1:9090")
    }
}
