import BLEWire

// Scanning, connecting and the link's parameters (Core Vol 4 Part E 7.8),
// each command declared once.

/// LE Set Scan Parameters (Core Vol 4 Part E 7.8.10). Interval and window in 0.625 ms units.
public struct LEScanParameters: Hashable, HCIDeclaredCommand {
    public static let declaration = HCICommandDeclaration(0x200B, "LE Set Scan Parameters")
    public var active: Bool
    public var interval: UInt16
    public var window: UInt16
    public var ownAddressType: AddressType
    public var filterPolicy: UInt8

    /// Scan parameters; the defaults are an active scan with a 10 ms interval
    /// and window (0x0010), public own address, no filter accept list.
    public init(active: Bool = true, interval: UInt16 = 0x0010, window: UInt16 = 0x0010,
                ownAddressType: AddressType = .public, filterPolicy: UInt8 = 0) {
        self.active = active; self.interval = interval; self.window = window
        self.ownAddressType = ownAddressType; self.filterPolicy = filterPolicy
    }
    public init() { self.init(active: true) }

    public mutating func fields(_ f: inout some HCIFieldWalker) throws {
        try f.flag("LE_Scan_Type", "Type", &active) { $0 ? "Active (0x01)" : "Passive (0x00)" }
        try f.u16("LE_Scan_Interval", "Interval", &interval) { "\(HCIShow.ms625($0)) (\(HCIShow.h16($0)))" }
        try f.u16("LE_Scan_Window", "Window", &window) { "\(HCIShow.ms625($0)) (\(HCIShow.h16($0)))" }
        try f.code("Own_Address_Type", "Own address type", &ownAddressType)
        try f.u8("Scanning_Filter_Policy", "Filter policy", &filterPolicy)
    }

    /// As the extended command (7.8.64), 1M PHY only.
    public var extendedCommand: HCICommand {
        var c = HCI.LESetExtendedScanParameters()
        c.ownAddressType = ownAddressType; c.filterPolicy = filterPolicy; c.phys = 0x01
        c.scans = [.init(active: active, interval: interval, window: window)]
        return c.command
    }

    /// Decodes LE Set Extended Scan Parameters, returning the first PHY's settings.
    /// - Throws: `WireError` if a PHY's block is truncated, bytes are left over, or no PHY bit is set.
    public static func decodeExtended(_ p: [UInt8]) throws -> (params: LEScanParameters, phys: UInt8) {
        let c = try HCI.LESetExtendedScanParameters.decode(p)
        let s = c.scans[0] // perPHY guarantees one
        return (LEScanParameters(active: s.active, interval: s.interval, window: s.window,
                                 ownAddressType: c.ownAddressType, filterPolicy: c.filterPolicy), c.phys)
    }
}

/// Connection parameters (Core Vol 4 Part E 7.8.12/7.8.18). Intervals in 1.25 ms, timeout in 10 ms.
public struct ConnectionParameters: Hashable, Sendable, HCIListEntry {
    public var intervalMin: UInt16
    public var intervalMax: UInt16
    public var latency: UInt16
    public var supervisionTimeout: UInt16
    public var minCELength: UInt16
    public var maxCELength: UInt16

    /// Connection parameters; the defaults ask for a 30-50 ms interval, no
    /// latency and a 5 s supervision timeout, with no CE length hint.
    public init(intervalMin: UInt16 = 0x0018, intervalMax: UInt16 = 0x0028, latency: UInt16 = 0,
                supervisionTimeout: UInt16 = 0x01F4, minCELength: UInt16 = 0, maxCELength: UInt16 = 0) {
        self.intervalMin = intervalMin; self.intervalMax = intervalMax; self.latency = latency
        self.supervisionTimeout = supervisionTimeout; self.minCELength = minCELength; self.maxCELength = maxCELength
    }
    public init() { self.init(intervalMin: 0x0018) }

    /// For one-shot jobs (a CLI run): 7.5-15 ms, no latency, 2 s supervision
    /// timeout. Every ATT round trip costs one or two connection intervals on
    /// real radio, so a short job asks for the shortest interval.
    public static let oneShot = ConnectionParameters(intervalMin: 0x0006, intervalMax: 0x000C, latency: 0, supervisionTimeout: 0x00C8)

    /// For a link kept up while idle (the gateway, after a quiet spell):
    /// 15 ms, no peripheral latency, 4 s supervision timeout. LED lamps are
    /// mains-powered, so the idle policy is chosen for the first command's
    /// latency: a command's writes go out before the update back to the
    /// short interval takes effect (its instant is at least 6 events away).
    /// An ATT round trip takes two connection events (the request at one,
    /// the response at the next: no peer answers within the 150 us
    /// turnaround), so a pycom colour (3 Write Requests) reaches the lamp's
    /// last characteristic 4 intervals after its first event, plus the wait
    /// for that event: 4.5 x 15 = 68 ms on average (`make bench` measures it
    /// on the timed air; at the former 30 ms it was 135 ms, and up to 3 x 200
    /// ms plus skipped events at 100-200 ms with latency 4).
    public static let idle = ConnectionParameters(intervalMin: 0x000C, intervalMax: 0x000C, latency: 0, supervisionTimeout: 0x0190)

