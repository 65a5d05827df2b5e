/// Hex formatting and parsing shared by the tracer, the CLI and the tests.
public enum Hex {
    private static let digits: [UInt8] = Array("0123456789abcdef".utf8)

    /// "0a 1b 2c" (separator configurable).
    public static func string<C: Collection>(_ bytes: C, separator: String = " ") -> String where C.Element == UInt8 {
        var out = ""
        out.reserveCapacity(bytes.count * (2 + separator.utf8.count))
        var first = true
        for b in bytes {
            if !first { out += separator }
            first = false
            out.unicodeScalars.append(Unicode.Scalar(digits[Int(b >> 4)]))
            out.unicodeScalars.append(Unicode.Scalar(digits[Int(b & 0xF)]))
        }
        return out
    }

    /// Bytes as hex lines of 16, as the tracer prints data it does not decode.
    public static func lines(_ bytes: [UInt8]) -> [String] {
        stride(from: 0, to: bytes.count, by: 16).map { string(bytes[$0..<min($0 + 16, bytes.count)]) }
    }

    /// Fixed-width hex of an integer: `Hex.int(0x0c03, width: 4)` is "0c03".
    public static func int<T: BinaryInteger>(_ v: T, width: Int) -> String {
        var s = String(v, radix: 16)
        if s.count < width { s = String(repeating: "0", count: width - s.count) + s }
        return s
    }

    /// Parses "0a1b2c", "0a 1b 2c", "0a:1b" or "0x0a1b"; nil on odd length or a non-hex digit.
    public static func parse(_ text: String) -> [UInt8]? {
        var s = Substring(text)
        if s.hasPrefix("0x") || s.hasPrefix("0X") { s = s.dropFirst(2) }
        var out: [UInt8] = []
        var high: UInt8? = nil
        for ch in s.utf8 {
            if ch == 0x20 || ch == 0x3A || ch == 0x2D || ch == 0x5F { continue } // space : - _
            guard let n = nibble(ch) else { return nil }
            if let h = high { out.append(h << 4 | n); high = nil } else { high = n }
        }
        return high == nil ? out : nil
    }

    static func nibble(_ c: UInt8) -> UInt8? {
        switch c {
        case 0x30...0x39: return c - 0x30
        case 0x61...0x66: return c - 0x61 + 10
        case 0x41...0x46: return c - 0x41 + 10
        default: return nil
        }
    }
}
