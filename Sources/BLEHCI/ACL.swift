import BLEWire
import BLETransport

/// An HCI ACL data packet (Core Vol 4 Part E 5.4.2).
public struct ACLPacket: Hashable, Sendable {
    /// Packet_Boundary_Flag values.
    public enum Boundary: UInt8, Sendable {
        /// First fragment, non-automatically-flushable (host to controller on LE).
        case firstNonFlushable = 0b00
        /// Continuing fragment.
        case continuing = 0b01
        /// First fragment, automatically flushable (controller to host).
        case firstFlushable = 0b10
        /// A complete automatically-flushable PDU (BR/EDR only; accepted as a start).
        case complete = 0b11
    }

    public var handle: UInt16
    public var boundary: Boundary
    public var broadcast: UInt8
    public var data: [UInt8]

    /// A packet for connection `handle` carrying `data`, with the given boundary
    /// and broadcast flags (only the low 12 bits of `handle` and 2 of `broadcast` are encoded).
    public init(handle: UInt16, boundary: Boundary, broadcast: UInt8 = 0, data: [UInt8]) {
        self.handle = handle; self.boundary = boundary; self.broadcast = broadcast; self.data = data
    }

    public var isStart: Bool { boundary != .continuing }

    public var encoded: [UInt8] {
        var w = ByteWriter(capacity: 4 + data.count)
        w.u16((handle & 0x0FFF) | UInt16(boundary.rawValue) << 12 | UInt16(broadcast & 0x3) << 14)
        w.u16(UInt16(truncatingIfNeeded: data.count))
        w.append(data)
        return w.bytes
    }

    public var packet: HCIPacket { HCIPacket(.acl, encoded) }

    /// Decodes the bytes after the H4 indicator: handle and flags, data total
    /// length, then exactly that many bytes of data.
    /// - Throws: `WireError` if the data is shorter than its length field or followed by extra bytes.
    public static func decode(_ bytes: [UInt8]) throws -> ACLPacket {
        var r = ByteReader(bytes)
        let hf = try r.u16("handle and flags")
        let len = Int(try r.u16("data length"))
        let d = try r.bytes(len, "data")
        try r.expectEnd("ACL packet")
        return ACLPacket(handle: hf & 0x0FFF, boundary: Boundary(rawValue: UInt8((hf >> 12) & 0x3)) ?? .continuing,
                         broadcast: UInt8(hf >> 14), data: d)
    }
}
