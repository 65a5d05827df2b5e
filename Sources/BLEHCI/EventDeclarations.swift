import BLEWire

// The events attled understands (Core Vol 4 Part E 7.7), each declared once:
// its row of the event table and its fields in spec order.

/// Command Complete (7.7.14).
public struct CommandComplete: Hashable, Sendable {
    public var numCommandPackets: UInt8
    public var opcode: HCIOpcode
    /// Return parameters; for every command attled sends, the first is the status.
    public var returnParameters: [UInt8]
    public var status: HCIStatus? { returnParameters.first.map { HCIStatus(rawValue: $0) } }
}

extension CommandComplete: HCITypedEvent {
    public static let declaration = HCIEventDeclaration(0x0E, "Command Complete")
    public init() { self.init(numCommandPackets: 0, opcode: HCIOpcode(rawValue: 0), returnParameters: []) }
    public mutating func fields(_ f: inout some HCIFieldWalker) throws {
        try f.u8("Num_HCI_Command_Packets", .hidden, &numCommandPackets)
        try commandOpcode(&f, &opcode)
        try f.rest("Return_Parameters", &returnParameters)
    }
    public var event: HCIEvent { .commandComplete(self) }

    /// By hand: titled by the command it answers; Status, then the return
    /// parameters that command declares (`HCIDeclaredCommand.returnParameters`)
    /// when it succeeded, hex when undeclared or malformed.
    public static func traceLines(_ parameters: [UInt8], showKeys: Bool, describeReport: ((AdvertisingReport) -> [String])?) throws
        -> (title: String?, lines: [String]) {
        let cc = try decode(parameters)
        let title = commandTitle(cc.opcode, cc.numCommandPackets)
        guard let s = cc.status else { return (title, []) }
        let rp = cc.returnParameters
        guard s == .success else { return (title, ["Status: \(s)"]) }
        guard let d = HCI.commandTable[cc.opcode.rawValue]?.returnParameters else {
            return (title, ["Status: \(s)"] + (rp.count > 1 ? Hex.lines(Array(rp.dropFirst())) : []))
        }
        do { return (title, ["Status: \(s)"] + (try d.traceLines(rp))) } catch { return (title, ["Status: \(s)", "malformed: " + Hex.string(rp)]) }
    }
}

/// Command_Opcode of Command Complete and Command Status.
func commandOpcode(_ f: inout some HCIFieldWalker, _ opcode: inout HCIOpcode) throws {
    var op = opcode.rawValue
    try f.u16("Command_Opcode", .hidden, &op, HCIShow.h16)
    opcode = HCIOpcode(rawValue: op)
}

/// The trace's title of Command Complete and Command Status: `Name (0xOOOO) ncmd N`.
func commandTitle(_ opcode: HCIOpcode, _ ncmd: UInt8) -> String {
    "\(opcode.name) (\(HCIShow.h16(opcode.rawValue))) ncmd \(ncmd)"
}

/// Command Status (7.7.15).
public struct CommandStatus: Hashable, Sendable {
    public var status: HCIStatus
    public var numCommandPackets: UInt8
    public var opcode: HCIOpcode
}

extension CommandStatus: HCITypedEvent {
    public static let declaration = HCIEventDeclaration(0x0F, "Command Status")
    public init() { self.init(status: .success, numCommandPackets: 0, opcode: HCIOpcode(rawValue: 0)) }
    public mutating func fields(_ f: inout some HCIFieldWalker) throws {
        try f.code("Status", "Status", &status)
        try f.u8("Num_HCI_Command_Packets", .hidden, &numCommandPackets)
        try commandOpcode(&f, &opcode)
    }
    public var event: HCIEvent { .commandStatus(self) }

    /// Titled by the command it answers (by hand); Status below.
    public static func traceLines(_ parameters: [UInt8], showKeys: Bool, describeReport: ((AdvertisingReport) -> [String])?) throws
        -> (title: String?, lines: [String]) {
        let cs = try decode(parameters)
        return (commandTitle(cs.opcode, cs.numCommandPackets), try fieldLines(parameters, showKeys: showKeys))
    }
}

