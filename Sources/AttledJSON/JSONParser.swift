
// MARK: - Parsing

/// Why a JSON text was refused, and the byte offset where that was found.
public struct JSONError: Error, Equatable, Sendable, CustomStringConvertible {
    /// What was wrong at `offset`.
    public enum Reason: Equatable, Sendable {
        /// The input ended where `expected` was still due.
        case unexpectedEnd(expected: String)
        /// A byte that cannot start or continue what `expected` names.
        case unexpectedByte(UInt8, expected: String)
        /// A backslash followed by something other than `"\/bfnrtu`.
        case invalidEscape(UInt8)
        /// `\u` not followed by four hexadecimal digits.
        case invalidUnicodeEscape
        /// A UTF-16 surrogate escape without its partner (`\ud83d` alone, or `\ude00` first).
        case unpairedSurrogate(UInt16)
        /// A raw control character (U+0000 to U+001F) inside a string; RFC 8259 requires it escaped.
        case controlCharacterInString(UInt8)
        /// Bytes that are not well-formed UTF-8 (RFC 3629).
        case invalidUTF8
        /// A number that breaks the grammar of RFC 8259 section 6; the text says how.
        case invalidNumber(String)
        /// A number too large for a Double.
        case numberOutOfRange
        /// Arrays and objects nested deeper than the parser's limit.
        case tooDeep(limit: Int)
        /// An object naming the same member twice (RFC 8259 section 4 leaves the
        /// meaning open, so it is refused rather than guessed).
        case duplicateKey(String)
        /// Something other than whitespace after the value.
        case trailingData
    }

    public let offset: Int
    public let reason: Reason

    /// An error found at byte `offset` of the input.
    public init(offset: Int, reason: Reason) {
        self.offset = offset
        self.reason = reason
    }

    public var description: String {
        let why: String
        switch reason {
        case .unexpectedEnd(let e): why = "input ends where \(e) was expected"
        case .unexpectedByte(let b, let e): why = "unexpected \(JSONError.show(b)), expected \(e)"
        case .invalidEscape(let b): why = "invalid escape \\\(JSONError.show(b, quoted: false))"
        case .invalidUnicodeEscape: why = "\\u must be followed by four hex digits"
        case .unpairedSurrogate(let u):
            let h = String(u, radix: 16)
            why = "unpaired UTF-16 surrogate \\u" + String(repeating: "0", count: max(0, 4 - h.count)) + h
        case .controlCharacterInString(let b): why = "control character 0x\(String(b, radix: 16)) in a string must be escaped"
        case .invalidUTF8: why = "invalid UTF-8"
        case .invalidNumber(let how): why = "invalid number: \(how)"
        case .numberOutOfRange: why = "number out of range"
        case .tooDeep(let limit): why = "nested deeper than \(limit) levels"
        case .duplicateKey(let k): why = "duplicate key \"\(k)\""
        case .trailingData: why = "data after the value"
        }
        return "JSON error at byte \(offset): \(why)"
    }

    private static func show(_ b: UInt8, quoted: Bool = true) -> String {
        if b >= 0x21 && b < 0x7F {
            let c = String(UnicodeScalar(b))
            return quoted ? "'\(c)'" : c
        }
        let h = String(b, radix: 16)
        return "byte 0x" + (h.count < 2 ? "0" : "") + h
    }
}

extension JSONValue {
    /// Nesting limit for arrays and objects unless the caller asks otherwise.
    public static let defaultMaxDepth = 64
    /// The largest nesting limit a caller may ask for: the parser recurses once per level.
    public static let maxDepthCeiling = 512

    /// Parses one JSON text (RFC 8259) from UTF-8 bytes: one value, optionally
    /// surrounded by whitespace. Never traps: every failure is a `JSONError`
    /// with the byte offset. `maxDepth` is clamped to 1...`maxDepthCeiling`.
    /// - Throws: `JSONError` with the byte offset and the reason.
    public static func parse(_ bytes: [UInt8], maxDepth: Int = defaultMaxDepth) throws(JSONError) -> JSONValue {
        var p = JSONParser(bytes: bytes, maxDepth: min(max(maxDepth, 1), maxDepthCeiling))
        p.skipWhitespace()
        let v = try p.value(depth: 0)
        p.skipWhitespace()
        if p.pos < bytes.count { throw JSONError(offset: p.pos, reason: .trailingData) }
        return v
    }

    /// Parses a JSON text held in a String.
    /// - Throws: `JSONError`, offsets counted in the text's UTF-8 bytes.
    public static func parse(_ text: String, maxDepth: Int = defaultMaxDepth) throws(JSONError) -> JSONValue {
        try parse(Array(text.utf8), maxDepth: maxDepth)
    }
}

/// A recursive-descent parser over a byte array with an explicit cursor. Every
/// read goes through `peek()`, which returns nil at the end, so no index can
/// fall outside the input.
private struct JSONParser {
    let bytes: [UInt8]
    let maxDepth: Int
    var pos = 0

    init(bytes: [UInt8], maxDepth: Int) {
        self.bytes = bytes
        self.maxDepth = maxDepth
    }

