import Foundation
import PeelDemo
import PeelIO
import XCTest

/// A test case with a fresh demo upstream on an ephemeral port, stopped after each test.
class DemoTestCase: XCTestCase {
    var upstream: DemoUpstream!

    override func setUpWithError() throws {
        upstream = try DemoUpstream(listen: HostPort(host: "127.0.0.1", port: 0))
        try upstream.start()
    }

    override func tearDown() {
        upstream?.stop()
        upstream = nil
    }

    /// A new connection to the demo.
    func connect(timeout: Double = 5) throws -> RawClient {
        try RawClient(port: upstream.port, timeout: timeout)
    }

    /// One GET on a fresh connection.
    func get(_ target: String, headers: [(String, String)] = []) throws -> WireResponse {
        try connect().get(target, headers: headers)
    }

    /// The body parsed as a JSON object.
    func object(_ response: WireResponse, file: StaticString = #filePath, line: UInt = #line) throws -> [String: Any] {
        let value = try JSONSerialization.jsonObject(with: Data(response.body), options: [.fragmentsAllowed])
        return try XCTUnwrap(value as? [String: Any], "not an object: \(response.text)", file: file, line: line)
    }

    /// Polls `condition` for up to `seconds`.
    func eventually(_ seconds: Double = 2, _ condition: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if condition() { return true }
            usleep(5_000)
        }
        return condition()
    }
}
