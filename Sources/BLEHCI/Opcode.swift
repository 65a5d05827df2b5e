import BLEWire

/// An HCI command opcode: OGF (6 bits) and OCF (10 bits) (Core Vol 4 Part E 5.4.1).
/// Open: any opcode parses and prints.
public struct HCIOpcode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt16
    /// Any 16-bit opcode, including ones not named below.
    public init(rawValue: UInt16) { self.rawValue = rawValue }
    /// Packs an opcode group field (upper 6 bits) and command field (lower 10 bits; extra bits are masked off).
    public init(ogf: UInt16, ocf: UInt16) { rawValue = ogf << 10 | (ocf & 0x3FF) }
    public var ogf: UInt16 { rawValue >> 10 }
    public var ocf: UInt16 { rawValue & 0x3FF }

    public static let disconnect = HCIOpcode(rawValue: 0x0406)
    public static let setEventMask = HCIOpcode(rawValue: 0x0C01)
    public static let reset = HCIOpcode(rawValue: 0x0C03)
    public static let readLocalVersion = HCIOpcode(rawValue: 0x1001)
    public static let readLocalSupportedCommands = HCIOpcode(rawValue: 0x1002)
    public static let readLocalSupportedFeatures = HCIOpcode(rawValue: 0x1003)
    public static let readBufferSize = HCIOpcode(rawValue: 0x1005)
    public static let readBDADDR = HCIOpcode(rawValue: 0x1009)
    public static let leSetEventMask = HCIOpcode(rawValue: 0x2001)
    public static let leReadBufferSize = HCIOpcode(rawValue: 0x2002)
    public static let leReadLocalSupportedFeatures = HCIOpcode(rawValue: 0x2003)
    public static let leSetRandomAddress = HCIOpcode(rawValue: 0x2005)
    public static let leSetScanParameters = HCIOpcode(rawValue: 0x200B)
    public static let leSetScanEnable = HCIOpcode(rawValue: 0x200C)
    public static let leCreateConnection = HCIOpcode(rawValue: 0x200D)
    public static let leCreateConnectionCancel = HCIOpcode(rawValue: 0x200E)
    public static let leConnectionUpdate = HCIOpcode(rawValue: 0x2013)
    public static let leSetExtendedScanParameters = HCIOpcode(rawValue: 0x2041)
    public static let leSetExtendedScanEnable = HCIOpcode(rawValue: 0x2042)
    public static let leExtendedCreateConnection = HCIOpcode(rawValue: 0x2043)

    static let names: [UInt16: String] = [
        0x0406: "Disconnect", 0x0C01: "Set Event Mask", 0x0C03: "Reset",
        0x1001: "Read Local Version Information", 0x1002: "Read Local Supported Commands",
        0x1003: "Read Local Supported Features", 0x1005: "Read Buffer Size", 0x1009: "Read BD_ADDR",
        0x1405: "Read RSSI",
        0x2001: "LE Set Event Mask", 0x2002: "LE Read Buffer Size", 0x2003: "LE Read Local Supported Features",
        0x2005: "LE Set Random Address", 0x2006: "LE Set Advertising Parameters",
        0x2008: "LE Set Advertising Data", 0x2009: "LE Set Scan Response Data", 0x200A: "LE Set Advertising Enable",
        0x200B: "LE Set Scan Parameters", 0x200C: "LE Set Scan Enable", 0x200D: "LE Create Connection",
        0x200E: "LE Create Connection Cancel", 0x200F: "LE Read Filter Accept List Size",
        0x2010: "LE Clear Filter Accept List", 0x2011: "LE Add Device To Filter Accept List",
        0x2012: "LE Remove Device From Filter Accept List", 0x201C: "LE Read Supported States",
        0x2013: "LE Connection Update", 0x2016: "LE Read Remote Features", 0x2019: "LE Enable Encryption", 0x201A: "LE Long Term Key Request Reply",
        0x201B: "LE Long Term Key Request Negative Reply", 0x2022: "LE Set Data Length",
        0x2032: "LE Set PHY", 0x2041: "LE Set Extended Scan Parameters", 0x2042: "LE Set Extended Scan Enable",
        0x2043: "LE Extended Create Connection",
    ]

    public var name: String { Self.names[rawValue] ?? (ogf == 0x3F ? "Vendor Command" : "Unknown Command") }
    public var description: String { "\(name) (0x\(Hex.int(rawValue, width: 4)))" }
}