    func peek() -> UInt8? { pos < bytes.count ? bytes[pos] : nil }

    func peek(at i: Int) -> UInt8? { i >= 0 && i < bytes.count ? bytes[i] : nil }

    mutating func skipWhitespace() {
        while let b = peek(), b == 0x20 || b == 0x09 || b == 0x0A || b == 0x0D { pos += 1 }
    }

    func fail(_ reason: JSONError.Reason, at offset: Int? = nil) -> JSONError {
        JSONError(offset: offset ?? pos, reason: reason)
    }

    mutating func value(depth: Int) throws(JSONError) -> JSONValue {
        guard let b = peek() else { throw fail(.unexpectedEnd(expected: "a value")) }
        switch b {
        case UInt8(ascii: "{"): return try object(depth: depth + 1)
        case UInt8(ascii: "["): return try array(depth: depth + 1)
        case UInt8(ascii: "\""): return .string(try string())
        case UInt8(ascii: "t"): try literal("true"); return .bool(true)
        case UInt8(ascii: "f"): try literal("false"); return .bool(false)
        case UInt8(ascii: "n"): try literal("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try number()
        default: throw fail(.unexpectedByte(b, expected: "a value"))
        }
    }

    mutating func literal(_ word: String) throws(JSONError) {
        let expected = "\"\(word)\""
        for want in word.utf8 {
            guard let b = peek() else { throw fail(.unexpectedEnd(expected: expected)) }
            guard b == want else { throw fail(.unexpectedByte(b, expected: expected)) }
            pos += 1
        }
    }

    mutating func object(depth: Int) throws(JSONError) -> JSONValue {
        if depth > maxDepth { throw fail(.tooDeep(limit: maxDepth)) }
        pos += 1 // {
        var members: [(String, JSONValue)] = []
        skipWhitespace()
        if peek() == UInt8(ascii: "}") { pos += 1; return .object(members) }
        while true {
            skipWhitespace()
            guard let b = peek() else { throw fail(.unexpectedEnd(expected: "a member name")) }
            guard b == UInt8(ascii: "\"") else { throw fail(.unexpectedByte(b, expected: "a member name")) }
            let keyOffset = pos
            let key = try string()
            if members.contains(where: { $0.0 == key }) { throw fail(.duplicateKey(key), at: keyOffset) }
            skipWhitespace()
            guard let colon = peek() else { throw fail(.unexpectedEnd(expected: "':'")) }
            guard colon == UInt8(ascii: ":") else { throw fail(.unexpectedByte(colon, expected: "':'")) }
            pos += 1
            skipWhitespace()
            members.append((key, try value(depth: depth)))
            skipWhitespace()
            guard let sep = peek() else { throw fail(.unexpectedEnd(expected: "',' or '}'")) }
            pos += 1
            if sep == UInt8(ascii: "}") { return .object(members) }
            guard sep == UInt8(ascii: ",") else { throw fail(.unexpectedByte(sep, expected: "',' or '}'"), at: pos - 1) }
        }
    }

    mutating func array(depth: Int) throws(JSONError) -> JSONValue {
        if depth > maxDepth { throw fail(.tooDeep(limit: maxDepth)) }
        pos += 1 // [
        var items: [JSONValue] = []
        skipWhitespace()
        if peek() == UInt8(ascii: "]") { pos += 1; return .array(items) }
        while true {
            skipWhitespace()
            items.append(try value(depth: depth))
            skipWhitespace()
            guard let sep = peek() else { throw fail(.unexpectedEnd(expected: "',' or ']'")) }
            pos += 1
            if sep == UInt8(ascii: "]") { return .array(items) }
            guard sep == UInt8(ascii: ",") else { throw fail(.unexpectedByte(sep, expected: "',' or ']'"), at: pos - 1) }
        }
    }

    /// A string starting at the opening quote (RFC 8259 section 7). Raw bytes
    /// are checked as UTF-8 as they are copied; escapes are decoded to UTF-8.
    mutating func string() throws(JSONError) -> String {
        pos += 1 // "
        var out: [UInt8] = []
        while true {
            guard let b = peek() else { throw fail(.unexpectedEnd(expected: "'\"' closing the string")) }
            switch b {
            case UInt8(ascii: "\""):
                pos += 1
                return String(decoding: out, as: UTF8.self)
            case UInt8(ascii: "\\"):
                try escape(into: &out)
            case 0x00..<0x20:
                throw fail(.controlCharacterInString(b))
            case 0x20..<0x80:
                out.append(b)
                pos += 1
            default:
                let n = try utf8SequenceLength()
                out.append(contentsOf: bytes[pos..<(pos + n)])
                pos += n
            }
        }
    }

    /// Length of the well-formed UTF-8 sequence at `pos` (RFC 3629 section 4),
    /// or `invalidUTF8` at `pos`. Rejects overlong forms, surrogates and values above U+10FFFF.
    func utf8SequenceLength() throws(JSONError) -> Int {
        guard let lead = peek() else { throw fail(.invalidUTF8) }
        let n: Int
        var lo: UInt8 = 0x80, hi: UInt8 = 0xBF // range of the first continuation byte
        switch lead {
        case 0xC2...0xDF: n = 2
        case 0xE0: n = 3; lo = 0xA0
        case 0xE1...0xEC, 0xEE...0xEF: n = 3
        case 0xED: n = 3; hi = 0x9F
        case 0xF0: n = 4; lo = 0x90
        case 0xF1...0xF3: n = 4
        case 0xF4: n = 4; hi = 0x8F
        default: throw fail(.invalidUTF8)
        }
        for i in 1..<n {
            guard let c = peek(at: pos + i) else {
                throw fail(.unexpectedEnd(expected: "the rest of a UTF-8 sequence"), at: pos + i)
            }
            let ok = i == 1 ? (c >= lo && c <= hi) : (c & 0xC0 == 0x80)
            if !ok { throw fail(.invalidUTF8) }
        }
        return n
    }

    mutating func escape(into out: inout [UInt8]) throws(JSONError) {
        let start = pos
        pos += 1 // backslash
        guard let e = peek() else { throw fail(.unexpectedEnd(expected: "an escape character")) }
        pos += 1
        switch e {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(e)
        case UInt8(ascii: "b"): out.append(0x08)
        case UInt8(ascii: "f"): out.append(0x0C)
        case UInt8(ascii: "n"): out.append(0x0A)
        case UInt8(ascii: "r"): out.append(0x0D)
        case UInt8(ascii: "t"): out.append(0x09)
        case UInt8(ascii: "u"):
            let unit = try hex4()
            var scalar = UInt32(unit)
            if unit >= 0xD800 && unit <= 0xDBFF {
                // A high surrogate must be followed at once by \u and a low surrogate;
                // input that stops before saying which is truncated, not unpaired.
                if peek() == nil { throw fail(.unexpectedEnd(expected: "a low surrogate \\u escape")) }
                if peek() == UInt8(ascii: "\\") && peek(at: pos + 1) == nil {
                    throw fail(.unexpectedEnd(expected: "a low surrogate \\u escape"), at: pos + 1)
                }
                guard peek() == UInt8(ascii: "\\"), peek(at: pos + 1) == UInt8(ascii: "u") else {
                    throw fail(.unpairedSurrogate(unit), at: start)
                }
                pos += 2
                let low = try hex4()
                guard low >= 0xDC00 && low <= 0xDFFF else { throw fail(.unpairedSurrogate(unit), at: start) }
                scalar = 0x10000 + ((UInt32(unit) - 0xD800) << 10) + (UInt32(low) - 0xDC00)
            } else if unit >= 0xDC00 && unit <= 0xDFFF {
                throw fail(.unpairedSurrogate(unit), at: start)
            }
            guard let u = Unicode.Scalar(scalar) else { throw fail(.unpairedSurrogate(unit), at: start) }
            out.append(contentsOf: Array(String(Character(u)).utf8))
        default:
            throw fail(.invalidEscape(e), at: start)
        }
    }

    mutating func hex4() throws(JSONError) -> UInt16 {
        var v: UInt16 = 0
        for _ in 0..<4 {
            guard let b = peek() else { throw fail(.unexpectedEnd(expected: "four hex digits")) }
            let d: UInt8
            switch b {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): d = b - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): d = b - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): d = b - UInt8(ascii: "A") + 10
            default: throw fail(.invalidUnicodeEscape)
            }
            v = v << 4 | UInt16(d)
            pos += 1
        }
        return v
    }

    /// RFC 8259 section 6: `-? (0 | [1-9][0-9]*) (.[0-9]+)? ([eE][+-]?[0-9]+)?`.
    mutating func number() throws(JSONError) -> JSONValue {
        let start = pos
        func isDigit(_ b: UInt8?) -> Bool { b.map { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") } ?? false }
        if peek() == UInt8(ascii: "-") { pos += 1 }
        guard isDigit(peek()) else { throw fail(.invalidNumber("a digit must follow '-'")) }
        if peek() == UInt8(ascii: "0") {
            pos += 1
            if isDigit(peek()) { throw fail(.invalidNumber("leading zero")) }
        } else {
            while isDigit(peek()) { pos += 1 }
        }
        var integral = true
        if peek() == UInt8(ascii: ".") {
            integral = false
            pos += 1
            guard isDigit(peek()) else { throw fail(.invalidNumber("a digit must follow '.'")) }
            while isDigit(peek()) { pos += 1 }
        }
        if peek() == UInt8(ascii: "e") || peek() == UInt8(ascii: "E") {
            integral = false
            pos += 1
            if peek() == UInt8(ascii: "+") || peek() == UInt8(ascii: "-") { pos += 1 }
            guard isDigit(peek()) else { throw fail(.invalidNumber("a digit must follow the exponent")) }
            while isDigit(peek()) { pos += 1 }
        }
        let text = String(decoding: bytes[start..<pos], as: UTF8.self)
        if integral, let i = Int64(text) { return .int(i) }
        guard let d = Double(text), d.isFinite else { throw fail(.numberOutOfRange, at: start) }
        return .double(d)
    }
}
