import Testing
@testable import BLEWire
import AttledJSON

/// Parses `text`, recording an issue (and returning .null) if it is refused.
private func parsed(_ text: String, sourceLocation: SourceLocation = #_sourceLocation) -> JSONValue {
    do { return try JSONValue.parse(text) } catch {
        Issue.record("\(text) refused: \(error)", sourceLocation: sourceLocation)
        return .null
    }
}

/// The JSONError `bytes` are refused with; records an issue if they parse.
private func refusal(_ bytes: [UInt8], maxDepth: Int = JSONValue.defaultMaxDepth,
                     sourceLocation: SourceLocation = #_sourceLocation) -> JSONError? {
    do {
        let v = try JSONValue.parse(bytes, maxDepth: maxDepth)
        Issue.record("expected a refusal, parsed \(v)", sourceLocation: sourceLocation)
        return nil
    } catch {
        return error
    }
}

private func refusal(_ text: String, sourceLocation: SourceLocation = #_sourceLocation) -> JSONError? {
    refusal(Array(text.utf8), sourceLocation: sourceLocation)
}

/// A small deterministic generator (SplitMix64) so hostile-input runs are repeatable.
private struct SplitMix: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// Valid documents the hostile-input tests start from.
private let corpus: [String] = [
    #"{"state":"ON","brightness":128,"color":{"r":200,"g":100,"b":50}}"#,
    #"{"a":[1,-2.5e3,0.25,true,false,null,"x\"y\\z\/\b\f\n\r\t"],"é":"\u00e9\ud83d\ude00","":{}}"#,
    #"[[],[[]],{"k":[{"k":[]}]}, "raw é😀", -0, 0.0, 1E+2, 9223372036854775807]"#,
    #"  { "name" : null , "availability" : [ { "topic" : "attled/c0ffee/availability" } ] }  "#,
]

@Suite("JSON: valid documents (RFC 8259)")
struct JSONValidTests {
    @Test("scalars: literals, strings and numbers parse to the right case")
    func scalars() {
        #expect(parsed("null") == .null)
        #expect(parsed("true") == .bool(true))
        #expect(parsed(" false\n") == .bool(false))
        #expect(parsed(#""hi""#) == .string("hi"))
        #expect(parsed("0") == .int(0))
        #expect(parsed("-0") == .int(0))
        #expect(parsed("128") == .int(128))
        #expect(parsed("-12") == .int(-12))
        #expect(parsed("9223372036854775807") == .int(Int64.max))
        #expect(parsed("-9223372036854775808") == .int(Int64.min))
        #expect(parsed("9223372036854775808") == .double(9223372036854775808.0), "too big for Int64: a Double")
        #expect(parsed("1.5") == .double(1.5))
        #expect(parsed("1e3") == .double(1000))
        #expect(parsed("1E-2") == .double(0.01))
        #expect(parsed("-2.5e+3") == .double(-2500))
        #expect(parsed("128.0").integerValue == 128, "an integral double reads as an integer")
        #expect(parsed("128.5").integerValue == nil)
    }

    @Test("escapes: the two-character forms, \\u, and surrogate pairs decode to the right scalars")
    func escapes() {
        #expect(parsed(#""\"\\\/\b\f\n\r\t""#) == .string("\"\\/\u{08}\u{0C}\n\r\t"))
        #expect(parsed(#""\u0041\u00e9\u20AC""#) == .string("Aé€"))
        #expect(parsed(#""\u0000""#) == .string("\u{0}"))
        #expect(parsed(#""\ud83d\ude00""#) == .string("😀"))
        #expect(parsed(#""\uDBFF\uDFFF""#) == .string("\u{10FFFF}"))
        #expect(parsed("\"raw é€😀\"") == .string("raw é€😀"), "raw UTF-8 passes through")
    }

