import BLEWire

// Advertising reports (Core Vol 4 Part E 7.7.65.2, 7.7.65.11, 7.7.65.13),
// each layout declared once.

/// One advertising report, from a legacy (7.7.65.2) or an extended (7.7.65.13) report event.
public struct AdvertisingReport: Hashable, Sendable {
    /// Extended event type bits (legacy types are mapped to them): bit 0 connectable,
    /// 1 scannable, 2 directed, 3 scan response, 4 legacy PDU, bits 5-6 data status.
    public var eventType: UInt16
    /// The raw legacy event type (0 ADV_IND .. 4 SCAN_RSP) when from a legacy report.
    public var legacyType: UInt8?
    public var address: DeviceAddress
    /// dBm; 127 means not available.
    public var rssi: Int8
    public var data: [UInt8]
    public var primaryPHY: UInt8 = 1
    public var secondaryPHY: UInt8 = 0
    public var sid: UInt8 = 0xFF
    public var txPower: Int8 = 127
    public var periodicInterval: UInt16 = 0
    public var directAddress: DeviceAddress? = nil

    public var isConnectable: Bool { eventType & 0x01 != 0 }
    public var isScannable: Bool { eventType & 0x02 != 0 }
    public var isDirected: Bool { eventType & 0x04 != 0 }
    public var isScanResponse: Bool { eventType & 0x08 != 0 }
    public var isLegacyPDU: Bool { eventType & 0x10 != 0 }
    /// 0 complete, 1 incomplete (more to come), 2 incomplete (truncated).
    public var dataStatus: UInt8 { UInt8((eventType >> 5) & 0x03) }

    /// Extended event type bits for each legacy event type (Core Vol 4 Part E 7.7.65.13 table).
    static func extendedType(legacy t: UInt8) -> UInt16 {
        switch t {
        case 0x00: return 0x13 // ADV_IND: legacy, scannable, connectable
        case 0x01: return 0x15 // ADV_DIRECT_IND: legacy, directed, connectable
        case 0x02: return 0x12 // ADV_SCAN_IND: legacy, scannable
        case 0x03: return 0x10 // ADV_NONCONN_IND
        case 0x04: return 0x1B // SCAN_RSP to ADV_IND
        default: return 0x10
        }
    }

    /// The PDU name of a legacy advertising Event_Type (7.7.65.2): 0 ADV_IND to 4 SCAN_RSP, "reserved 0xNN" otherwise.
    public static func legacyTypeName(_ t: UInt8) -> String {
        let names = ["ADV_IND", "ADV_DIRECT_IND", "ADV_SCAN_IND", "ADV_NONCONN_IND", "SCAN_RSP"]
        return Int(t) < names.count ? names[Int(t)] : "reserved 0x\(Hex.int(t, width: 2))"
    }

    static let noAddress = DeviceAddress(BDAddress(wire: [0, 0, 0, 0, 0, 0]), .public)
}

extension HCI {
    /// One report of LE Advertising Report (7.7.65.2).
    public struct LegacyReport: HCIListEntry {
        public static var unit: String { "reports" }
        public var report = AdvertisingReport(eventType: 0x13, legacyType: 0, address: AdvertisingReport.noAddress, rssi: 0, data: [])
        public init() {}
        public init(_ report: AdvertisingReport) { self.report = report }
        public mutating func fields(_ f: inout some HCIFieldWalker) throws {
            var t = report.legacyType ?? 0
            try f.u8("Event_Type", .hidden, &t)
            report.legacyType = t
            report.eventType = AdvertisingReport.extendedType(legacy: t)
            try f.deviceAddress("Address", .hidden, &report.address)
            try f.data("Data_Length", "Data", .hidden, &report.data, maximum: 31)
            var rssi = UInt8(bitPattern: report.rssi)
            try f.u8("RSSI", .hidden, &rssi)
            report.rssi = Int8(bitPattern: rssi)
        }
    }