/// Disconnection Complete (7.7.5).
public struct DisconnectionComplete: Hashable, Sendable {
    public var status: HCIStatus
    public var handle: UInt16
    public var reason: HCIStatus
}

extension DisconnectionComplete: HCITypedEvent {
    public static let declaration = HCIEventDeclaration(0x05, "Disconnection Complete")
    public init() { self.init(status: .success, handle: 0, reason: .success) }
    public mutating func fields(_ f: inout some HCIFieldWalker) throws {
        try f.code("Status", "Status", &status)
        try f.handle(&handle)
        try f.code("Reason", "Reason", &reason)
    }
    public var event: HCIEvent { .disconnectionComplete(self) }
}

extension HCI {
    /// Read Remote Version Information Complete (7.7.12).
    public struct ReadRemoteVersionComplete: HCIDeclaredEvent {
        public static let declaration = HCIEventDeclaration(0x0C, "Read Remote Version Information Complete")
        public var status = HCIStatus.success
        public var handle: UInt16 = 0
        public var version: UInt8 = 0
        public var manufacturer: UInt16 = 0, subversion: UInt16 = 0
        public init() {}
        public mutating func fields(_ f: inout some HCIFieldWalker) throws {
            try f.code("Status", "Status", &status)
            try f.handle(&handle)
            try f.u8("Version", "LMP version", &version) { "\(LocalVersion.coreVersionName($0)) (\(HCIShow.h8($0)))" }
            try f.u16("Company_Identifier", "Manufacturer", &manufacturer, HCIShow.h16)
            try f.u16("Subversion", "Subversion", &subversion, HCIShow.h16)
        }
    }

    /// Hardware Error (7.7.16).
    public struct HardwareError: HCITypedEvent {
        public static let declaration = HCIEventDeclaration(0x10, "Hardware Error")
        public var code: UInt8 = 0
        public init() {}
        public mutating func fields(_ f: inout some HCIFieldWalker) throws { try f.u8("Hardware_Code", "Code", &code) }
        public var event: HCIEvent { .hardwareError(code) }
    }

    /// Number Of Completed Packets (7.7.19).
    public struct NumberOfCompletedPackets: HCITypedEvent {
        public static let declaration = HCIEventDeclaration(0x13, "Number of Completed Packets")
        public var handles: [HCIEvent.HandleCount] = []
        public init() {}
        public mutating func fields(_ f: inout some HCIFieldWalker) throws {
            try f.list("Num_Handles", "Num handles", &handles, minimum: 0)
        }
        public var event: HCIEvent { .numberOfCompletedPackets(handles) }
    }

    /// Data Buffer Overflow (7.7.26).
    public struct DataBufferOverflow: HCITypedEvent {
        public static let declaration = HCIEventDeclaration(0x1A, "Data Buffer Overflow")
        public var linkType: UInt8 = 0
        public init() {}
        public mutating func fields(_ f: inout some HCIFieldWalker) throws { try f.u8("Link_Type", "Link type", &linkType) }
        public var event: HCIEvent { .dataBufferOverflow(linkType: linkType) }
    }

    /// LE Meta (7.7.65): a subevent code and its parameters; each subevent is
    /// declared on its own (`HCI.subevents`).
    public struct LEMeta: HCIDeclaredEvent {
        public static let declaration = HCIEventDeclaration(0x3E, "LE Meta")
        public var subevent: UInt8 = 0
        public var parameters: [UInt8] = []
        public init() {}
        public mutating func fields(_ f: inout some HCIFieldWalker) throws {
            try f.u8("Subevent_Code", "Subevent", &subevent)
            try f.rest("Parameters", &parameters)
        }
    }

    /// A vendor-specific event (0xFF): the vendor's bytes.
    public struct Vendor: HCIDeclaredEvent {
        public static let declaration = HCIEventDeclaration(0xFF, "Vendor")
        public var parameters: [UInt8] = []
        public init() {}
        public mutating func fields(_ f: inout some HCIFieldWalker) throws { try f.rest("Parameters", &parameters) }
    }
}

