import BLEWire

/// The value of the Service Changed characteristic (0x2A05, Core Vol 3 Part
/// G 7.1): the range of attribute handles affected, its start and end
/// handle, little-endian; a server indicates it to tell a client to
/// discover that range again.
public struct ServiceChangedValue: Equatable, Sendable, CustomStringConvertible {
    /// The handles affected, 0x0001 ... 0xFFFF at most.
    public var range: ClosedRange<UInt16>

    /// A value for the handles of `range`.
    public init(_ range: ClosedRange<UInt16>) { self.range = range }

    /// Every handle (0x0001-0xFFFF): the whole database may have changed.
    public static let wholeDatabase = ServiceChangedValue(0x0001...0xFFFF)

    /// The four octets: Start of Affected Attribute Handle Range, End of it.
    public var bytes: [UInt8] {
        var w = ByteWriter(capacity: 4)
        w.u16(range.lowerBound)
        w.u16(range.upperBound)
        return w.bytes
    }

    /// Reads a value as a client receives it.
    /// - Throws: `WireError.truncated` for fewer than 4 bytes,
    ///   `.trailingBytes` for more, `.invalid` when the start is after the end.
    public init(bytes: [UInt8]) throws {
        var r = ByteReader(bytes)
        let start = try r.u16("Start of Affected Attribute Handle Range")
        let end = try r.u16("End of Affected Attribute Handle Range")
        try r.expectEnd("Service Changed")
        guard start <= end else {
            throw WireError.invalid(field: "Start of Affected Attribute Handle Range", reason: "0x\(Hex.int(start, width: 4)) is after the end 0x\(Hex.int(end, width: 4))")
        }
        range = start...end
    }

    /// "0x0001-0xffff".
    public var description: String { "0x\(Hex.int(range.lowerBound, width: 4))-0x\(Hex.int(range.upperBound, width: 4))" }
}