    /// The range checks of Core Vol 4 Part E 7.8.12: interval 7.5 ms..4 s, latency <= 499,
    /// timeout 100 ms..32 s and longer than (1 + latency) * interval_max * 2.
    public var isValid: Bool {
        guard intervalMin >= 6, intervalMax <= 3200, intervalMin <= intervalMax else { return false }
        guard latency <= 499, supervisionTimeout >= 10, supervisionTimeout <= 3200 else { return false }
        // timeout (10 ms units) * 10 > (1 + latency) * intervalMax (1.25 ms units) * 1.25 * 2
        return UInt32(supervisionTimeout) * 4 > (1 + UInt32(latency)) * UInt32(intervalMax)
    }

    public mutating func fields(_ f: inout some HCIFieldWalker) throws {
        try f.u16("Connection_Interval_Min", "Min connection interval", &intervalMin, HCIShow.ms1250)
        try f.u16("Connection_Interval_Max", "Max connection interval", &intervalMax, HCIShow.ms1250)
        try f.u16("Max_Latency", "Connection latency", &latency)
        try f.u16("Supervision_Timeout", "Supervision timeout", &supervisionTimeout, HCIShow.timeout)
        try f.u16("Min_CE_Length", "Min CE length", &minCELength, HCIShow.ms625)
        try f.u16("Max_CE_Length", "Max CE length", &maxCELength, HCIShow.ms625)
    }

    /// Intervals, latency, supervision timeout and CE lengths in milliseconds, one per line.
    public var traceFields: [String] {
        var p = HCIFieldPrinter(); var c = self
        try? c.fields(&p)
        return p.lines
    }
}

/// LE Create Connection (Core Vol 4 Part E 7.8.12).
public struct LECreateConnection: Hashable, HCIDeclaredCommand {
    public static let declaration = HCICommandDeclaration(0x200D, "LE Create Connection")
    public var scanInterval: UInt16
    public var scanWindow: UInt16
    public var filterPolicy: UInt8
    public var peer: DeviceAddress
    public var ownAddressType: AddressType
    public var connection: ConnectionParameters

    /// Create Connection parameters for `peer`; the defaults scan with a 10 ms
    /// interval and window, connect to that peer only (no filter accept list)
    /// and use the default `ConnectionParameters`.
    public init(peer: DeviceAddress, ownAddressType: AddressType, scanInterval: UInt16 = 0x0010, scanWindow: UInt16 = 0x0010,
                filterPolicy: UInt8 = 0, connection: ConnectionParameters = ConnectionParameters()) {
        self.peer = peer; self.ownAddressType = ownAddressType; self.scanInterval = scanInterval
        self.scanWindow = scanWindow; self.filterPolicy = filterPolicy; self.connection = connection
    }
    public init() { self.init(peer: DeviceAddress(BDAddress(wire: [0, 0, 0, 0, 0, 0]), .public), ownAddressType: .public) }

    public mutating func fields(_ f: inout some HCIFieldWalker) throws {
        try f.u16("LE_Scan_Interval", "Scan interval", &scanInterval, HCIShow.ms625)
        try f.u16("LE_Scan_Window", "Scan window", &scanWindow, HCIShow.ms625)
        try f.u8("Initiator_Filter_Policy", "Filter policy", &filterPolicy)
        try f.deviceAddress("Peer_Address", "Peer address", &peer)
        try f.code("Own_Address_Type", "Own address type", &ownAddressType)
        try connection.fields(&f)
    }

    /// As LE Extended Create Connection (7.8.66), 1M PHY only.
    public var extendedCommand: HCICommand {
        var c = HCI.LEExtendedCreateConnection()
        c.filterPolicy = filterPolicy; c.ownAddressType = ownAddressType; c.peer = peer; c.phys = 0x01
        c.initiating = [.init(scanInterval: scanInterval, scanWindow: scanWindow, connection: connection)]
        return c.command
    }

    /// Decodes LE Extended Create Connection (7.8.66), keeping the first initiating PHY's parameters.
    /// - Throws: `WireError` if a PHY's block is truncated, bytes are left over, or no PHY bit is set.
    public static func decodeExtended(_ p: [UInt8]) throws -> LECreateConnection {
        let c = try HCI.LEExtendedCreateConnection.decode(p)
        let i = c.initiating[0] // perPHY guarantees one
        return LECreateConnection(peer: c.peer, ownAddressType: c.ownAddressType, scanInterval: i.scanInterval,
                                  scanWindow: i.scanWindow, filterPolicy: c.filterPolicy, connection: i.connection)
    }
}