// MARK: - LE connection subevents (7.7.65)

/// The role a connection gives this device (LE Connection Complete's Role,
/// 7.7.65.1): 0 central, 1 peripheral (a connection made to us while we
/// advertised). Open: any octet survives.
public struct HCIRole: RawRepresentable, Hashable, Sendable, CustomStringConvertible, ByteCode, ExpressibleByIntegerLiteral {
    public let rawValue: UInt8
    /// Any role octet, including reserved ones.
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    public init(integerLiteral v: UInt8) { rawValue = v }

    public static let central = HCIRole(rawValue: 0)
    public static let peripheral = HCIRole(rawValue: 1)

    /// `Central (0x00)`; any other value prints as `Peripheral (0xNN)`, as the trace always did.
    public var description: String { "\(self == .central ? "Central" : "Peripheral") (\(HCIShow.h8(rawValue)))" }
}

/// LE Connection Complete (7.7.65.1) and LE Enhanced Connection Complete (7.7.65.10, v1 and v2), folded.
public struct LEConnectionComplete: Hashable, Sendable {
    public var status: HCIStatus
    public var handle: UInt16
    /// `.central` or `.peripheral` (a connection made to us).
    public var role: HCIRole
    public var peer: DeviceAddress
    public var localRPA: BDAddress?
    public var peerRPA: BDAddress?
    /// 1.25 ms units.
    public var interval: UInt16
    public var latency: UInt16
    /// 10 ms units.
    public var supervisionTimeout: UInt16
    public var centralClockAccuracy: UInt8
    public var enhanced: Bool
}

extension LEConnectionComplete: HCITypedEvent {
    public static let declaration = HCIEventDeclaration(le: 0x01, "LE Connection Complete")
    public init() {
        self.init(status: .success, handle: 0, role: .central, peer: DeviceAddress(BDAddress(wire: [0, 0, 0, 0, 0, 0]), .public),
                  localRPA: nil, peerRPA: nil, interval: 0, latency: 0, supervisionTimeout: 0, centralClockAccuracy: 0, enhanced: false)
    }
    public mutating func fields(_ f: inout some HCIFieldWalker) throws { try fields(&f, enhanced: false) }
    public var event: HCIEvent { .leConnectionComplete(self) }

    /// The fields of either layout; the enhanced one has both resolvable private addresses after the peer's.
    mutating func fields(_ f: inout some HCIFieldWalker, enhanced: Bool) throws {
        try f.code("Status", "Status", &status)
        try f.handle(&handle)
        try f.code("Role", "Role", &role)
        try f.deviceAddress("Peer_Address", "Peer address", &peer)
        if enhanced {
            let zero = BDAddress(wire: [0, 0, 0, 0, 0, 0])
            var local = localRPA ?? zero, peerR = peerRPA ?? zero
            try f.address("Local_Resolvable_Private_Address", .hidden, &local) { "\($0)" }
            try f.address("Peer_Resolvable_Private_Address", .hidden, &peerR) { "\($0)" }
            localRPA = local; peerRPA = peerR
        }
        try f.u16("Connection_Interval", "Connection interval", &interval, HCIShow.ms1250)
        try f.u16("Peripheral_Latency", "Connection latency", &latency)
        try f.u16("Supervision_Timeout", "Supervision timeout", &supervisionTimeout, HCIShow.timeout)
        try f.u8("Central_Clock_Accuracy", "Central clock accuracy", &centralClockAccuracy)
        self.enhanced = enhanced
    }
}

extension HCI {
    /// LE Enhanced Connection Complete (7.7.65.10, v1).
    public struct LEEnhancedConnectionComplete: HCITypedEvent {
        public static let declaration = HCIEventDeclaration(le: 0x0A, "LE Enhanced Connection Complete")
        public var connection = LEConnectionComplete()
        public init() {}
        public mutating func fields(_ f: inout some HCIFieldWalker) throws { try connection.fields(&f, enhanced: true) }
        public var event: HCIEvent { .leConnectionComplete(connection) }
    }

