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

// MARK: - Data length and PHY (7.8.33, 7.8.49), asked for on connect where supported

extension HCIOpcode {
    public static let leSetDataLength = HCIOpcode(rawValue: 0x2022)
    public static let leSetPHY = HCIOpcode(rawValue: 0x2032)
}

extension HCICommand {
    /// LE Set Data Length (7.8.33): Connection_Handle, TX_Octets, TX_Time.
    /// The default asks for the largest LL payload, 251 octets (2120 µs on the 1M PHY).
    public static func leSetDataLength(handle: UInt16, txOctets: UInt16 = 251, txTime: UInt16 = 2120) -> HCICommand {
        var w = ByteWriter(capacity: 6)
        w.u16(handle); w.u16(txOctets); w.u16(txTime)
        return HCICommand(.leSetDataLength, w.bytes)
    }
    /// LE Set PHY (7.8.49): Connection_Handle, All_PHYs 0 (a preference each way),
    /// TX_PHYs and RX_PHYs (bit 1: LE 2M), PHY_Options 0.
    public static func leSetPHY(handle: UInt16, tx: UInt8 = 0x02, rx: UInt8 = 0x02) -> HCICommand {
        var w = ByteWriter(capacity: 7)
        w.u16(handle); w.u8(0x00); w.u8(tx); w.u8(rx); w.u16(0x0000)
        return HCICommand(.leSetPHY, w.bytes)
    }
}

/// LE PHY Update Complete (7.7.65.12): the PHYs in use on a connection.
public struct LEPHYUpdateComplete: Hashable, Sendable {
    public var status: HCIStatus
    public var handle: UInt16
    public var txPHY: UInt8
    public var rxPHY: UInt8

    /// Decodes the subevent's parameters (after the subevent code).
    /// - Throws: `WireError` when they are not exactly 5 octets.
    public static func decode(_ p: [UInt8]) throws -> LEPHYUpdateComplete {
        var r = ByteReader(p)
        let v = LEPHYUpdateComplete(status: HCIStatus(rawValue: try r.u8("Status")), handle: try r.u16("Connection_Handle") & 0x0FFF,
                                    txPHY: try r.u8("TX_PHY"), rxPHY: try r.u8("RX_PHY"))
        try r.expectEnd("LE PHY Update Complete")
        return v
    }

    /// "1M", "2M", "Coded" or the raw value.
    public static func name(_ phy: UInt8) -> String {
        switch phy { case 1: return "1M"; case 2: return "2M"; case 3: return "Coded"; default: return "PHY 0x\(Hex.int(phy, width: 2))" }
    }
}
