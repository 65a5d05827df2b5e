/// Why a decoder refused its input. Every parser in attled reports one of
/// these instead of trapping, so nothing received from the air can crash the
/// process.
public enum WireError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The input ended `needed` bytes before the field `field` was complete.
    case truncated(field: String, needed: Int, available: Int)
    /// Bytes were left over after a fixed-size structure.
    case trailingBytes(context: String, count: Int)
    /// A field held a value the specification does not allow.
    case invalid(field: String, reason: String)

    public var description: String {
        switch self {
        case let .truncated(field, needed, available):
            return "truncated: \(field) needs \(needed) byte(s), \(available) left"
        case let .trailingBytes(context, count):
            return "\(count) unexpected trailing byte(s) after \(context)"
        case let .invalid(field, reason):
            return "invalid \(field): \(reason)"
        }
    }
}

/// A bounds-checked little-endian cursor over bytes. Every read either returns
/// a value or throws `WireError.truncated`; no read indexes past the end.
public struct ByteReader {
    public let bytes: [UInt8]
    public private(set) var offset: Int
    private let end: Int

    /// A reader positioned at the first of `bytes`.
    public init(_ bytes: [UInt8]) {
        self.bytes = bytes
        self.offset = 0
        self.end = bytes.count
    }

    /// A reader over `bytes[range]` (clamped to the array), sharing the
    /// array's storage: no copy.
    public init(_ bytes: [UInt8], range: Range<Int>) {
        self.bytes = bytes
        self.end = min(max(range.upperBound, 0), bytes.count)
        self.offset = min(max(range.lowerBound, 0), self.end)
    }

    /// A reader over a copy of any byte collection (an `ArraySlice`, `Data`, ...).
    public init<C: Collection>(_ bytes: C) where C.Element == UInt8 {
        self.init(Array(bytes))
    }

    /// Bytes not yet consumed.
    public var remaining: Int { end - offset }
    public var isAtEnd: Bool { offset >= end }

    private func need(_ n: Int, _ field: String) throws {
        if n < 0 || remaining < n {
            throw WireError.truncated(field: field, needed: n, available: remaining)
        }
    }

    /// Reads one byte.
    /// - Parameter field: Name reported in the error if the input is short.
    /// - Throws: `WireError.truncated` if no byte is left.
    public mutating func u8(_ field: String = "u8") throws -> UInt8 {
        try need(1, field)
        defer { offset += 1 }
        return bytes[offset]
    }

    /// Reads one byte as a two's-complement signed value (e.g. an RSSI or TX power).
    /// - Throws: `WireError.truncated` if no byte is left.
    public mutating func i8(_ field: String = "i8") throws -> Int8 {
        Int8(bitPattern: try u8(field))
    }

    /// Reads a little-endian 16-bit value.
    /// - Throws: `WireError.truncated` if fewer than 2 bytes are left.
    public mutating func u16(_ field: String = "u16") throws -> UInt16 {
        try need(2, field)
        defer { offset += 2 }
        return UInt16(bytes[offset]) | UInt16(bytes[offset + 1]) << 8
    }

    /// Reads a little-endian 24-bit value (e.g. a Class of Device) into the low bits of a `UInt32`.
    /// - Throws: `WireError.truncated` if fewer than 3 bytes are left.
    public mutating func u24(_ field: String = "u24") throws -> UInt32 {
        try need(3, field)
        defer { offset += 3 }
        return UInt32(bytes[offset]) | UInt32(bytes[offset + 1]) << 8 | UInt32(bytes[offset + 2]) << 16
    }

    /// Reads a little-endian 32-bit value.
    /// - Throws: `WireError.truncated` if fewer than 4 bytes are left.
    public mutating func u32(_ field: String = "u32") throws -> UInt32 {
        try need(4, field)
        defer { offset += 4 }
        var v: UInt32 = 0
        for i in 0..<4 { v |= UInt32(bytes[offset + i]) << (8 * UInt32(i)) }
        return v
    }

    /// Reads a little-endian 64-bit value.
    /// - Throws: `WireError.truncated` if fewer than 8 bytes are left.
    public mutating func u64(_ field: String = "u64") throws -> UInt64 {
        try need(8, field)
        defer { offset += 8 }
        var v: UInt64 = 0
        for i in 0..<8 { v |= UInt64(bytes[offset + i]) << (8 * UInt64(i)) }
        return v
    }

