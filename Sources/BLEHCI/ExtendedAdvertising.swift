import BLEWire

// Extended advertising (Core Vol 4 Part E 7.8.52-7.8.60), for a peripheral
// on a controller that lists it. attled uses one advertising set, handle 0.

extension HCI {
    /// LE Set Advertising Set Random Address (7.8.52): the random address a set
    /// advertises from when its Own_Address_Type is random.
    public struct LESetAdvertisingSetRandomAddress: HCIDeclaredCommand {
        public static let declaration = HCICommandDeclaration(0x2035, "LE Set Advertising Set Random Address")
        public var advertisingHandle: UInt8 = 0
        public var address = BDAddress(wire: [0, 0, 0, 0, 0, 0])
        public init() {}
        public mutating func fields(_ f: inout some HCIFieldWalker) throws {
            try f.u8("Advertising_Handle", "Advertising handle", &advertisingHandle, HCIShow.dec)
            try f.address("Random_Address", "Address", &address) { $0.description }
        }
    }

    /// LE Set Extended Advertising Parameters (7.8.53). Intervals are 24-bit, in 0.625 ms units.
    public struct LESetExtendedAdvertisingParameters: HCIDeclaredCommand {
        public static let declaration = HCICommandDeclaration(0x2036, "LE Set Extended Advertising Parameters")
        public static var returnParameters: (any HCIReturnParameters.Type)? { SelectedTXPower.self }
        public var advertisingHandle: UInt8 = 0
        /// Bit 0 connectable, 1 scannable, 2 directed, 3 high duty directed,
        /// 4 legacy PDUs, 5 anonymous, 6 include TX power. 0x0013: ADV_IND;
        /// 0x0001: connectable undirected extended advertising.
        public var properties: UInt16 = 0x0013
        public var intervalMin: UInt32 = 0x00A0, intervalMax: UInt32 = 0x00A0
        public var channelMap: UInt8 = 0x07
        public var ownAddressType = AddressType.public
        public var peer = DeviceAddress(BDAddress(wire: [0, 0, 0, 0, 0, 0]), .public)
        public var filterPolicy: UInt8 = 0
        /// dBm, signed; 0x7F: no preference.
        public var txPower: UInt8 = 0x7F
        /// 1 LE 1M, 3 LE Coded.
        public var primaryPHY: UInt8 = 0x01
        public var secondaryMaxSkip: UInt8 = 0
        /// 1 LE 1M, 2 LE 2M, 3 LE Coded.
        public var secondaryPHY: UInt8 = 0x01
        public var sid: UInt8 = 0
        public var scanRequestNotification = false
        public init() {}

        /// The properties, named as in the specification's table.
        public static func propertiesText(_ p: UInt16) -> String {
            let names = ["Connectable", "Scannable", "Directed", "High Duty Cycle", "Use legacy PDUs", "Anonymous", "Include TxPower"]
            let set = names.indices.filter { p & (1 << UInt16($0)) != 0 }.map { names[$0] }
            return "\(HCIShow.h16(p))\(set.isEmpty ? "" : " (" + set.joined(separator: ", ") + ")")"
        }

        public mutating func fields(_ f: inout some HCIFieldWalker) throws {
            try f.u8("Advertising_Handle", "Advertising handle", &advertisingHandle, HCIShow.dec)
            try f.u16("Advertising_Event_Properties", "Properties", &properties, Self.propertiesText)
            try f.u24("Primary_Advertising_Interval_Min", "Min advertising interval", &intervalMin) { formatMs(us: UInt64($0) * 625, decimals: 3) + " msec" }
            try f.u24("Primary_Advertising_Interval_Max", "Max advertising interval", &intervalMax) { formatMs(us: UInt64($0) * 625, decimals: 3) + " msec" }
            try f.u8("Primary_Advertising_Channel_Map", "Channel map", &channelMap)
            try f.code("Own_Address_Type", "Own address type", &ownAddressType)
            try f.deviceAddress("Peer_Address", "Peer address", &peer)
            try f.u8("Advertising_Filter_Policy", "Filter policy", &filterPolicy)
            try f.u8("Advertising_TX_Power", "TX power", &txPower) { $0 == 0x7F ? "no preference (0x7f)" : "\(Int8(bitPattern: $0)) dBm" }
            try f.u8("Primary_Advertising_PHY", "Primary PHY", &primaryPHY, HCIShow.phy)
            try f.u8("Secondary_Advertising_Max_Skip", "Secondary max skip", &secondaryMaxSkip, HCIShow.dec)
            try f.u8("Secondary_Advertising_PHY", "Secondary PHY", &secondaryPHY, HCIShow.phy)
            try f.u8("Advertising_SID", "SID", &sid)
            try f.flag("Scan_Request_Notification_Enable", "Scan request notifications", &scanRequestNotification, HCIShow.enabled)
        }
    }