    @Test("containers: members keep their order; lookups by key and index")
    func containers() {
        let v = parsed(#"{"z":1,"a":[true,{"b":null}],"m":"x"}"#)
        #expect(v.objectValue?.map(\.0) == ["z", "a", "m"])
        #expect(v["z"] == .int(1))
        #expect(v["a"]?[0] == .bool(true))
        #expect(v["a"]?[1]?["b"]?.isNull == true)
        #expect(v["a"]?[2] == nil)
        #expect(v["missing"] == nil)
        #expect(v[0] == nil, "indexing an object is nil, not a trap")
        #expect(parsed("[]") == .array([]))
        #expect(parsed("{}") == .object([]))
        #expect(parsed(" [ 1 , [ ] , { } ] ") == [1, [], [:]])
    }

    @Test("nesting up to the limit parses; one more level is refused")
    func depthLimit() {
        let ok = String(repeating: "[", count: 64) + String(repeating: "]", count: 64)
        #expect((try? JSONValue.parse(ok)) != nil)
        let deep = String(repeating: "[", count: 65) + String(repeating: "]", count: 65)
        #expect(refusal(deep) == JSONError(offset: 64, reason: .tooDeep(limit: 64)))
        #expect(refusal(Array(#"{"a":{"b":1}}"#.utf8), maxDepth: 1) == JSONError(offset: 5, reason: .tooDeep(limit: 1)))
    }
}

@Suite("JSON: serialiser")
struct JSONSerialiserTests {
    @Test("compact output in insertion order, exactly")
    func compact() {
        let v: JSONValue = ["state": "ON", "brightness": 128, "color": ["r": 200, "g": 100, "b": 50], "x": [true, nil, 1.5]]
        #expect(v.serialized == #"{"state":"ON","brightness":128,"color":{"r":200,"g":100,"b":50},"x":[true,null,1.5]}"#)
    }

    @Test("strings escape quote, backslash and control characters; other text is UTF-8")
    func stringEscapes() {
        let v: JSONValue = .string("a\"b\\c\n\r\t\u{08}\u{0C}\u{01}\u{1F}/é😀")
        #expect(v.serialized == #""a\"b\\c\n\r\t\b\f\u0001\u001f/é😀""#)
    }

    @Test("non-finite doubles, which JSON cannot say, are written as null")
    func nonFinite() {
        #expect(JSONValue.array([.double(.infinity), .double(-.infinity), .double(.nan)]).serialized == "[null,null,null]")
    }

