import PeelIO
import XCTest

/// The method token every stage compares instead of the method's String.
final class MethodTokenTests: XCTestCase {
    func testMethodsAreCaseSensitive_andUnknownOnesAreOther() {
        XCTAssertEqual(MethodToken("GET"), .get)
        XCTAssertEqual(MethodToken("get"), .other, "RFC 9110 §9.1: method names are case-sensitive")
        XCTAssertEqual(MethodToken("PURGE"), .other)
        XCTAssertEqual(MethodToken(""), .other)
    }

    func testTheCacheRulesSets() {
        XCTAssertEqual([MethodToken.get, .head, .post, .put, .patch, .delete, .options, .connect, .trace, .other].filter(\.readsResource),
                       [.get, .head])
        XCTAssertEqual([MethodToken.get, .head, .post, .put, .patch, .delete, .options, .connect, .trace, .other].filter(\.isUnsafe),
                       [.post, .put, .patch, .delete])
    }
}
