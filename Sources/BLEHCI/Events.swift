import BLEWire

/// Event codes (Core Vol 4 Part E 7.7). Open.
public struct HCIEventCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt8
    /// Any event code byte, including ones not named below.
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    public static let disconnectionComplete = HCIEventCode(rawValue: 0x05)
    public static let encryptionChange = HCIEventCode(rawValue: 0x08)
    public static let readRemoteVersionComplete = HCIEventCode(rawValue: 0x0C)
    public static let commandComplete = HCIEventCode(rawValue: 0x0E)
    public static let commandStatus = HCIEventCode(rawValue: 0x0F)
    public static let hardwareError = HCIEventCode(rawValue: 0x10)
    public static let numberOfCompletedPackets = HCIEventCode(rawValue: 0x13)
    public static let dataBufferOverflow = HCIEventCode(rawValue: 0x1A)
    public static let leMeta = HCIEventCode(rawValue: 0x3E)
    public static let vendor = HCIEventCode(rawValue: 0xFF)

    static let names: [UInt8: String] = [
        0x05: "Disconnection Complete", 0x08: "Encryption Change", 0x0C: "Read Remote Version Information Complete",
        0x0E: "Command Complete", 0x0F: "Command Status", 0x10: "Hardware Error",
        0x13: "Number of Completed Packets", 0x1A: "Data Buffer Overflow", 0x30: "Encryption Key Refresh Complete",
        0x3E: "LE Meta", 0xFF: "Vendor",
    ]
    public var name: String { Self.names[rawValue] ?? "Unknown Event" }
    public var description: String { "\(name) (0x\(Hex.int(rawValue, width: 2)))" }
}

/// LE Meta subevent codes (Core Vol 4 Part E 7.7.65). Open.
public struct LESubevent: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt8
    /// Any subevent code byte, including ones not named below.
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    public static let connectionComplete = LESubevent(rawValue: 0x01)
    public static let advertisingReport = LESubevent(rawValue: 0x02)
    public static let connectionUpdateComplete = LESubevent(rawValue: 0x03)
    public static let readRemoteFeaturesComplete = LESubevent(rawValue: 0x04)
    public static let dataLengthChange = LESubevent(rawValue: 0x07)
    public static let enhancedConnectionComplete = LESubevent(rawValue: 0x0A)
    public static let phyUpdateComplete = LESubevent(rawValue: 0x0C)
    public static let extendedAdvertisingReport = LESubevent(rawValue: 0x0D)
    public static let channelSelectionAlgorithm = LESubevent(rawValue: 0x14)

    static let names: [UInt8: String] = [
        0x01: "LE Connection Complete", 0x02: "LE Advertising Report", 0x03: "LE Connection Update Complete",
        0x04: "LE Read Remote Features Complete", 0x05: "LE Long Term Key Request",
        0x06: "LE Remote Connection Parameter Request", 0x07: "LE Data Length Change",
        0x0A: "LE Enhanced Connection Complete", 0x0B: "LE Directed Advertising Report",
        0x0C: "LE PHY Update Complete", 0x0D: "LE Extended Advertising Report", 0x11: "LE Scan Timeout",
        0x12: "LE Advertising Set Terminated", 0x14: "LE Channel Selection Algorithm",
        0x29: "LE Enhanced Connection Complete v2",
    ]
    public var name: String { Self.names[rawValue] ?? "Unknown LE Subevent" }
    public var description: String { "\(name) (0x\(Hex.int(rawValue, width: 2)))" }
}

/// Command Complete (7.7.14).
public struct CommandComplete: Hashable, Sendable {
    public var numCommandPackets: UInt8
    public var opcode: HCIOpcode
    /// Return parameters; for every command attled sends, the first is the status.
    public var returnParameters: [UInt8]
    public var status: HCIStatus? { returnParameters.first.map { HCIStatus(rawValue: $0) } }
}

/// Command Status (7.7.15).
public struct CommandStatus: Hashable, Sendable {
    public var status: HCIStatus
    public var numCommandPackets: UInt8
    public var opcode: HCIOpcode
}

/// Disconnection Complete (7.7.5).
public struct DisconnectionComplete: Hashable, Sendable {
    public var status: HCIStatus
    public var handle: UInt16
    public var reason: HCIStatus
}

