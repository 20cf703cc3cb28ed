import PeelEnvelope
import XCTest

/// Accept-Language → Language, following RFC 9110 §12.5.4 weights.
final class LanguageTests: XCTestCase {
    private func assertLanguage(_ header: String?, _ expected: Language, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(
            Language(acceptLanguage: header), expected, "Accept-Language: \(header ?? "<none>")", file: file, line: line)
    }

    func testLanguage_defaultsToEnglishWithoutHeader() {
        assertLanguage(nil, .english)
        assertLanguage("", .english)
        assertLanguage("   ", .english)
        assertLanguage(",,", .english)
    }

    func testLanguage_chineseForZhAndItsSubtags() {
        assertLanguage("zh", .chinese)
        assertLanguage("zh-CN", .chinese)
        assertLanguage("ZH-cn", .chinese)
        assertLanguage("zh-Hant-TW", .chinese)
        assertLanguage("zh-Hans-CN-x-private1", .chinese)
    }

    func testLanguage_acceptsUnderscoreSeparator() {
        assertLanguage("zh_TW", .chinese)
    }

    func testLanguage_englishForOtherLanguages() {
        assertLanguage("en", .english)
        assertLanguage("fr-FR", .english)
        assertLanguage("*", .english)
        assertLanguage("zhx", .english)
        assertLanguage("z", .english)
        assertLanguage("x-zh", .english)
    }

    func testLanguage_highestWeightWins() {
        assertLanguage("en-US,en;q=0.9,zh;q=0.8", .english)
        assertLanguage("zh-CN,zh;q=0.9,en;q=0.8", .chinese)
        assertLanguage("en;q=0.5, zh;q=0.9", .chinese)
        assertLanguage("fr;q=0.9, zh-HK;q=0.95", .chinese)
        assertLanguage("zh;q=0.001, en;q=0.002", .english)
        assertLanguage("en;q=0.4,zh;q=1.000", .chinese)
    }

    func testLanguage_tiesKeepTheFirstListed() {
        assertLanguage("zh;q=0.8, en;q=0.8", .chinese)
        assertLanguage("en;q=0.8, zh;q=0.8", .english)
        assertLanguage("en, zh", .english)
    }

    func testLanguage_weightZeroMeansNotAcceptable() {
        assertLanguage("zh;q=0", .english)
        assertLanguage("zh;q=0.000, en;q=0.1", .english)
        assertLanguage("en;q=0, zh;q=0.1", .chinese)
    }

    func testLanguage_toleratesWhitespaceAndCase() {
        assertLanguage(" zh ; q=0.7 , en;q=0.3 ", .chinese)
        assertLanguage("en;Q=0.1,\tzh;Q=0.2", .chinese)
    }

    func testLanguage_skipsMalformedElements() {
        assertLanguage("zh;q=abc, en;q=0.1", .english)
        assertLanguage("zh;q=1.5, en;q=0.1", .english)
        assertLanguage("zh;q=0.1234, en;q=0.1", .english)
        assertLanguage("zh;q=, en;q=0.1", .english)
        assertLanguage("en;q=2, zh;q=0.5", .chinese)
        assertLanguage("en-toolongsubtag, zh;q=0.5", .chinese)
        assertLanguage("e1, zh;q=0.5", .chinese)
        assertLanguage("en--US, zh;q=0.5", .chinese)
        assertLanguage("中文, zh;q=0.5", .chinese)
    }

    func testLanguage_ignoresUnknownParameters() {
        assertLanguage("zh;foo=bar;q=0.9, en;q=0.5", .chinese)
    }
}