    /// One report of LE Extended Advertising Report (7.7.65.13).
    public struct ExtendedReport: HCIListEntry {
        public static var unit: String { "reports" }
        public var report = AdvertisingReport(eventType: 0, legacyType: nil, address: AdvertisingReport.noAddress, rssi: 0, data: [])
        public init() {}
        public init(_ report: AdvertisingReport) { self.report = report }
        public mutating func fields(_ f: inout some HCIFieldWalker) throws {
            try f.u16("Event_Type", .hidden, &report.eventType)
            try f.deviceAddress("Address", .hidden, &report.address)
            try f.u8("Primary_PHY", .hidden, &report.primaryPHY)
            try f.u8("Secondary_PHY", .hidden, &report.secondaryPHY)
            try f.u8("Advertising_SID", .hidden, &report.sid)
            var tx = UInt8(bitPattern: report.txPower), rssi = UInt8(bitPattern: report.rssi)
            try f.u8("TX_Power", .hidden, &tx)
            try f.u8("RSSI", .hidden, &rssi)
            report.txPower = Int8(bitPattern: tx); report.rssi = Int8(bitPattern: rssi)
            try f.u16("Periodic_Advertising_Interval", .hidden, &report.periodicInterval)
            var direct = report.directAddress ?? AdvertisingReport.noAddress
            try f.deviceAddress("Direct_Address", .hidden, &direct)
            report.directAddress = report.eventType & 0x04 != 0 ? direct : nil
            try f.data("Data_Length", "Data", .hidden, &report.data, maximum: 255)
        }
    }

    /// LE Advertising Report (7.7.65.2): one or more legacy reports.
    public struct LEAdvertisingReport: HCITypedEvent {
        public static let declaration = HCIEventDeclaration(le: 0x02, "LE Advertising Report")
        public var reports: [LegacyReport] = [LegacyReport()]
        public init() {}
        public mutating func fields(_ f: inout some HCIFieldWalker) throws {
            try f.list("Num_Reports", "Num reports", &reports, minimum: 1)
        }
        public var event: HCIEvent { .leAdvertisingReport(reports.map(\.report), extended: false) }

        public static func traceLines(_ parameters: [UInt8], showKeys: Bool, describeReport: ((AdvertisingReport) -> [String])?) throws
            -> (title: String?, lines: [String]) {
            (nil, reportLines(try decode(parameters).reports.map(\.report), describeReport))
        }
    }

    /// LE Extended Advertising Report (7.7.65.13): one or more extended reports.
    public struct LEExtendedAdvertisingReport: HCITypedEvent {
        public static let declaration = HCIEventDeclaration(le: 0x0D, "LE Extended Advertising Report")
        public var reports: [ExtendedReport] = [ExtendedReport()]
        public init() {}
        public mutating func fields(_ f: inout some HCIFieldWalker) throws {
            try f.list("Num_Reports", "Num reports", &reports, minimum: 1)
        }
        public var event: HCIEvent { .leAdvertisingReport(reports.map(\.report), extended: true) }

        public static func traceLines(_ parameters: [UInt8], showKeys: Bool, describeReport: ((AdvertisingReport) -> [String])?) throws
            -> (title: String?, lines: [String]) {
            (nil, reportLines(try decode(parameters).reports.map(\.report), describeReport))
        }
    }

    /// The trace of a report event, by hand: the count, then each report as
    /// `describe` (BLEGAP, which knows advertising data) tells it; the
    /// reports' fields are not printed one by one.
    static func reportLines(_ reports: [AdvertisingReport], _ describe: ((AdvertisingReport) -> [String])?) -> [String] {
        ["Num reports: \(reports.count)"] + (describe.map { d in reports.flatMap(d) } ?? [])
    }

    /// LE Directed Advertising Report (7.7.65.11): directed advertising to a resolvable address of ours.
    public struct LEDirectedAdvertisingReport: HCIDeclaredEvent {
        public static let declaration = HCIEventDeclaration(le: 0x0B, "LE Directed Advertising Report")
        public var reports: [Entry] = [Entry()]
        public init() {}

        /// One directed report.
        public struct Entry: HCIListEntry {
            public static var unit: String { "reports" }
            public var eventType: UInt8 = 1
            public var address = AdvertisingReport.noAddress, direct = AdvertisingReport.noAddress
            public var rssi: UInt8 = 0
            public init() {}
            public mutating func fields(_ f: inout some HCIFieldWalker) throws {
                try f.u8("Event_Type", "Event type", &eventType) { "\(AdvertisingReport.legacyTypeName($0)) (\(HCIShow.h8($0)))" }
                try f.deviceAddress("Address", "Address", &address)
                try f.deviceAddress("Direct_Address", "Direct address", &direct)
                try f.u8("RSSI", "RSSI", &rssi) { "\(Int8(bitPattern: $0)) dBm" }
            }
        }

        public mutating func fields(_ f: inout some HCIFieldWalker) throws {
            try f.list("Num_Reports", "Num reports", &reports, minimum: 1)
        }
    }

    /// LE Scan Timeout (7.7.65.17): an extended scan with a duration ended.
    public struct LEScanTimeout: HCIDeclaredEvent {
        public static let declaration = HCIEventDeclaration(le: 0x11, "LE Scan Timeout")
        public init() {}
        public mutating func fields(_ f: inout some HCIFieldWalker) throws {}
    }
}
