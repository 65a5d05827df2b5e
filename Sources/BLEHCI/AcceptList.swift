import BLEWire

// The Filter Accept List and the LE states (Core Vol 4 Part E 7.8.14-7.8.17,
// 7.8.27): what a central needs to leave one connect pending for several
// devices, connected by the controller on the first advertisement it hears.

extension HCIOpcode {
    public static let leReadFilterAcceptListSize = HCIOpcode(rawValue: 0x200F)
    public static let leClearFilterAcceptList = HCIOpcode(rawValue: 0x2010)
    public static let leAddDeviceToFilterAcceptList = HCIOpcode(rawValue: 0x2011)
    public static let leRemoveDeviceFromFilterAcceptList = HCIOpcode(rawValue: 0x2012)
    public static let leReadSupportedStates = HCIOpcode(rawValue: 0x201C)
}

extension HCICommand {
    /// LE Read Filter Accept List Size (7.8.14): returns Status, Filter_Accept_List_Size.
    public static var leReadFilterAcceptListSize: HCICommand { HCICommand(.leReadFilterAcceptListSize) }
    /// LE Clear Filter Accept List (7.8.15).
    public static var leClearFilterAcceptList: HCICommand { HCICommand(.leClearFilterAcceptList) }
    /// LE Add Device To Filter Accept List (7.8.16): Address_Type (0 public, 1 random), Address.
    public static func leAddDeviceToFilterAcceptList(_ d: DeviceAddress) -> HCICommand {
        var w = ByteWriter(capacity: 7)
        w.u8(d.type.isRandom ? 0x01 : 0x00); d.address.write(&w)
        return HCICommand(.leAddDeviceToFilterAcceptList, w.bytes)
    }
    /// LE Remove Device From Filter Accept List (7.8.17).
    public static func leRemoveDeviceFromFilterAcceptList(_ d: DeviceAddress) -> HCICommand {
        var w = ByteWriter(capacity: 7)
        w.u8(d.type.isRandom ? 0x01 : 0x00); d.address.write(&w)
        return HCICommand(.leRemoveDeviceFromFilterAcceptList, w.bytes)
    }
    /// LE Read Supported States (7.8.27): returns Status, LE_States (8 octets).
    public static var leReadSupportedStates: HCICommand { HCICommand(.leReadSupportedStates) }
}

/// LE_States of LE Read Supported States (7.8.27): which states and
/// combinations the link layer supports, one bit each.
public struct LEStates: Hashable, Sendable {
    public var rawValue: UInt64
    public init(rawValue: UInt64) { self.rawValue = rawValue }

    /// Bit 22: Passive Scanning State and Initiating State combination.
    public var passiveScanWhileInitiating: Bool { rawValue & (1 << 22) != 0 }
    /// Bit 23: Active Scanning State and Initiating State combination.
    public var activeScanWhileInitiating: Bool { rawValue & (1 << 23) != 0 }

    /// Decodes the return parameters after the status octet.
    /// - Throws: `WireError` when fewer than 8 octets are given.
    public static func decode(_ p: [UInt8]) throws -> LEStates {
        var r = ByteReader(p)
        return LEStates(rawValue: try r.u64("LE_States"))
    }
}
