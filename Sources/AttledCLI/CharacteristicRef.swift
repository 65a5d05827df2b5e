import BLEWire

/// What `--char` names: an attribute handle, a characteristic UUID, or one
/// of an RGB profile's colours.
public enum CharacteristicRef: Equatable, Sendable, CustomStringConvertible {
    /// `0xH` to `0xHHHH`: 0x and one to four hex digits (as gatttool reads them).
    case handle(UInt16)
    /// A 16-bit (2a37) or 128-bit UUID.
    case uuid(BluetoothUUID)
    /// red, green or blue (0, 1, 2) of an RGB LED profile.
    case colour(Int)

    /// Parses a `--char` value.
    /// - Throws: `UsageError` naming the accepted forms.
    public static func parse(_ v: String) throws -> CharacteristicRef {
        if let i = ["red", "green", "blue"].firstIndex(of: v.lowercased()) { return .colour(i) }
        let digits = v.dropFirst(2)
        if v.lowercased().hasPrefix("0x"), (1...4).contains(digits.count), digits.allSatisfy(\.isHexDigit), let h = UInt16(digits, radix: 16) {
            guard h != 0 else { throw UsageError("--char: handle 0x0000 is not a valid attribute handle") }
            return .handle(h)
        }
        if !v.lowercased().hasPrefix("0x"), let u = BluetoothUUID(v) { return .uuid(u) }
        throw UsageError("--char: '\(v)' is not a handle (0x002a), a UUID (2a37, 12345678-1234-1234-1234-123456789abc) or red/green/blue")
    }

    public var description: String {
        switch self {
        case .handle(let h): return "handle 0x\(Hex.int(h, width: 4))"
        case .uuid(let u): return "characteristic \(u)"
        case .colour(let i): return ["red", "green", "blue"][i]
        }
    }

    /// True for a handle or UUID (a general GATT target, no LED profile needed).
    public var isGeneric: Bool { if case .colour = self { return false }; return true }
}