    /// LE Enhanced Connection Complete v2 (7.7.65.10): v1 and the advertising set and sync that made it.
    public struct LEEnhancedConnectionCompleteV2: HCITypedEvent {
        public static let declaration = HCIEventDeclaration(le: 0x29, "LE Enhanced Connection Complete v2")
        public var connection = LEConnectionComplete()
        public var advertisingHandle: UInt8 = 0xFF
        public var syncHandle: UInt16 = 0xFFFF
        public init() {}
        public mutating func fields(_ f: inout some HCIFieldWalker) throws {
            try connection.fields(&f, enhanced: true)
            try f.u8("Advertising_Handle", "Advertising handle", &advertisingHandle)
            try f.u16("Sync_Handle", "Sync handle", &syncHandle, HCIShow.h16)
        }
        public var event: HCIEvent { .leConnectionComplete(connection) }
    }
}

/// LE Connection Update Complete (7.7.65.3).
public struct LEConnectionUpdateComplete: Hashable, Sendable {
    public var status: HCIStatus
    public var handle: UInt16
    public var interval: UInt16
    public var latency: UInt16
    public var supervisionTimeout: UInt16
}

extension LEConnectionUpdateComplete: HCITypedEvent {
    public static let declaration = HCIEventDeclaration(le: 0x03, "LE Connection Update Complete")
    public init() { self.init(status: .success, handle: 0, interval: 0, latency: 0, supervisionTimeout: 0) }
    public mutating func fields(_ f: inout some HCIFieldWalker) throws {
        try f.code("Status", "Status", &status)
        try f.handle(&handle)
        try f.u16("Connection_Interval", "Connection interval", &interval, HCIShow.ms1250)
        try f.u16("Peripheral_Latency", "Connection latency", &latency)
        try f.u16("Supervision_Timeout", "Supervision timeout", &supervisionTimeout, HCIShow.timeout)
    }
    public var event: HCIEvent { .leConnectionUpdateComplete(self) }
}

/// LE Data Length Change (7.7.65.7).
public struct LEDataLengthChange: Hashable, Sendable {
    public var handle: UInt16
    public var maxTxOctets: UInt16
    public var maxTxTime: UInt16
    public var maxRxOctets: UInt16
    public var maxRxTime: UInt16
}

extension LEDataLengthChange: HCITypedEvent {
    public static let declaration = HCIEventDeclaration(le: 0x07, "LE Data Length Change")
    public init() { self.init(handle: 0, maxTxOctets: 0, maxTxTime: 0, maxRxOctets: 0, maxRxTime: 0) }
    public mutating func fields(_ f: inout some HCIFieldWalker) throws {
        try f.handle(&handle)
        try f.u16("Max_TX_Octets", "Max TX octets", &maxTxOctets)
        try f.u16("Max_TX_Time", "Max TX time", &maxTxTime, HCIShow.usec)
        try f.u16("Max_RX_Octets", "Max RX octets", &maxRxOctets)
        try f.u16("Max_RX_Time", "Max RX time", &maxRxTime, HCIShow.usec)
    }
    public var event: HCIEvent { .leDataLengthChange(self) }
}

/// LE PHY Update Complete (7.7.65.12): the PHYs in use on a connection.
public struct LEPHYUpdateComplete: Hashable, HCIDeclaredEvent {
    public static let declaration = HCIEventDeclaration(le: 0x0C, "LE PHY Update Complete")
    public var status = HCIStatus.success
    public var handle: UInt16 = 0
    public var txPHY: UInt8 = 1
    public var rxPHY: UInt8 = 1
    public init() {}
    public mutating func fields(_ f: inout some HCIFieldWalker) throws {
        try f.code("Status", "Status", &status)
        try f.handle(&handle)
        try f.u8("TX_PHY", "TX PHY", &txPHY, HCIShow.phy)
        try f.u8("RX_PHY", "RX PHY", &rxPHY, HCIShow.phy)
    }

