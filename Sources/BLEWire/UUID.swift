/// A Bluetooth UUID: 16-, 32- or 128-bit. Short forms are aliases into the
/// Bluetooth Base UUID 00000000-0000-1000-8000-00805F9B34FB (Core Vol 3 Part B 2.5.1).
public struct BluetoothUUID: Hashable, Sendable, CustomStringConvertible {
    /// 16 bytes, little-endian (wire order of a 128-bit UUID).
    public let bytes128: [UInt8]
    /// Width the UUID had on the wire or in text: 2, 4 or 16 bytes.
    public let width: Int

    static let base: [UInt8] = [0xFB, 0x34, 0x9B, 0x5F, 0x80, 0x00, 0x00, 0x80,
                                0x00, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00]

    /// A 16-bit UUID: `v` placed into the Bluetooth Base UUID (Core Vol 3 Part B 2.5.1); `width` is 2.
    public init(uint16 v: UInt16) {
        var b = Self.base
        b[12] = UInt8(v & 0xFF); b[13] = UInt8(v >> 8)
        bytes128 = b; width = 2
    }

    /// A 32-bit UUID: `v` placed into the Bluetooth Base UUID (Core Vol 3 Part B 2.5.1); `width` is 4.
    public init(uint32 v: UInt32) {
        var b = Self.base
        for i in 0..<4 { b[12 + i] = UInt8(truncatingIfNeeded: v >> (8 * UInt32(i))) }
        bytes128 = b; width = 4
    }

    /// From wire bytes: 2, 4 or 16 bytes little-endian; nil for other lengths.
    public init?(wire: [UInt8]) {
        switch wire.count {
        case 2: self.init(uint16: UInt16(wire[0]) | UInt16(wire[1]) << 8)
        case 4: self.init(uint32: UInt32(wire[0]) | UInt32(wire[1]) << 8 | UInt32(wire[2]) << 16 | UInt32(wire[3]) << 24)
        case 16: self.init(raw128: wire)
        default: return nil
        }
    }

    private init(raw128: [UInt8]) {
        bytes128 = raw128
        width = 16
    }

    /// Parses "2a00", "0x2A00", "12345678" or the 36-character form.
    public init?(_ text: String) {
        var t = Substring(text)
        if t.hasPrefix("0x") || t.hasPrefix("0X") { t = t.dropFirst(2) }
        let hex = t.filter { $0 != "-" }
        guard hex.allSatisfy({ $0.isHexDigit }) else { return nil }
        switch hex.count {
        case 4:
            guard !t.contains("-"), let v = UInt16(hex, radix: 16) else { return nil }
            self.init(uint16: v)
        case 8:
            guard !t.contains("-"), let v = UInt32(hex, radix: 16) else { return nil }
            self.init(uint32: v)
        case 32:
            if t.contains("-") {
                let groups = t.split(separator: "-", omittingEmptySubsequences: false).map(\.count)
                guard groups == [8, 4, 4, 4, 12] else { return nil }
            }
            guard let be = Hex.parse(String(hex)), be.count == 16 else { return nil }
            self.init(raw128: be.reversed())
        default: return nil
        }
    }

    /// True when the UUID lies in the Bluetooth Base UUID range.
    public var isBased: Bool {
        Array(bytes128[0..<12]) == Array(Self.base[0..<12])
    }

    /// The 16-bit value, when this is a 16-bit alias.
    public var uint16: UInt16? {
        guard isBased, bytes128[14] == 0, bytes128[15] == 0 else { return nil }
        return UInt16(bytes128[12]) | UInt16(bytes128[13]) << 8
    }

    /// Shortest wire form: 2 bytes for 16-bit aliases, else 16 (ATT allows only 2 or 16).
    public var attWire: [UInt8] {
        if let v = uint16 { return [UInt8(v & 0xFF), UInt8(v >> 8)] }
        return bytes128
    }

    /// The wire form at the width it was created with.
    public var wire: [UInt8] {
        switch width {
        case 2: return Array(bytes128[12..<14])
        case 4: return Array(bytes128[12..<16])
        default: return bytes128
        }
    }

    /// The 36-character lower-case form.
    public var long: String {
        let be = Array(bytes128.reversed())
        let h = Hex.string(be, separator: "")
        let c = Array(h)
        return String(c[0..<8]) + "-" + String(c[8..<12]) + "-" + String(c[12..<16]) + "-" + String(c[16..<20]) + "-" + String(c[20..<32])
    }

    /// "2a00" for 16-bit aliases, "0000fe2c" for 32-bit, else the long form.
    public var description: String {
        if isBased {
            if let v = uint16 { return Hex.int(v, width: 4) }
            let v = UInt32(bytes128[12]) | UInt32(bytes128[13]) << 8 | UInt32(bytes128[14]) << 16 | UInt32(bytes128[15]) << 24
            return Hex.int(v, width: 8)
        }
        return long
    }

    /// Equal when the 128-bit forms match, whatever width each was written in (0x180F equals 0000180F-0000-1000-8000-00805F9B34FB).
    public static func == (a: BluetoothUUID, b: BluetoothUUID) -> Bool { a.bytes128 == b.bytes128 }
    /// Hashes the 128-bit form, consistently with `==`.
    public func hash(into h: inout Hasher) { h.combine(bytes128) }
}