    @Test("every corpus document survives parse → serialise → parse unchanged, and serialising is stable",
          arguments: corpus)
    func roundTrip(text: String) throws {
        let v = try JSONValue.parse(text)
        let again = try JSONValue.parse(v.serialized)
        #expect(again == v)
        #expect(again.serialized == v.serialized)
    }
}

@Suite("JSON: refusals say where and why")
struct JSONErrorTests {
    @Test("each malformed input is refused at the right byte with the right reason", arguments: [
        ("", JSONError(offset: 0, reason: .unexpectedEnd(expected: "a value"))),
        ("   ", JSONError(offset: 3, reason: .unexpectedEnd(expected: "a value"))),
        ("x", JSONError(offset: 0, reason: .unexpectedByte(UInt8(ascii: "x"), expected: "a value"))),
        (#"{"a":1,}"#, JSONError(offset: 7, reason: .unexpectedByte(UInt8(ascii: "}"), expected: "a member name"))),
        (#"{"a" 1}"#, JSONError(offset: 5, reason: .unexpectedByte(UInt8(ascii: "1"), expected: "':'"))),
        (#"{a:1}"#, JSONError(offset: 1, reason: .unexpectedByte(UInt8(ascii: "a"), expected: "a member name"))),
        ("[1 2]", JSONError(offset: 3, reason: .unexpectedByte(UInt8(ascii: "2"), expected: "',' or ']'"))),
        ("[1,]", JSONError(offset: 3, reason: .unexpectedByte(UInt8(ascii: "]"), expected: "a value"))),
        ("01", JSONError(offset: 1, reason: .invalidNumber("leading zero"))),
        ("-", JSONError(offset: 1, reason: .invalidNumber("a digit must follow '-'"))),
        ("+1", JSONError(offset: 0, reason: .unexpectedByte(UInt8(ascii: "+"), expected: "a value"))),
        ("1.", JSONError(offset: 2, reason: .invalidNumber("a digit must follow '.'"))),
        (".5", JSONError(offset: 0, reason: .unexpectedByte(UInt8(ascii: "."), expected: "a value"))),
        ("1e", JSONError(offset: 2, reason: .invalidNumber("a digit must follow the exponent"))),
        ("1e400", JSONError(offset: 0, reason: .numberOutOfRange)),
        ("NaN", JSONError(offset: 0, reason: .unexpectedByte(UInt8(ascii: "N"), expected: "a value"))),
        ("tru", JSONError(offset: 3, reason: .unexpectedEnd(expected: "\"true\""))),
        ("nul!", JSONError(offset: 3, reason: .unexpectedByte(UInt8(ascii: "!"), expected: "\"null\""))),
        (#""abc"#, JSONError(offset: 4, reason: .unexpectedEnd(expected: "'\"' closing the string"))),
        (#""\x""#, JSONError(offset: 1, reason: .invalidEscape(UInt8(ascii: "x")))),
        (#""\u12G4""#, JSONError(offset: 5, reason: .invalidUnicodeEscape)),
        (#""\ud83d""#, JSONError(offset: 1, reason: .unpairedSurrogate(0xD83D))),
        (#""\ud83dx""#, JSONError(offset: 1, reason: .unpairedSurrogate(0xD83D))),
        (#""\ud83d\u0041""#, JSONError(offset: 1, reason: .unpairedSurrogate(0xD83D))),
        (#""\ude00""#, JSONError(offset: 1, reason: .unpairedSurrogate(0xDE00))),
        ("\"a\nb\"", JSONError(offset: 2, reason: .controlCharacterInString(0x0A))),
        ("\"\t\"", JSONError(offset: 1, reason: .controlCharacterInString(0x09))),
        (#"{"a":1,"a":2}"#, JSONError(offset: 7, reason: .duplicateKey("a"))),
        ("1 2", JSONError(offset: 2, reason: .trailingData)),
        ("{} x", JSONError(offset: 3, reason: .trailingData)),
    ])
    func malformed(text: String, expected: JSONError) {
        #expect(refusal(text) == expected, "input: \(text)")
    }

    @Test("ill-formed UTF-8 inside a string is refused at the bad byte (RFC 3629)", arguments: [
        ([0x22, 0xC3, 0x28, 0x22], 1),             // lead byte, then no continuation
        ([0x22, 0xC0, 0xAF, 0x22], 1),             // overlong '/'
        ([0x22, 0xE0, 0x80, 0xAF, 0x22], 1),       // overlong three-byte
        ([0x22, 0xED, 0xA0, 0x80, 0x22], 1),       // a UTF-16 surrogate encoded in UTF-8
        ([0x22, 0xF4, 0x90, 0x80, 0x80, 0x22], 1), // above U+10FFFF
        ([0x22, 0xFF, 0x22], 1),
        ([0x22, 0x80, 0x22], 1),                   // a lone continuation byte
        ([0x22, 0x61, 0xE2, 0x82, 0x41, 0x22], 2), // third byte is not a continuation
    ] as [([UInt8], Int)])
    func invalidUTF8(bytes: [UInt8], offset: Int) {
        #expect(refusal(bytes) == JSONError(offset: offset, reason: .invalidUTF8))
    }

    @Test("errors read as 'JSON error at byte N: why'")
    func messages() {
        #expect(refusal(#"{"a":1,}"#)?.description == "JSON error at byte 7: unexpected '}', expected a member name")
        #expect(refusal(#""\ud83d""#)?.description == "JSON error at byte 1: unpaired UTF-16 surrogate \\ud83d")
        #expect(refusal([0x22, 0xFF])?.description == "JSON error at byte 1: invalid UTF-8")
        #expect(refusal("\"\u{01}\"")?.description == "JSON error at byte 1: control character 0x1 in a string must be escaped")
        #expect(refusal([0x0B])?.description == "JSON error at byte 0: unexpected byte 0x0b, expected a value")
    }
}

@Suite("JSON: hostile input never traps")
struct JSONHostileTests {
    @Test("every proper prefix of a valid document is refused as truncated at its end", arguments: corpus)
    func everyPrefix(text: String) {
        let bytes = Array(text.utf8)
        // Trailing whitespace is insignificant: prefixes reaching the closing bracket parse.
        let end = bytes.lastIndex { $0 != 0x20 }.map { $0 + 1 } ?? bytes.count
        for n in 0..<end {
            let prefix = Array(bytes[0..<n])
            guard let e = refusal(prefix) else { continue }
            #expect(e.offset == n, "prefix of \(n) bytes: \(e)")
            switch e.reason {
            case .unexpectedEnd, .invalidNumber: break
            default: Issue.record("prefix of \(n) bytes refused for \(e), not as truncated")
            }
        }
    }

    @Test("100 000 opening brackets are refused at the depth limit, without deep recursion")
    func deepNesting() {
        for open in ["[", "{\"a\":"] {
            let text = Array(String(repeating: open, count: 100_000).utf8)
            let e = refusal(text)
            #expect(e?.reason == .tooDeep(limit: 64))
            // A caller asking for more than the ceiling gets the ceiling.
            let e2 = refusal(text, maxDepth: 1_000_000)
            #expect(e2?.reason == .tooDeep(limit: JSONValue.maxDepthCeiling))
        }
    }

    @Test("random mutations of valid documents either parse or fail with an offset inside the input")
    func mutations() {
        var rng = SplitMix(state: 0xA77_1ED)
        let interesting: [UInt8] = Array(#"{}[]",:\u0123456789-+.eE tfn"#.utf8) + [0x00, 0x0A, 0x7F, 0x80, 0xBF, 0xC0, 0xED, 0xF4, 0xFF]
        var parsedCount = 0, refusedCount = 0
        for doc in corpus {
            let base = Array(doc.utf8)
            for _ in 0..<1500 {
                var b = base
                for _ in 0...Int.random(in: 0..<4, using: &rng) {
                    let i = Int.random(in: 0..<b.count, using: &rng)
                    switch Int.random(in: 0..<3, using: &rng) {
                    case 0: b[i] = interesting[Int.random(in: 0..<interesting.count, using: &rng)]
                    case 1: b.remove(at: i); if b.isEmpty { b = [0x20] }
                    default: b.insert(interesting[Int.random(in: 0..<interesting.count, using: &rng)], at: i)
                    }
                }
                do {
                    let v = try JSONValue.parse(b)
                    parsedCount += 1
                    // Whatever parsed must serialise to something that parses back the same.
                    #expect((try? JSONValue.parse(v.serialized)) == v)
                } catch {
                    refusedCount += 1
                    #expect(error.offset >= 0 && error.offset <= b.count, "offset \(error.offset) outside \(b.count) bytes")
                }
            }
        }
        #expect(refusedCount > 0 && parsedCount + refusedCount == corpus.count * 1500)
    }

    @Test("random bytes never trap")
    func randomBytes() {
        var rng = SplitMix(state: 42)
        for _ in 0..<5000 {
            let n = Int.random(in: 0..<40, using: &rng)
            let b = (0..<n).map { _ in UInt8.random(in: 0...255, using: &rng) }
            do { _ = try JSONValue.parse(b) } catch { #expect(error.offset <= b.count) }
        }
    }
}
