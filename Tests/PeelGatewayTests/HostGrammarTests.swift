import Foundation
import PeelIO
import XCTest

@testable import PeelGateway

/// Host values refused beyond the grammar list in RequestPolicyTests: an empty host with a port.
final class HostGrammarTests: XCTestCase {
    /// RFC 9110 §4.2.1: "A sender MUST NOT generate an http URI with an empty host identifier. A
    /// recipient that processes such a URI reference MUST reject it as invalid." `:80` is an empty
    /// reg-name with a port: not "a host and optional port" (an empty Host, for an origin without
    /// an authority, has no port). It reaches X-Forwarded-Host, Forwarded and rewritten Locations.
    func testAnEmptyHostWithAPort_isRefused() {
        for host in [":80", ":8080", ":0"] {
            XCTAssertNotNil(RequestPolicy.hostProblem(host), host)
        }
    }
}