    /// LE Set Extended Advertising Parameters' return parameter: the TX power chosen.
    public struct SelectedTXPower: HCIReturnParameters {
        public var txPower: UInt8 = 0
        public init() {}
        public mutating func fields(_ f: inout some HCIFieldWalker) throws {
            try f.u8("Selected_TX_Power", "TX power", &txPower) { "\(Int8(bitPattern: $0)) dBm" }
        }
    }

    /// The shared layout of LE Set Extended Advertising Data (7.8.54) and
    /// LE Set Extended Scan Response Data (7.8.55): handle, operation,
    /// fragment preference, then up to 251 octets.
    public struct ExtendedData: Sendable, Hashable {
        public var advertisingHandle: UInt8 = 0
        /// 0 intermediate fragment, 1 first, 2 last, 3 complete data, 4 unchanged data.
        public var operation: UInt8 = 0x03
        /// 0 the controller may fragment, 1 it should not.
        public var fragmentPreference: UInt8 = 0x01
        public var data: [UInt8] = []
        public init() {}
        public static let operations = ["Intermediate fragment", "First fragment", "Last fragment", "Complete data", "Unchanged data"]
        mutating func fields(_ f: inout some HCIFieldWalker, _ lengthName: String, _ dataName: String) throws {
            try f.u8("Advertising_Handle", "Advertising handle", &advertisingHandle, HCIShow.dec)
            try f.u8("Operation", "Operation", &operation) { "\($0 < 5 ? Self.operations[Int($0)] : "reserved") (\(HCIShow.h8($0)))" }
            try f.u8("Fragment_Preference", "Fragment preference", &fragmentPreference) {
                "\($0 == 0 ? "Fragment all" : $0 == 1 ? "Minimize fragmentation" : "reserved") (\(HCIShow.h8($0)))"
            }
            try f.data(lengthName, dataName, "Data", &data, maximum: 251)
        }
    }

    /// LE Set Extended Advertising Data (7.8.54).
    public struct LESetExtendedAdvertisingData: HCIDeclaredCommand {
        public static let declaration = HCICommandDeclaration(0x2037, "LE Set Extended Advertising Data")
        public var value = ExtendedData()
        public init() {}
        public mutating func fields(_ f: inout some HCIFieldWalker) throws {
            try value.fields(&f, "Advertising_Data_Length", "Advertising_Data")
        }
    }

    /// LE Set Extended Scan Response Data (7.8.55).
    public struct LESetExtendedScanResponseData: HCIDeclaredCommand {
        public static let declaration = HCICommandDeclaration(0x2038, "LE Set Extended Scan Response Data")
        public var value = ExtendedData()
        public init() {}
        public mutating func fields(_ f: inout some HCIFieldWalker) throws {
            try value.fields(&f, "Scan_Response_Data_Length", "Scan_Response_Data")
        }
    }

    /// LE Set Extended Advertising Enable (7.8.56): enable, then the sets it
    /// applies to (none with enable 0: every set).
    public struct LESetExtendedAdvertisingEnable: HCIDeclaredCommand {
        public static let declaration = HCICommandDeclaration(0x2039, "LE Set Extended Advertising Enable")
        public var enable: Bool
        public var sets: [AdvertisingSet]
        /// By default for set 0 alone, with no duration or event limit.
        public init(enable: Bool, sets: [AdvertisingSet] = [AdvertisingSet()]) { self.enable = enable; self.sets = sets }
        public init() { self.init(enable: false) }

        /// One set: its handle, a duration (10 ms units, 0 none) and a limit of events (0 none).
        public struct AdvertisingSet: HCIListEntry, Hashable {
            public static var unit: String { "sets" }
            public var handle: UInt8 = 0
            public var duration: UInt16 = 0
            public var maxEvents: UInt8 = 0
            public init() {}
            public init(handle: UInt8, duration: UInt16 = 0, maxEvents: UInt8 = 0) {
                self.handle = handle; self.duration = duration; self.maxEvents = maxEvents
            }
            public mutating func fields(_ f: inout some HCIFieldWalker) throws {
                try f.u8("Advertising_Handle", "Advertising handle", &handle, HCIShow.dec)
                try f.u16("Duration", "Duration", &duration) { $0 == 0 ? "none (0x0000)" : HCIShow.ms($0, 10_000) }
                try f.u8("Max_Extended_Advertising_Events", "Max events", &maxEvents, HCIShow.dec)
            }
        }

        public mutating func fields(_ f: inout some HCIFieldWalker) throws {
            try f.flag("Enable", "Extended advertising", &enable, HCIShow.enabled)
            try f.list("Num_Sets", "Number of sets", &sets, minimum: 0)
        }
    }

    /// LE Remove Advertising Set (7.8.59).
    public struct LERemoveAdvertisingSet: HCIDeclaredCommand {
        public static let declaration = HCICommandDeclaration(0x203C, "LE Remove Advertising Set")
        public var advertisingHandle: UInt8 = 0
        public init() {}
        public mutating func fields(_ f: inout some HCIFieldWalker) throws {
            try f.u8("Advertising_Handle", "Advertising handle", &advertisingHandle, HCIShow.dec)
        }
    }
}