/// LE Connection Complete (7.7.65.1) and LE Enhanced Connection Complete (7.7.65.10), folded.
public struct LEConnectionComplete: Hashable, Sendable {
    public var status: HCIStatus
    public var handle: UInt16
    /// 0 central, 1 peripheral.
    public var role: UInt8
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

/// LE Connection Update Complete (7.7.65.3).
public struct LEConnectionUpdateComplete: Hashable, Sendable {
    public var status: HCIStatus
    public var handle: UInt16
    public var interval: UInt16
    public var latency: UInt16
    public var supervisionTimeout: UInt16
}

/// LE Data Length Change (7.7.65.7).
public struct LEDataLengthChange: Hashable, Sendable {
    public var handle: UInt16
    public var maxTxOctets: UInt16
    public var maxTxTime: UInt16
    public var maxRxOctets: UInt16
    public var maxRxTime: UInt16
}

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
}

/// A decoded HCI event. Unknown events and subevents pass through with their bytes.
public enum HCIEvent: Hashable, Sendable {
    case commandComplete(CommandComplete)
    case commandStatus(CommandStatus)
    case disconnectionComplete(DisconnectionComplete)
    case numberOfCompletedPackets([HandleCount])
    case hardwareError(UInt8)
    case dataBufferOverflow(linkType: UInt8)
    case leConnectionComplete(LEConnectionComplete)
    case leAdvertisingReport([AdvertisingReport], extended: Bool)
    case leConnectionUpdateComplete(LEConnectionUpdateComplete)
    case leDataLengthChange(LEDataLengthChange)
    case leMeta(LESubevent, [UInt8])
    case other(HCIEventCode, [UInt8])

    /// One Connection_Handle / Num_Completed_Packets pair of Number Of Completed Packets (7.7.19).
    public struct HandleCount: Hashable, Sendable {
        public var handle: UInt16
        public var count: UInt16
    }

    /// Decodes an event packet (the bytes after the H4 indicator). Throws
    /// `WireError` on any length inconsistency; never traps.
    /// - Throws: `WireError` (truncated parameters, extra bytes, or a field the spec forbids such as 0 reports).
    public static func decode(_ bytes: [UInt8]) throws -> HCIEvent {
        var r = ByteReader(bytes)
        let code = HCIEventCode(rawValue: try r.u8("event code"))
        let len = Int(try r.u8("parameter length"))
        var p = ByteReader(try r.bytes(len, "event parameters"))
        try r.expectEnd("event \(code)")
        switch code {
        case .commandComplete:
            let n = try p.u8("Num_HCI_Command_Packets")
            let op = HCIOpcode(rawValue: try p.u16("Command_Opcode"))
            return .commandComplete(CommandComplete(numCommandPackets: n, opcode: op, returnParameters: p.rest()))
        case .commandStatus:
            let s = HCIStatus(rawValue: try p.u8("Status"))
            let n = try p.u8("Num_HCI_Command_Packets")
            let op = HCIOpcode(rawValue: try p.u16("Command_Opcode"))
            try p.expectEnd("Command Status")
            return .commandStatus(CommandStatus(status: s, numCommandPackets: n, opcode: op))
        case .disconnectionComplete:
            let s = HCIStatus(rawValue: try p.u8("Status"))
            let h = try p.u16("Connection_Handle") & 0x0FFF
            let reason = HCIStatus(rawValue: try p.u8("Reason"))
            try p.expectEnd("Disconnection Complete")
            return .disconnectionComplete(DisconnectionComplete(status: s, handle: h, reason: reason))
        case .numberOfCompletedPackets:
            let n = Int(try p.u8("Num_Handles"))
            var out: [HandleCount] = []
            for _ in 0..<n {
                out.append(HandleCount(handle: try p.u16("Connection_Handle") & 0x0FFF, count: try p.u16("Num_Completed_Packets")))
            }
            try p.expectEnd("Number Of Completed Packets")
            return .numberOfCompletedPackets(out)
        case .hardwareError:
            let c = try p.u8("Hardware_Code")
            try p.expectEnd("Hardware Error")
            return .hardwareError(c)
        case .dataBufferOverflow:
            let t = try p.u8("Link_Type")
            try p.expectEnd("Data Buffer Overflow")
            return .dataBufferOverflow(linkType: t)
        case .leMeta:
            let sub = LESubevent(rawValue: try p.u8("Subevent_Code"))
            return try decodeLEMeta(sub, &p)
        default:
            return .other(code, p.rest())
        }
    }

