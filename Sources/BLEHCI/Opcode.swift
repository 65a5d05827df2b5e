import BLEWire

/// An HCI command opcode: OGF (6 bits) and OCF (10 bits) (Core Vol 4 Part E 5.4.1).
/// Open: any opcode parses and prints. Names come from the declarations (`HCI.commands`),
/// and code names an opcode by its declaration: `HCI.Reset.opcode`.
public struct HCIOpcode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt16
    /// Any 16-bit opcode, including undeclared ones.
    public init(rawValue: UInt16) { self.rawValue = rawValue }
    /// Packs an opcode group field (upper 6 bits) and command field (lower 10 bits; extra bits are masked off).
    public init(ogf: UInt16, ocf: UInt16) { rawValue = ogf << 10 | (ocf & 0x3FF) }
    public var ogf: UInt16 { rawValue >> 10 }
    public var ocf: UInt16 { rawValue & 0x3FF }

    public var name: String { HCI.commandTable[rawValue]?.declaration.name ?? (ogf == 0x3F ? "Vendor Command" : "Unknown Command") }
    public var description: String { "\(name) (0x\(Hex.int(rawValue, width: 4)))" }
}