    /// Big-endian reads, for file formats such as btsnoop.
    /// - Throws: `WireError.truncated` if fewer than 4 bytes are left.
    public mutating func u32be(_ field: String = "u32") throws -> UInt32 {
        try need(4, field)
        defer { offset += 4 }
        var v: UInt32 = 0
        for i in 0..<4 { v = v << 8 | UInt32(bytes[offset + i]) }
        return v
    }

    /// Reads a big-endian 64-bit value (btsnoop timestamps).
    /// - Throws: `WireError.truncated` if fewer than 8 bytes are left.
    public mutating func u64be(_ field: String = "u64") throws -> UInt64 {
        try need(8, field)
        defer { offset += 8 }
        var v: UInt64 = 0
        for i in 0..<8 { v = v << 8 | UInt64(bytes[offset + i]) }
        return v
    }

    /// Reads the next `n` bytes.
    /// - Throws: `WireError.truncated` if `n` is negative or fewer than `n` bytes are left.
    public mutating func bytes(_ n: Int, _ field: String = "bytes") throws -> [UInt8] {
        try need(n, field)
        defer { offset += n }
        return Array(bytes[offset..<offset + n])
    }

    /// Everything not yet consumed.
    /// The next `n` bytes as a reader of their own (no copy), for a
    /// structure inside a structure (a list entry).
    /// - Throws: `WireError.truncated` naming `field` when fewer than `n` remain.
    public mutating func sub(_ n: Int, _ field: String = "bytes") throws -> ByteReader {
        try need(n, field)
        defer { offset += n }
        return ByteReader(bytes, range: offset..<offset + n)
    }

    public mutating func rest() -> [UInt8] {
        defer { offset = end }
        return Array(bytes[offset..<end])
    }

    /// Advances past `n` bytes without returning them (reserved or ignored fields).
    /// - Throws: `WireError.truncated` if `n` is negative or fewer than `n` bytes are left.
    public mutating func skip(_ n: Int, _ field: String = "skip") throws {
        try need(n, field)
        offset += n
    }

    /// Throws if anything is left; for fixed-size structures.
    /// - Throws: `WireError.trailingBytes` naming `context` and the count of unread bytes.
    public func expectEnd(_ context: String) throws {
        if remaining != 0 { throw WireError.trailingBytes(context: context, count: remaining) }
    }
}

/// A little-endian byte builder: the encoding twin of `ByteReader`.
public struct ByteWriter {
    public private(set) var bytes: [UInt8]

    /// An empty writer with room reserved for `capacity` bytes.
    public init(capacity: Int = 32) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    /// Appends one byte.
    public mutating func u8(_ v: UInt8) { bytes.append(v) }
    /// Appends a signed byte in two's complement.
    public mutating func i8(_ v: Int8) { bytes.append(UInt8(bitPattern: v)) }
    /// Appends a 16-bit value, little-endian.
    public mutating func u16(_ v: UInt16) {
        bytes.append(UInt8(truncatingIfNeeded: v))
        bytes.append(UInt8(truncatingIfNeeded: v >> 8))
    }
    /// Appends the low 24 bits of `v`, little-endian.
    public mutating func u24(_ v: UInt32) {
        for i in 0..<3 { bytes.append(UInt8(truncatingIfNeeded: v >> (8 * UInt32(i)))) }
    }
    /// Appends a 32-bit value, little-endian.
    public mutating func u32(_ v: UInt32) {
        for i in 0..<4 { bytes.append(UInt8(truncatingIfNeeded: v >> (8 * UInt32(i)))) }
    }
    /// Appends a 64-bit value, little-endian.
    public mutating func u64(_ v: UInt64) {
        for i in 0..<8 { bytes.append(UInt8(truncatingIfNeeded: v >> (8 * UInt64(i)))) }
    }
    /// Appends a 32-bit value, big-endian (btsnoop headers).
    public mutating func u32be(_ v: UInt32) {
        for i in (0..<4).reversed() { bytes.append(UInt8(truncatingIfNeeded: v >> (8 * UInt32(i)))) }
    }
    /// Appends a 64-bit value, big-endian (btsnoop timestamps).
    public mutating func u64be(_ v: UInt64) {
        for i in (0..<8).reversed() { bytes.append(UInt8(truncatingIfNeeded: v >> (8 * UInt64(i)))) }
    }
    /// Appends raw bytes as they are.
    public mutating func append<S: Sequence>(_ s: S) where S.Element == UInt8 { bytes.append(contentsOf: s) }
}
