import BLEWire

/// The Protocol Buffers wire format ("Encoding", protobuf.dev/programming-guides/encoding):
/// the ESPHome native API carries every message as a protobuf (proto3)
/// message. This is our own small reader and writer for it, enough for the
/// messages in `APIMessages`; errors are BLEWire's `WireError`, so nothing a
/// client sends can trap.
public enum ProtoWire {
    /// A varint is at most 10 bytes: 64 bits in 7-bit groups.
    public static let maxVarintBytes = 10
    /// Field numbers are 1 ... 2^29 - 1.
    public static let maxFieldNumber: UInt32 = (1 << 29) - 1

    /// ZigZag (sint32): 0, -1, 1, -2 ... become 0, 1, 2, 3 ..., so small
    /// negative numbers stay short varints.
    public static func zigzag(_ v: Int32) -> UInt32 { UInt32(bitPattern: (v << 1) ^ (v >> 31)) }
    /// ZigZag (sint64).
    public static func zigzag(_ v: Int64) -> UInt64 { UInt64(bitPattern: (v << 1) ^ (v >> 63)) }
    /// The inverse of `zigzag(_: Int32)`.
    public static func unzigzag(_ v: UInt32) -> Int32 { Int32(bitPattern: v >> 1) ^ -Int32(bitPattern: v & 1) }
    /// The inverse of `zigzag(_: Int64)`.
    public static func unzigzag(_ v: UInt64) -> Int64 { Int64(bitPattern: v >> 1) ^ -Int64(bitPattern: v & 1) }

    /// `v` as a varint: 7 bits a byte, least significant group first, the
    /// high bit set on every byte but the last.
    public static func varint(_ v: UInt64) -> [UInt8] {
        var out: [UInt8] = []
        var rest = v
        while rest >= 0x80 { out.append(UInt8(truncatingIfNeeded: rest) | 0x80); rest >>= 7 }
        out.append(UInt8(rest))
        return out
    }
}

/// How a field's value travels: the low three bits of its tag. Open: a wire
/// type the decoder does not know survives into the error that names it.
public struct ProtoWireType: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt8
    /// Any of the eight values three bits hold.
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// int32, int64, uint32, uint64, sint32, sint64, bool, enum.
    public static let varint = ProtoWireType(rawValue: 0)
    /// fixed64, sfixed64, double: 8 bytes, little-endian.
    public static let i64 = ProtoWireType(rawValue: 1)
    /// string, bytes, embedded messages, packed repeated fields: a varint length, then that many bytes.
    public static let len = ProtoWireType(rawValue: 2)
    /// Start and end of a group (proto2's deprecated groups; proto3 has none).
    public static let startGroup = ProtoWireType(rawValue: 3)
    public static let endGroup = ProtoWireType(rawValue: 4)
    /// fixed32, sfixed32, float: 4 bytes, little-endian.
    public static let i32 = ProtoWireType(rawValue: 5)

    public var description: String {
        switch rawValue {
        case 0: return "VARINT"
        case 1: return "I64"
        case 2: return "LEN"
        case 3: return "SGROUP"
        case 4: return "EGROUP"
        case 5: return "I32"
        default: return "wire type \(rawValue)"
        }
    }
}

/// A field's key: its number and wire type (`(number << 3) | wireType`, a varint).
public struct ProtoTag: Hashable, Sendable {
    public let number: UInt32
    public let wireType: ProtoWireType
    /// The tag of field `number` sent as `wireType`.
    public init(_ number: UInt32, _ wireType: ProtoWireType) {
        self.number = number
        self.wireType = wireType
    }
}

/// A bounds-checked cursor over protobuf bytes. Every read returns a value
/// or throws `WireError` (truncated input, an over-long or overflowing
/// varint, a bad tag); nothing indexes past the end.
public struct ProtoReader {
    private var r: ByteReader

    /// A reader over all of `bytes`.
    public init(_ bytes: [UInt8]) { r = ByteReader(bytes) }
    /// A reader over `bytes[range]`, sharing the array's storage.
    public init(_ bytes: [UInt8], range: Range<Int>) { r = ByteReader(bytes, range: range) }

    public var isAtEnd: Bool { r.isAtEnd }
    public var remaining: Int { r.remaining }
    /// The offset of the next byte in the underlying array.
    public var offset: Int { r.offset }
    /// The array the reader walks (for a slice by `lengthDelimited`'s range).
    public var bytes: [UInt8] { r.bytes }

