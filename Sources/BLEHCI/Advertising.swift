import BLEWire

// Legacy advertising (Core Vol 4 Part E 7.8.5-7.8.9), for a peripheral, and
// reading a peer's LE features (7.8.21).

extension HCI {
    /// LE Set Advertising Parameters (7.8.5). Intervals in 0.625 ms units.
    public struct LESetAdvertisingParameters: HCIDeclaredCommand {
        public static let declaration = HCICommandDeclaration(0x2006, "LE Set Advertising Parameters")
        public var intervalMin: UInt16 = 0x0800, intervalMax: UInt16 = 0x0800
        /// 0 ADV_IND, 1 ADV_DIRECT_IND (high duty), 2 ADV_SCAN_IND, 3 ADV_NONCONN_IND, 4 ADV_DIRECT_IND (low duty).
        public var type: UInt8 = 0
        public var ownAddressType = AddressType.public
        public var peer = DeviceAddress(BDAddress(wire: [0, 0, 0, 0, 0, 0]), .public)
        public var channelMap: UInt8 = 0x07
        public var filterPolicy: UInt8 = 0
        public init() {}
        public mutating func fields(_ f: inout some HCIFieldWalker) throws {
            try f.u16("Advertising_Interval_Min", "Min advertising interval", &intervalMin, HCIShow.ms625)
            try f.u16("Advertising_Interval_Max", "Max advertising interval", &intervalMax, HCIShow.ms625)
            try f.u8("Advertising_Type", "Type", &type) { "\(AdvertisingReport.legacyTypeName($0 == 4 ? 1 : $0)) (\(HCIShow.h8($0)))" }
            try f.code("Own_Address_Type", "Own address type", &ownAddressType)
            try f.deviceAddress("Peer_Address", "Direct address", &peer)
            try f.u8("Advertising_Channel_Map", "Channel map", &channelMap)
            try f.u8("Advertising_Filter_Policy", "Filter policy", &filterPolicy)
        }
    }

    /// LE Set Advertising Data (7.8.7): a length and always 31 octets.
    public struct LESetAdvertisingData: HCIDeclaredCommand {
        public static let declaration = HCICommandDeclaration(0x2008, "LE Set Advertising Data")
        public var data: [UInt8] = []
        public init() {}
        public mutating func fields(_ f: inout some HCIFieldWalker) throws {
            try f.paddedData("Advertising_Data_Length", "Advertising_Data", "Data", &data, size: 31)
        }
    }

    /// LE Set Scan Response Data (7.8.8): a length and always 31 octets.
    public struct LESetScanResponseData: HCIDeclaredCommand {
        public static let declaration = HCICommandDeclaration(0x2009, "LE Set Scan Response Data")
        public var data: [UInt8] = []
        public init() {}
        public mutating func fields(_ f: inout some HCIFieldWalker) throws {
            try f.paddedData("Scan_Response_Data_Length", "Scan_Response_Data", "Data", &data, size: 31)
        }
    }

    /// LE Set Advertising Enable (7.8.9).
    public struct LESetAdvertisingEnable: HCIDeclaredCommand {
        public static let declaration = HCICommandDeclaration(0x200A, "LE Set Advertising Enable")
        public var enable: Bool
        public init(enable: Bool) { self.enable = enable }
        public init() { self.init(enable: false) }
        public mutating func fields(_ f: inout some HCIFieldWalker) throws {
            try f.flag("Advertising_Enable", "Advertising", &enable, HCIShow.enabled)
        }
    }

    /// LE Read Remote Features (7.8.21): answered by LE Read Remote Features Complete.
    public struct LEReadRemoteFeatures: HCIDeclaredCommand {
        public static let declaration = HCICommandDeclaration(0x2016, "LE Read Remote Features")
        public var handle: UInt16 = 0
        public init() {}
        public mutating func fields(_ f: inout some HCIFieldWalker) throws { try f.u16("Connection_Handle", "Handle", &handle) }
    }
}
