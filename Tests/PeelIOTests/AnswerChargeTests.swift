@testable import PeelIO
import XCTest

/// A buffered upstream body counts against its client's share only past `MemoryBudget.answerAllowance`:
/// small answers never take the per-client lock.
final class AnswerChargeTests: XCTestCase {
    private func transfer(_ budget: MemoryBudget, from client: String) -> UpstreamTransfer {
        let t = UpstreamTransfer()
        t.budget = budget
        t.clientAddress = client
        return t
    }

    func testAnswerWithinTheAllowance_countsAgainstTheWholeBudgetAlone() {
        let budget = MemoryBudget(limit: 1 << 20, perClient: 128 << 10)
        let small = transfer(budget, from: "192.0.2.7")
        XCTAssertNil(small.charge(MemoryBudget.answerAllowance, to: budget))
        XCTAssertEqual(budget.clientCount, 0, "an answer within the allowance touched the per-client table")
        XCTAssertEqual(budget.bytes, 64 << 10)

        // Past it, all of a call's bytes are charged to its client, and bound the client's next answers.
        let large = transfer(budget, from: "192.0.2.7")
        XCTAssertNil(large.charge(60 << 10, to: budget))
        XCTAssertNil(large.charge(8 << 10, to: budget))
        XCTAssertEqual(budget.held(by: "192.0.2.7"), 68 << 10)
        XCTAssertEqual(small.charge(1, to: budget), .clientShare, "64 KiB + 1 byte beside 68 KiB passes the 128 KiB share")
        XCTAssertEqual(budget.bytes, 132 << 10, "a refused charge takes nothing")
        XCTAssertNil(transfer(budget, from: "192.0.2.8").charge(100 << 10, to: budget), "another client has its own share")

        // The hold handed on with the body gives back the client's charge when it goes.
        var hold = large.takeHold()
        XCTAssertNotNil(hold)
        hold = nil
        XCTAssertEqual(budget.held(by: "192.0.2.7"), 0)
        XCTAssertEqual(budget.clientCount, 1, "only the other client holds bytes charged to it")
        small.releaseBudget()
        XCTAssertEqual(budget.bytes, 100 << 10)
    }

    func testIPv6Answers_areChargedToTheClients64() {
        let budget = MemoryBudget(limit: 1 << 20, perClient: 128 << 10)
        let a = transfer(budget, from: "2001:db8::1")
        XCTAssertNil(a.charge(100 << 10, to: budget))
        let b = transfer(budget, from: "2001:db8::2")
        XCTAssertEqual(b.charge(100 << 10, to: budget), .clientShare, "one /64 is one client")
        XCTAssertEqual(budget.held(by: "2001:db8::/64"), 100 << 10)
        a.releaseBudget()
        XCTAssertEqual(budget.bytes, 0)
    }
}