/// LE Connection Update (Core Vol 4 Part E 7.8.18).
public struct LEConnectionUpdate: Hashable, HCIDeclaredCommand {
    public static let declaration = HCICommandDeclaration(0x2013, "LE Connection Update")
    public var handle: UInt16
    public var parameters: ConnectionParameters
    /// An update of connection `handle` to `parameters`.
    public init(handle: UInt16, parameters: ConnectionParameters) {
        self.handle = handle; self.parameters = parameters
    }
    public init() { self.init(handle: 0, parameters: ConnectionParameters()) }
    public mutating func fields(_ f: inout some HCIFieldWalker) throws {
        try f.u16("Connection_Handle", "Handle", &handle)
        try parameters.fields(&f)
    }
}

extension HCI {
    /// LE Set Scan Enable (7.8.11).
    public struct LESetScanEnable: HCIDeclaredCommand {
        public static let declaration = HCICommandDeclaration(0x200C, "LE Set Scan Enable")
        public var enable: Bool, filterDuplicates: Bool
        public init(enable: Bool, filterDuplicates: Bool) { self.enable = enable; self.filterDuplicates = filterDuplicates }
        public init() { self.init(enable: false, filterDuplicates: false) }
        public mutating func fields(_ f: inout some HCIFieldWalker) throws {
            try f.flag("LE_Scan_Enable", "Scanning", &enable, HCIShow.enabled)
            try f.flag("Filter_Duplicates", "Filter duplicates", &filterDuplicates, HCIShow.enabled)
        }
    }

    /// LE Set Extended Scan Parameters (7.8.64): own address type, filter policy, one block per PHY.
    public struct LESetExtendedScanParameters: HCIDeclaredCommand {
        public static let declaration = HCICommandDeclaration(0x2041, "LE Set Extended Scan Parameters")
        public var ownAddressType = AddressType.public
        public var filterPolicy: UInt8 = 0
        public var phys: UInt8 = 0x01
        public var scans: [PHYScan] = [PHYScan()]
        public init() {}

        /// One PHY's scan type, interval and window (0.625 ms units).
        public struct PHYScan: HCIListEntry, Hashable {
            public var active = true
            public var interval: UInt16 = 0x0010, window: UInt16 = 0x0010
            public init() {}
            public init(active: Bool, interval: UInt16, window: UInt16) { self.active = active; self.interval = interval; self.window = window }
            public mutating func fields(_ f: inout some HCIFieldWalker) throws {
                try f.flag("Scan_Type", "Type", &active) { $0 ? "Active" : "Passive" }
                try f.u16("Scan_Interval", "Interval", &interval, HCIShow.ms625)
                try f.u16("Scan_Window", "Window", &window, HCIShow.ms625)
            }
        }

        public mutating func fields(_ f: inout some HCIFieldWalker) throws {
            try f.code("Own_Address_Type", "Own address type", &ownAddressType)
            try f.u8("Scanning_Filter_Policy", "Filter policy", &filterPolicy)
            try perPHY(&f, "Scanning_PHYs", "PHYs", &phys, &scans)
        }
    }

    /// LE Set Extended Scan Enable (7.8.65): enable, filter duplicates, duration (10 ms), period (1.28 s).
    public struct LESetExtendedScanEnable: HCIDeclaredCommand {
        public static let declaration = HCICommandDeclaration(0x2042, "LE Set Extended Scan Enable")
        public var enable: Bool, filterDuplicates: Bool
        public var duration: UInt16, period: UInt16
        /// Scanning on or off; by default no duration (until disabled) and no period.
        public init(enable: Bool, filterDuplicates: Bool, duration: UInt16 = 0, period: UInt16 = 0) {
            self.enable = enable; self.filterDuplicates = filterDuplicates; self.duration = duration; self.period = period
        }
        public init() { self.init(enable: false, filterDuplicates: false) }
        public mutating func fields(_ f: inout some HCIFieldWalker) throws {
            try f.flag("Enable", "Scanning", &enable, HCIShow.enabled)
            try f.flag("Filter_Duplicates", "Filter duplicates", &filterDuplicates, HCIShow.enabled)
            try f.u16("Duration", "Duration", &duration) { HCIShow.ms($0, 10_000) }
            try f.u16("Period", "Period", &period) { formatMs(us: UInt64($0) * 1_280_000, decimals: 0) + " msec" }
        }
    }

