/// The API's encryption key: 32 bytes, written in ESPHome's configuration
/// (`api: encryption: key:`) and in Home Assistant as base64 (44 characters).
public struct NoisePSK: Equatable, Sendable, CustomStringConvertible {
    public let bytes: [UInt8]

    /// Why a key was refused.
    public enum Problem: Error, Equatable, Sendable, CustomStringConvertible {
        /// Not standard base64 (RFC 4648 section 4, with its padding).
        case notBase64
        /// The key decodes, but not to 32 bytes.
        case wrongLength(Int)

        public var description: String {
            switch self {
            case .notBase64: return "the encryption key is not base64"
            case let .wrongLength(n): return "the encryption key is \(n) bytes; it must be 32 (44 base64 characters)"
            }
        }
    }

    /// A key of 32 raw bytes.
    /// - Throws: `Problem.wrongLength` for any other count.
    public init(bytes: [UInt8]) throws(Problem) {
        guard bytes.count == 32 else { throw .wrongLength(bytes.count) }
        self.bytes = bytes
    }

    /// A key from its base64 form; spaces and line ends around it are ignored.
    /// - Throws: `Problem.notBase64` or `Problem.wrongLength`.
    public init(base64 text: String) throws(Problem) {
        guard let decoded = Self.decodeBase64(text) else { throw .notBase64 }
        try self.init(bytes: decoded)
    }

    /// Never the key itself.
    public var description: String { "NoisePSK(32 bytes)" }

    /// Standard base64 with `=` padding, surrounding white space trimmed; nil
    /// for anything else (a character outside the alphabet, a bad length or padding).
    static func decodeBase64(_ text: String) -> [UInt8]? {
        let space: Set<UInt8> = [0x20, 0x09, 0x0A, 0x0D]
        var chars = Array(text.utf8)
        while let last = chars.last, space.contains(last) { chars.removeLast() }
        while let first = chars.first, space.contains(first) { chars.removeFirst() }
        guard chars.count % 4 == 0 else { return nil }
        var padding = 0
        while padding < 2, chars.count > padding, chars[chars.count - 1 - padding] == UInt8(ascii: "=") { padding += 1 }
        var out: [UInt8] = []
        var accumulator: UInt32 = 0, bits = 0
        for c in chars.dropLast(padding) {
            guard let v = sextet(c) else { return nil }
            accumulator = accumulator << 6 | UInt32(v)
            bits += 6
            if bits >= 8 {
                bits -= 8
                out.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
            }
        }
        // The leftover bits of the last group must be zero (canonical encoding).
        guard accumulator & ((1 << UInt32(bits)) - 1) == 0 else { return nil }
        return out
    }

    private static func sextet(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): return c - UInt8(ascii: "A")
        case UInt8(ascii: "a")...UInt8(ascii: "z"): return c - UInt8(ascii: "a") + 26
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0") + 52
        case UInt8(ascii: "+"): return 62
        case UInt8(ascii: "/"): return 63
        default: return nil
        }
    }
}