    static func decodeLEMeta(_ sub: LESubevent, _ p: inout ByteReader) throws -> HCIEvent {
        switch sub {
        case .connectionComplete, .enhancedConnectionComplete, LESubevent(rawValue: 0x29):
            let enhanced = sub != .connectionComplete
            let s = HCIStatus(rawValue: try p.u8("Status"))
            let h = try p.u16("Connection_Handle") & 0x0FFF
            let role = try p.u8("Role")
            let pt = AddressType(rawValue: try p.u8("Peer_Address_Type"))
            let pa = try BDAddress.read(&p, "Peer_Address")
            var local: BDAddress? = nil, peerRPA: BDAddress? = nil
            if enhanced {
                local = try BDAddress.read(&p, "Local_Resolvable_Private_Address")
                peerRPA = try BDAddress.read(&p, "Peer_Resolvable_Private_Address")
            }
            let interval = try p.u16("Connection_Interval")
            let latency = try p.u16("Peripheral_Latency")
            let timeout = try p.u16("Supervision_Timeout")
            let sca = try p.u8("Central_Clock_Accuracy")
            if sub.rawValue == 0x29 { _ = try p.u8("Advertising_Handle"); _ = try p.u16("Sync_Handle") }
            try p.expectEnd(sub.name)
            return .leConnectionComplete(LEConnectionComplete(status: s, handle: h, role: role, peer: DeviceAddress(pa, pt),
                                                              localRPA: local, peerRPA: peerRPA, interval: interval, latency: latency,
                                                              supervisionTimeout: timeout, centralClockAccuracy: sca, enhanced: enhanced))
        case .advertisingReport:
            let n = Int(try p.u8("Num_Reports"))
            guard n >= 1 else { throw WireError.invalid(field: "Num_Reports", reason: "0 reports") }
            var reports: [AdvertisingReport] = []
            for _ in 0..<n {
                let t = try p.u8("Event_Type")
                let at = AddressType(rawValue: try p.u8("Address_Type"))
                let a = try BDAddress.read(&p, "Address")
                let dl = Int(try p.u8("Data_Length"))
                guard dl <= 31 else { throw WireError.invalid(field: "Data_Length", reason: "\(dl) > 31") }
                let d = try p.bytes(dl, "Data")
                let rssi = try p.i8("RSSI")
                reports.append(AdvertisingReport(eventType: AdvertisingReport.extendedType(legacy: t), legacyType: t,
                                                 address: DeviceAddress(a, at), rssi: rssi, data: d))
            }
            try p.expectEnd("LE Advertising Report")
            return .leAdvertisingReport(reports, extended: false)
        case .extendedAdvertisingReport:
            let n = Int(try p.u8("Num_Reports"))
            guard n >= 1 else { throw WireError.invalid(field: "Num_Reports", reason: "0 reports") }
            var reports: [AdvertisingReport] = []
            for _ in 0..<n {
                let t = try p.u16("Event_Type")
                let at = AddressType(rawValue: try p.u8("Address_Type"))
                let a = try BDAddress.read(&p, "Address")
                let pphy = try p.u8("Primary_PHY"), sphy = try p.u8("Secondary_PHY"), sid = try p.u8("Advertising_SID")
                let tx = try p.i8("TX_Power"), rssi = try p.i8("RSSI")
                let pi = try p.u16("Periodic_Advertising_Interval")
                let dat = AddressType(rawValue: try p.u8("Direct_Address_Type"))
                let da = try BDAddress.read(&p, "Direct_Address")
                let dl = Int(try p.u8("Data_Length"))
                let d = try p.bytes(dl, "Data")
                var rep = AdvertisingReport(eventType: t, legacyType: nil, address: DeviceAddress(a, at), rssi: rssi, data: d)
                rep.primaryPHY = pphy; rep.secondaryPHY = sphy; rep.sid = sid; rep.txPower = tx; rep.periodicInterval = pi
                if t & 0x04 != 0 { rep.directAddress = DeviceAddress(da, dat) }
                reports.append(rep)
            }
            try p.expectEnd("LE Extended Advertising Report")
            return .leAdvertisingReport(reports, extended: true)
        case .connectionUpdateComplete:
            let v = LEConnectionUpdateComplete(status: HCIStatus(rawValue: try p.u8("Status")), handle: try p.u16("Connection_Handle") & 0x0FFF,
                                               interval: try p.u16("Connection_Interval"), latency: try p.u16("Peripheral_Latency"),
                                               supervisionTimeout: try p.u16("Supervision_Timeout"))
            try p.expectEnd("LE Connection Update Complete")
            return .leConnectionUpdateComplete(v)
        case .dataLengthChange:
            let v = LEDataLengthChange(handle: try p.u16("Connection_Handle") & 0x0FFF, maxTxOctets: try p.u16("Max_TX_Octets"),
                                       maxTxTime: try p.u16("Max_TX_Time"), maxRxOctets: try p.u16("Max_RX_Octets"),
                                       maxRxTime: try p.u16("Max_RX_Time"))
            try p.expectEnd("LE Data Length Change")
            return .leDataLengthChange(v)
        default:
            return .leMeta(sub, p.rest())
        }
    }
}