    /// LE Extended Create Connection (7.8.66): one block of scan and connection parameters per initiating PHY.
    public struct LEExtendedCreateConnection: HCIDeclaredCommand {
        public static let declaration = HCICommandDeclaration(0x2043, "LE Extended Create Connection")
        public var filterPolicy: UInt8 = 0
        public var ownAddressType = AddressType.public
        public var peer = DeviceAddress(BDAddress(wire: [0, 0, 0, 0, 0, 0]), .public)
        public var phys: UInt8 = 0x01
        public var initiating: [PHYConnect] = [PHYConnect()]
        public init() {}

        /// One initiating PHY's scan interval and window and connection parameters.
        public struct PHYConnect: HCIListEntry, Hashable {
            public var scanInterval: UInt16 = 0x0010, scanWindow: UInt16 = 0x0010
            public var connection = ConnectionParameters()
            public init() {}
            public init(scanInterval: UInt16, scanWindow: UInt16, connection: ConnectionParameters) {
                self.scanInterval = scanInterval; self.scanWindow = scanWindow; self.connection = connection
            }
            public mutating func fields(_ f: inout some HCIFieldWalker) throws {
                try f.u16("Scan_Interval", "Scan interval", &scanInterval, HCIShow.ms625)
                try f.u16("Scan_Window", "Scan window", &scanWindow, HCIShow.ms625)
                try connection.fields(&f)
            }
        }

        public mutating func fields(_ f: inout some HCIFieldWalker) throws {
            try f.u8("Initiator_Filter_Policy", "Filter policy", &filterPolicy)
            try f.code("Own_Address_Type", "Own address type", &ownAddressType)
            try f.deviceAddress("Peer_Address", "Peer address", &peer)
            try perPHY(&f, "Initiating_PHYs", "PHYs", &phys, &initiating)
        }
    }

    /// A PHY bit mask, then one entry per bit set, at least one: the shape
    /// of these two extended commands only (7.8.64, 7.8.66), so written here
    /// rather than as a walker field. Read, the entries follow the bits;
    /// written, the bits say how many entries go out.
    static func perPHY<E: HCIListEntry>(_ f: inout some HCIFieldWalker, _ physName: String, _ trace: HCITrace,
                                         _ phys: inout UInt8, _ v: inout [E]) throws {
        try f.u8(physName, trace, &phys)
        if v.count != phys.nonzeroBitCount { v = Array(repeating: E(), count: phys.nonzeroBitCount) }
        guard !v.isEmpty else { throw WireError.invalid(field: physName, reason: "no PHY selected") }
        for i in v.indices { try v[i].fields(&f) }
    }

    /// LE Set Data Length (7.8.33): Connection_Handle, TX_Octets, TX_Time.
    public struct LESetDataLength: HCIDeclaredCommand {
        public static let declaration = HCICommandDeclaration(0x2022, "LE Set Data Length")
        public var handle: UInt16
        public var txOctets: UInt16, txTime: UInt16
        /// The default asks for the largest LL payload, 251 octets (2120 µs on the 1M PHY).
        public init(handle: UInt16, txOctets: UInt16 = 251, txTime: UInt16 = 2120) {
            self.handle = handle; self.txOctets = txOctets; self.txTime = txTime
        }
        public init() { self.init(handle: 0) }
        public mutating func fields(_ f: inout some HCIFieldWalker) throws {
            try f.u16("Connection_Handle", "Handle", &handle)
            try f.u16("TX_Octets", "TX octets", &txOctets)
            try f.u16("TX_Time", "TX time", &txTime, HCIShow.usec)
        }
    }

    /// LE Set PHY (7.8.49): preferences for each direction (bit 0 LE 1M, 1 LE 2M, 2 LE Coded).
    public struct LESetPHY: HCIDeclaredCommand {
        public static let declaration = HCICommandDeclaration(0x2032, "LE Set PHY")
        public var handle: UInt16
        public var allPHYs: UInt8, tx: UInt8, rx: UInt8
        public var options: UInt16
        /// The defaults: All_PHYs 0 (a preference each way), TX_PHYs and
        /// RX_PHYs LE 2M (bit 1), PHY_Options 0.
        public init(handle: UInt16, allPHYs: UInt8 = 0, tx: UInt8 = 0x02, rx: UInt8 = 0x02, options: UInt16 = 0) {
            self.handle = handle; self.allPHYs = allPHYs; self.tx = tx; self.rx = rx; self.options = options
        }
        public init() { self.init(handle: 0) }
        public mutating func fields(_ f: inout some HCIFieldWalker) throws {
            try f.u16("Connection_Handle", "Handle", &handle)
            try f.u8("All_PHYs", "All PHYs", &allPHYs)
            try f.u8("TX_PHYs", "TX PHYs", &tx)
            try f.u8("RX_PHYs", "RX PHYs", &rx)
            try f.u16("PHY_Options", "PHY options", &options, HCIShow.h16)
        }
    }
}
