/// A Bluetooth device address (BD_ADDR). Stored in wire order (least
/// significant byte first); printed most significant first, as people write it.
public struct BDAddress: Hashable, Sendable, CustomStringConvertible {
    /// Six bytes, little-endian (wire order).
    public let bytes: [UInt8]

    /// An address from wire-order bytes: only the first 6 are used; a shorter input is zero-padded.
    public init(wire: [UInt8]) {
        var b = Array(wire.prefix(6))
        while b.count < 6 { b.append(0) }
        bytes = b
    }

    /// Parses "C0:11:22:33:44:55" (also with '-' separators).
    public init?(_ text: String) {
        let parts = text.split(whereSeparator: { $0 == ":" || $0 == "-" })
        guard parts.count == 6 else { return nil }
        var out: [UInt8] = []
        for p in parts.reversed() {
            guard p.count == 2, let v = UInt8(p, radix: 16) else { return nil }
            out.append(v)
        }
        bytes = out
    }

    public static let zero = BDAddress(wire: [0, 0, 0, 0, 0, 0])
    public var isZero: Bool { bytes.allSatisfy { $0 == 0 } }

    public var description: String {
        bytes.reversed().map { Hex.int($0, width: 2).uppercased() }.joined(separator: ":")
    }

    /// Reads a 6-byte BD_ADDR in wire order.
    /// - Throws: `WireError.truncated` if fewer than 6 bytes are left.
    public static func read(_ r: inout ByteReader, _ field: String = "address") throws -> BDAddress {
        BDAddress(wire: try r.bytes(6, field))
    }

    /// Appends the 6 address bytes in wire order.
    public func write(_ w: inout ByteWriter) { w.append(bytes) }
}

/// Address type as used in LE commands and events (Core Vol 4 Part E 7.7.65).
public struct AddressType: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt8
    /// Any address type byte, including values this file has no name for.
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    public static let `public` = AddressType(rawValue: 0x00)
    public static let random = AddressType(rawValue: 0x01)
    public static let publicIdentity = AddressType(rawValue: 0x02)
    public static let randomIdentity = AddressType(rawValue: 0x03)
    public static let anonymous = AddressType(rawValue: 0xFF)

    public var description: String {
        switch rawValue {
        case 0: return "public"
        case 1: return "random"
        case 2: return "public-id"
        case 3: return "random-id"
        case 0xFF: return "anonymous"
        default: return "type 0x\(Hex.int(rawValue, width: 2))"
        }
    }

    /// Public or random, folding identity types (for Create Connection).
    public var isRandom: Bool { rawValue == 1 || rawValue == 3 }
}

/// An address with its type: how LE identifies a peer.
public struct DeviceAddress: Hashable, Sendable, CustomStringConvertible {
    public var address: BDAddress
    public var type: AddressType
    /// Pairs an address with its type.
    public init(_ address: BDAddress, _ type: AddressType) {
        self.address = address
        self.type = type
    }
    public var description: String { "\(address) (\(type))" }
}
