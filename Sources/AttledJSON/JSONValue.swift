/// A JSON value (RFC 8259) as parsed from, or written to, an MQTT payload.
///
/// Objects keep their members in the order they were parsed or inserted, so a
/// value serialises the same way every time (Home Assistant discovery configs
/// are retained: a byte-stable payload avoids needless republishing churn).
/// Numbers without a fraction or exponent that fit in 64 bits are `.int`;
/// every other number is `.double`.
///
/// Equality is structural: `.int(1)` and `.double(1)` differ, and two objects
/// are equal only with the same members in the same order.
public enum JSONValue: Sendable, Equatable {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object([(String, JSONValue)])

    /// Structural equality: same case and equal contents; `.int(1)` differs from
    /// `.double(1)`, and object members are compared pairwise, in order.
    public static func == (a: JSONValue, b: JSONValue) -> Bool {
        switch (a, b) {
        case (.null, .null): return true
        case let (.bool(x), .bool(y)): return x == y
        case let (.int(x), .int(y)): return x == y
        case let (.double(x), .double(y)): return x == y
        case let (.string(x), .string(y)): return x == y
        case let (.array(x), .array(y)): return x == y
        case let (.object(x), .object(y)):
            guard x.count == y.count else { return false }
            for (l, r) in zip(x, y) where l.0 != r.0 || l.1 != r.1 { return false }
            return true
        default: return false
        }
    }

    // MARK: Reading

    /// The first member named `key` of an object; nil for a missing key or a non-object.
    public subscript(key: String) -> JSONValue? {
        guard case .object(let members) = self else { return nil }
        return members.first { $0.0 == key }?.1
    }

    /// The element at `index` of an array; nil when out of range or not an array.
    public subscript(index: Int) -> JSONValue? {
        guard case .array(let items) = self, items.indices.contains(index) else { return nil }
        return items[index]
    }

    public var stringValue: String? { if case .string(let s) = self { return s }; return nil }
    public var boolValue: Bool? { if case .bool(let b) = self { return b }; return nil }
    public var arrayValue: [JSONValue]? { if case .array(let a) = self { return a }; return nil }
    public var objectValue: [(String, JSONValue)]? { if case .object(let o) = self { return o }; return nil }
    public var isNull: Bool { if case .null = self { return true }; return false }

    /// An integer: `.int`, or a `.double` with no fractional part that fits in Int64 (`128.0`).
    public var integerValue: Int64? {
        switch self {
        case .int(let i): return i
        case .double(let d):
            guard d.isFinite, d.rounded(.towardZero) == d,
                  d >= -9_223_372_036_854_775_808.0, d < 9_223_372_036_854_775_808.0 else { return nil }
            return Int64(d)
        default: return nil
        }
    }

    /// Any number as a Double.
    public var doubleValue: Double? {
        switch self {
        case .int(let i): return Double(i)
        case .double(let d): return d
        default: return nil
        }
    }

    /// What kind of value this is, for error messages ("expected a number, got a string").
    public var kindName: String {
        switch self {
        case .null: return "null"
        case .bool: return "a boolean"
        case .int, .double: return "a number"
        case .string: return "a string"
        case .array: return "an array"
        case .object: return "an object"
        }
    }

    // MARK: Writing

    /// Compact JSON text (no insignificant whitespace), members in their stored order.
    /// Non-finite doubles, which JSON cannot express, are written as `null`.
    public var serialized: String {
        var out = ""
        write(to: &out)
        return out
    }

    /// The UTF-8 bytes of `serialized`, ready to publish.
    public var serializedBytes: [UInt8] { Array(serialized.utf8) }

    private func write(to out: inout String) {
        switch self {
        case .null: out += "null"
        case .bool(let b): out += b ? "true" : "false"
        case .int(let i): out += String(i)
        case .double(let d): out += d.isFinite ? String(d) : "null"
        case .string(let s): JSONValue.writeString(s, to: &out)
        case .array(let items):
            out += "["
            for (i, v) in items.enumerated() {
                if i > 0 { out += "," }
                v.write(to: &out)
            }
            out += "]"
        case .object(let members):
            out += "{"
            for (i, (k, v)) in members.enumerated() {
                if i > 0 { out += "," }
                JSONValue.writeString(k, to: &out)
                out += ":"
                v.write(to: &out)
            }
            out += "}"
        }
    }

    /// RFC 8259 section 7: quotation mark, reverse solidus and the control
    /// characters U+0000 to U+001F must be escaped; everything else is written as UTF-8.
    private static func writeString(_ s: String, to out: inout String) {
        out += "\""
        for u in s.unicodeScalars {
            switch u {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case "\u{08}": out += "\\b"
            case "\u{0C}": out += "\\f"
            default:
                if u.value < 0x20 {
                    let h = String(u.value, radix: 16)
                    out += "\\u" + String(repeating: "0", count: 4 - h.count) + h
                } else {
                    out.unicodeScalars.append(u)
                }
            }
        }
        out += "\""
    }
}

// MARK: - Literals, for building payloads in code

extension JSONValue: ExpressibleByNilLiteral, ExpressibleByBooleanLiteral, ExpressibleByIntegerLiteral,
    ExpressibleByFloatLiteral, ExpressibleByStringLiteral, ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral {
    /// `nil` builds `.null`.
    public init(nilLiteral: ()) { self = .null }
    /// `true` / `false` build `.bool`.
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    /// An integer literal builds `.int`.
    public init(integerLiteral value: Int64) { self = .int(value) }
    /// A floating-point literal builds `.double`.
    public init(floatLiteral value: Double) { self = .double(value) }
    /// A string literal builds `.string`.
    public init(stringLiteral value: String) { self = .string(value) }
    /// An array literal builds `.array`, elements in order.
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    /// Members keep the order they are written in.
    public init(dictionaryLiteral elements: (String, JSONValue)...) { self = .object(elements) }
}
