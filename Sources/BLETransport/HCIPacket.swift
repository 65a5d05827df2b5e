import BLEWire

/// The H4 packet indicator that precedes every HCI packet on a UART and on
/// the Linux user channel (Core Vol 4 Part A 2). Open: unknown values survive.
public struct HCIPacketType: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt8
    /// Any indicator byte, including values that are not HCI packet types.
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    public static let command = HCIPacketType(rawValue: 0x01)
    public static let acl = HCIPacketType(rawValue: 0x02)
    public static let sco = HCIPacketType(rawValue: 0x03)
    public static let event = HCIPacketType(rawValue: 0x04)
    public static let iso = HCIPacketType(rawValue: 0x05)

    public var description: String {
        switch rawValue {
        case 1: return "HCI Command"
        case 2: return "ACL Data"
        case 3: return "SCO Data"
        case 4: return "HCI Event"
        case 5: return "ISO Data"
        default: return "packet type 0x\(Hex.int(rawValue, width: 2))"
        }
    }
}

/// One whole HCI packet: its type and the bytes after the H4 indicator.
public struct HCIPacket: Hashable, Sendable {
    public var type: HCIPacketType
    public var bytes: [UInt8]
    /// A packet of `type` whose bytes follow the H4 indicator (the indicator itself is not included).
    public init(_ type: HCIPacketType, _ bytes: [UInt8]) {
        self.type = type
        self.bytes = bytes
    }
    /// The H4 form: indicator byte then the packet.
    public var h4: [UInt8] { [type.rawValue] + bytes }
}

/// Which way a packet travels, seen from the host.
public enum Direction: Sendable {
    /// Host to controller (commands, outgoing ACL).
    case sent
    /// Controller to host (events, incoming ACL).
    case received
}