    /// A varint of up to 10 bytes.
    /// - Throws: `WireError.truncated` when the input ends inside it;
    ///   `WireError.invalid` when it runs past 10 bytes or its tenth byte
    ///   carries more than the 64th bit.
    public mutating func varint(_ field: String = "varint") throws -> UInt64 {
        var value: UInt64 = 0
        for i in 0..<ProtoWire.maxVarintBytes {
            let b = try r.u8(field)
            if i == ProtoWire.maxVarintBytes - 1 {
                if b & 0x80 != 0 { throw WireError.invalid(field: field, reason: "varint longer than 10 bytes") }
                if b > 1 { throw WireError.invalid(field: field, reason: "varint overflows 64 bits") }
            }
            value |= UInt64(b & 0x7F) << (7 * UInt64(i))
            if b & 0x80 == 0 { break }
        }
        return value
    }

    /// A field's tag.
    /// - Throws: `WireError` for a truncated or bad varint, field number 0 or
    ///   one above 2^29 - 1.
    public mutating func tag() throws -> ProtoTag {
        let key = try varint("field tag")
        let number = key >> 3
        guard number != 0, number <= UInt64(ProtoWire.maxFieldNumber) else {
            throw WireError.invalid(field: "field tag", reason: "field number \(number) out of range")
        }
        return ProtoTag(UInt32(number), ProtoWireType(rawValue: UInt8(key & 7)))
    }

    /// 4 bytes, little-endian (fixed32, sfixed32, float).
    public mutating func fixed32(_ field: String = "fixed32") throws -> UInt32 { try r.u32(field) }
    /// 8 bytes, little-endian (fixed64, sfixed64, double).
    public mutating func fixed64(_ field: String = "fixed64") throws -> UInt64 { try r.u64(field) }
    /// A float (IEEE 754 single, little-endian).
    public mutating func float(_ field: String = "float") throws -> Float { Float(bitPattern: try r.u32(field)) }

    /// A length-delimited value's bytes, as a range of `bytes` (no copy).
    /// - Throws: `WireError.truncated` when the length says more than is left.
    public mutating func lengthDelimited(_ field: String = "length-delimited") throws -> Range<Int> {
        let length = try varint(field)
        guard length <= UInt64(r.remaining) else {
            throw WireError.truncated(field: field, needed: Int(clamping: length), available: r.remaining)
        }
        let start = r.offset
        try r.skip(Int(length), field)
        return start..<start + Int(length)
    }

    /// Skips a value of `wireType`: how an unknown field is passed over.
    /// - Throws: `WireError.truncated` for a value cut short; `WireError.invalid`
    ///   for a group (proto3 has none) or a wire type 6 or 7.
    public mutating func skip(_ wireType: ProtoWireType, _ field: String = "unknown field") throws {
        switch wireType {
        case .varint: _ = try varint(field)
        case .i64: try r.skip(8, field)
        case .len: _ = try lengthDelimited(field)
        case .i32: try r.skip(4, field)
        default: throw WireError.invalid(field: field, reason: "\(wireType) is not skippable")
        }
    }
}

/// Builds protobuf bytes: the encoding twin of `ProtoReader`.
public struct ProtoWriter {
    public private(set) var bytes: [UInt8] = []

    /// An empty writer.
    public init() {}

    /// Appends a varint.
    public mutating func varint(_ v: UInt64) {
        var rest = v
        while rest >= 0x80 { bytes.append(UInt8(truncatingIfNeeded: rest) | 0x80); rest >>= 7 }
        bytes.append(UInt8(rest))
    }
    /// Appends a tag: `(number << 3) | wireType`.
    public mutating func tag(_ number: UInt32, _ wireType: ProtoWireType) {
        varint(UInt64(number) << 3 | UInt64(wireType.rawValue))
    }
    /// Appends 4 bytes, little-endian.
    public mutating func fixed32(_ v: UInt32) {
        for i in 0..<4 { bytes.append(UInt8(truncatingIfNeeded: v >> (8 * UInt32(i)))) }
    }
    /// Appends 8 bytes, little-endian.
    public mutating func fixed64(_ v: UInt64) {
        for i in 0..<8 { bytes.append(UInt8(truncatingIfNeeded: v >> (8 * UInt64(i)))) }
    }
    /// Appends a float's 4 bytes.
    public mutating func float(_ v: Float) { fixed32(v.bitPattern) }
    /// Appends a length-delimited value: its length as a varint, then the bytes.
    public mutating func lengthDelimited<C: Collection>(_ value: C) where C.Element == UInt8 {
        varint(UInt64(value.count))
        bytes.append(contentsOf: value)
    }
    /// Appends bytes as they are.
    public mutating func append<C: Collection>(_ raw: C) where C.Element == UInt8 { bytes.append(contentsOf: raw) }
}
