import BLEWire

/// Splits an H4 byte stream (UART, TCP, Unix socket) into whole HCI packets.
/// A table gives, per packet type, the header length and where its length
/// field is; one state machine serves all types (Core Vol 4 Part A 2, Part E 5.4).
public struct H4Framer {
    struct Layout {
        let header: Int        // header bytes after the indicator
        let lengthOffset: Int  // offset of the length field within the header
        let lengthSize: Int    // 1 or 2 bytes
        let lengthMask: UInt16
    }

    static func layout(_ t: UInt8) -> Layout? {
        switch t {
        case 0x01: return Layout(header: 3, lengthOffset: 2, lengthSize: 1, lengthMask: 0xFF)     // command
        case 0x02: return Layout(header: 4, lengthOffset: 2, lengthSize: 2, lengthMask: 0xFFFF)   // ACL
        case 0x03: return Layout(header: 3, lengthOffset: 2, lengthSize: 1, lengthMask: 0xFF)     // SCO
        case 0x04: return Layout(header: 2, lengthOffset: 1, lengthSize: 1, lengthMask: 0xFF)     // event
        case 0x05: return Layout(header: 4, lengthOffset: 2, lengthSize: 2, lengthMask: 0x3FFF)   // ISO
        default: return nil
        }
    }

    private var buffer: [UInt8] = []
    private var start = 0

    /// A framer with nothing buffered.
    public init() {}

    /// Bytes held that do not yet make a whole packet.
    public var pendingByteCount: Int { buffer.count - start }

    /// Appends bytes from the stream.
    public mutating func feed<C: Collection>(_ bytes: C) where C.Element == UInt8 {
        buffer.append(contentsOf: bytes)
    }

    /// The next whole packet, nil if more bytes are needed. Throws on an
    /// unknown packet indicator: an H4 stream cannot be resynchronised after that.
    /// - Throws: `WireError.invalid` when the next byte is not a known packet indicator (1 to 5).
    public mutating func next() throws -> HCIPacket? {
        let avail = buffer.count - start
        guard avail >= 1 else { compact(); return nil }
        let t = buffer[start]
        guard let l = Self.layout(t) else {
            throw WireError.invalid(field: "H4 packet indicator", reason: "0x\(Hex.int(t, width: 2)) is not an HCI packet type; the stream is out of sync")
        }
        guard avail >= 1 + l.header else { return nil }
        let lo = start + 1 + l.lengthOffset
        var len = UInt16(buffer[lo])
        if l.lengthSize == 2 { len |= UInt16(buffer[lo + 1]) << 8 }
        let total = 1 + l.header + Int(len & l.lengthMask)
        guard avail >= total else { return nil }
        let pkt = HCIPacket(HCIPacketType(rawValue: t), Array(buffer[(start + 1)..<(start + total)]))
        start += total
        if start == buffer.count { buffer.removeAll(keepingCapacity: true); start = 0 }
        return pkt
    }

    private mutating func compact() {
        if start > 0 { buffer.removeFirst(start); start = 0 }
    }

    /// Every whole packet currently buffered.
    /// - Throws: `WireError.invalid` on an unknown packet indicator, as `next()`.
    public mutating func drain() throws -> [HCIPacket] {
        var out: [HCIPacket] = []
        while let p = try next() { out.append(p) }
        if start > 4096 { compact() }
        return out
    }
}
