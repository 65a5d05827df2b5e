import Testing
@testable import BLEWire

/// BLEWire's text search, which stands in for _StringProcessing's (not linked).
@Suite("BLEWire: text search without _StringProcessing")
struct TextSearchTests {
    @Test("includes finds a word anywhere, not a near miss", arguments: [
        ("bond-C0:11.tmp", ".tmp", true), ("[::1]:6053", "]:", true), ("abc", "abc", true),
        ("abc", "abcd", false), ("ab", "", true), ("", "a", false), ("aab", "ab", true),
        ("a.tm", ".tmp", false), ("é.tmp", ".tmp", true),
    ])
    func includes(_ hay: String, _ needle: String, _ expected: Bool) {
        #expect(hay.includes(needle) == expected)
        #expect(hay[...].includes(needle[...]) == expected)
    }

    @Test("the range found is the first, in the text's own indices")
    func firstRange() throws {
        let s = "xéab-ab"
        let r = try #require(s.firstRange(ofText: "ab"))
        #expect(s[r] == "ab")
        #expect(s[..<r.lowerBound] == "xé")
        let sub = s.dropFirst(3)  // "b-ab": the match is the later one
        let r2 = try #require(sub.firstRange(ofText: "ab"))
        #expect(s[r2.lowerBound...] == "ab")
    }
}
