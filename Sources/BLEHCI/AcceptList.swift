import BLEWire

// The Filter Accept List and the LE states (Core Vol 4 Part E 7.8.14-7.8.17,
// 7.8.27): what a central needs to leave one connect pending for several
// devices, connected by the controller on the first advertisement it hears.

extension HCI {
    /// LE Read Filter Accept List Size (7.8.14): returns Status, Filter_Accept_List_Size.
    public struct LEReadFilterAcceptListSize: HCIDeclaredCommand {
        public static let declaration = HCICommandDeclaration(0x200F, "LE Read Filter Accept List Size")
        public init() {}
        public mutating func fields(_ f: inout some HCIFieldWalker) throws {}
    }

    /// LE Clear Filter Accept List (7.8.15).
    public struct LEClearFilterAcceptList: HCIDeclaredCommand {
        public static let declaration = HCICommandDeclaration(0x2010, "LE Clear Filter Accept List")
        public init() {}
        public mutating func fields(_ f: inout some HCIFieldWalker) throws {}
    }

    /// LE Add Device To Filter Accept List (7.8.16): Address_Type (0 public, 1 random, 0xFF anonymous), Address.
    public struct LEAddDeviceToFilterAcceptList: HCIDeclaredCommand {
        public static let declaration = HCICommandDeclaration(0x2011, "LE Add Device To Filter Accept List")
        public var device: DeviceAddress
        /// The list holds public (0) or random (1) addresses: identity types are folded.
        public init(device d: DeviceAddress) { device = DeviceAddress(d.address, d.type.isRandom ? .random : .public) }
        public init() { self.init(device: DeviceAddress(BDAddress(wire: [0, 0, 0, 0, 0, 0]), .public)) }
        public mutating func fields(_ f: inout some HCIFieldWalker) throws { try f.deviceAddress("Address", "Address", &device) }
    }

    /// LE Remove Device From Filter Accept List (7.8.17).
    public struct LERemoveDeviceFromFilterAcceptList: HCIDeclaredCommand {
        public static let declaration = HCICommandDeclaration(0x2012, "LE Remove Device From Filter Accept List")
        public var device: DeviceAddress
        /// The list holds public (0) or random (1) addresses: identity types are folded.
        public init(device d: DeviceAddress) { device = DeviceAddress(d.address, d.type.isRandom ? .random : .public) }
        public init() { self.init(device: DeviceAddress(BDAddress(wire: [0, 0, 0, 0, 0, 0]), .public)) }
        public mutating func fields(_ f: inout some HCIFieldWalker) throws { try f.deviceAddress("Address", "Address", &device) }
    }

    /// LE Read Supported States (7.8.27): returns Status, LE_States (8 octets).
    public struct LEReadSupportedStates: HCIDeclaredCommand {
        public static let declaration = HCICommandDeclaration(0x201C, "LE Read Supported States")
        public init() {}
        public mutating func fields(_ f: inout some HCIFieldWalker) throws {}
    }
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