    /// "1M", "2M", "Coded" or the raw value.
    public static func name(_ phy: UInt8) -> String {
        switch phy { case 1: return "1M"; case 2: return "2M"; case 3: return "Coded"; default: return "PHY 0x\(Hex.int(phy, width: 2))" }
    }
}

extension HCI {
    /// LE Read Remote Features Complete (7.7.65.4): the peer's LE feature bits.
    public struct LEReadRemoteFeaturesComplete: HCIDeclaredEvent {
        public static let declaration = HCIEventDeclaration(le: 0x04, "LE Read Remote Features Complete")
        public var status = HCIStatus.success
        public var handle: UInt16 = 0
        public var features: UInt64 = 0
        public init() {}
        public mutating func fields(_ f: inout some HCIFieldWalker) throws {
            try f.code("Status", "Status", &status)
            try f.handle(&handle)
            try f.u64("LE_Features", "Features", &features, secret: false, HCIShow.h64)
        }
    }

    /// LE Long Term Key Request (7.7.65.5), on a peripheral: Rand and EDIV name the key (masked in traces).
    public struct LELongTermKeyRequest: HCIDeclaredEvent {
        public static let declaration = HCIEventDeclaration(le: 0x05, "LE Long Term Key Request")
        public var handle: UInt16 = 0
        public var rand: UInt64 = 0
        public var ediv: UInt16 = 0
        public init() {}
        public mutating func fields(_ f: inout some HCIFieldWalker) throws {
            try f.handle(&handle)
            try f.u64("Random_Number", "Rand", &rand, secret: true, HCIShow.h64)
            try f.u16("Encrypted_Diversifier", "EDIV", &ediv, secret: true, HCIShow.h16)
        }
    }

    /// LE Remote Connection Parameter Request (7.7.65.6).
    public struct LERemoteConnectionParameterRequest: HCIDeclaredEvent {
        public static let declaration = HCIEventDeclaration(le: 0x06, "LE Remote Connection Parameter Request")
        public var handle: UInt16 = 0
        public var intervalMin: UInt16 = 0, intervalMax: UInt16 = 0, latency: UInt16 = 0, timeout: UInt16 = 0
        public init() {}
        public mutating func fields(_ f: inout some HCIFieldWalker) throws {
            try f.handle(&handle)
            try f.u16("Interval_Min", "Min connection interval", &intervalMin, HCIShow.ms1250)
            try f.u16("Interval_Max", "Max connection interval", &intervalMax, HCIShow.ms1250)
            try f.u16("Max_Latency", "Connection latency", &latency)
            try f.u16("Timeout", "Supervision timeout", &timeout, HCIShow.timeout)
        }
    }

    /// LE Advertising Set Terminated (7.7.65.18).
    public struct LEAdvertisingSetTerminated: HCIDeclaredEvent {
        public static let declaration = HCIEventDeclaration(le: 0x12, "LE Advertising Set Terminated")
        public var status = HCIStatus.success
        public var advertisingHandle: UInt8 = 0
        public var handle: UInt16 = 0
        public var completedEvents: UInt8 = 0
        public init() {}
        public mutating func fields(_ f: inout some HCIFieldWalker) throws {
            try f.code("Status", "Status", &status)
            try f.u8("Advertising_Handle", "Advertising handle", &advertisingHandle)
            try f.handle(&handle)
            try f.u8("Num_Completed_Extended_Advertising_Events", "Completed events", &completedEvents, HCIShow.dec)
        }
    }

    /// LE Channel Selection Algorithm (7.7.65.20).
    public struct LEChannelSelectionAlgorithm: HCIDeclaredEvent {
        public static let declaration = HCIEventDeclaration(le: 0x14, "LE Channel Selection Algorithm")
        public var handle: UInt16 = 0
        public var algorithm: UInt8 = 0
        public init() {}
        public mutating func fields(_ f: inout some HCIFieldWalker) throws {
            try f.handle(&handle)
            try f.u8("Channel_Selection_Algorithm", "Algorithm", &algorithm) { "#\(Int($0) + 1) (\(HCIShow.h8($0)))" }
        }
    }
}