// MARK: - Return parameters of the commands attled sends

/// Read Local Version Information return parameters (7.4.1).
public struct LocalVersion: Hashable, Sendable {
    public var hciVersion: UInt8
    public var hciRevision: UInt16
    public var lmpVersion: UInt8
    public var manufacturer: UInt16
    public var lmpSubversion: UInt16

    /// Decodes the return parameters; the leading Status byte is skipped, not checked.
    /// - Throws: `WireError.truncated` if fewer than 9 bytes are given.
    public static func decode(_ rp: [UInt8]) throws -> LocalVersion {
        var r = ByteReader(rp)
        _ = try r.u8("Status")
        return LocalVersion(hciVersion: try r.u8("HCI_Version"), hciRevision: try r.u16("HCI_Subversion"),
                            lmpVersion: try r.u8("LMP_Version"), manufacturer: try r.u16("Company_Identifier"),
                            lmpSubversion: try r.u16("LMP_Subversion"))
    }

    /// Core specification version name for an HCI/LMP version number (Assigned Numbers 2.1).
    public static func coreVersionName(_ v: UInt8) -> String {
        let names = ["1.0b", "1.1", "1.2", "2.0", "2.1", "3.0", "4.0", "4.1", "4.2", "5.0", "5.1", "5.2", "5.3", "5.4", "6.0", "6.1"]
        return Int(v) < names.count ? names[Int(v)] : "unknown (\(v))"
    }
}

/// LE Read Buffer Size (7.8.2) or Read Buffer Size (7.4.5) result: ACL payload size and count.
public struct BufferSize: Hashable, Sendable {
    public var aclLength: UInt16
    public var aclPackets: UInt16

    /// Decodes LE Read Buffer Size return parameters (7.8.2); the Status byte is skipped, not checked.
    /// A length or count of 0 means the controller shares the BR/EDR buffers.
    /// - Throws: `WireError.truncated` if fewer than 4 bytes are given.
    public static func decodeLE(_ rp: [UInt8]) throws -> BufferSize {
        var r = ByteReader(rp)
        _ = try r.u8("Status")
        return BufferSize(aclLength: try r.u16("LE_ACL_Data_Packet_Length"), aclPackets: UInt16(try r.u8("Total_Num_LE_ACL_Data_Packets")))
    }

    /// Decodes Read Buffer Size return parameters (7.4.5), keeping the ACL
    /// length and count; the Status byte is skipped and the synchronous fields ignored.
    /// - Throws: `WireError.truncated` if fewer than 6 bytes are given.
    public static func decodeBREDR(_ rp: [UInt8]) throws -> BufferSize {
        var r = ByteReader(rp)
        _ = try r.u8("Status")
        let len = try r.u16("ACL_Data_Packet_Length")
        _ = try r.u8("Synchronous_Data_Packet_Length")
        let n = try r.u16("Total_Num_ACL_Data_Packets")
        return BufferSize(aclLength: len, aclPackets: n)
    }
}
