import BLEWire

/// Event codes (Core Vol 4 Part E 7.7). Open; names come from the declarations (`HCI.events`).
public struct HCIEventCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt8
    /// Any event code byte, including undeclared ones.
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    public static let disconnectionComplete = DisconnectionComplete.declaration.code
    public static let encryptionChange = HCI.EncryptionChangeEvent.declaration.code
    public static let readRemoteVersionComplete = HCI.ReadRemoteVersionComplete.declaration.code
    public static let commandComplete = CommandComplete.declaration.code
    public static let commandStatus = CommandStatus.declaration.code
    public static let hardwareError = HCI.HardwareError.declaration.code
    public static let numberOfCompletedPackets = HCI.NumberOfCompletedPackets.declaration.code
    public static let dataBufferOverflow = HCI.DataBufferOverflow.declaration.code
    public static let encryptionKeyRefreshComplete = HCI.EncryptionKeyRefreshComplete.declaration.code
    public static let leMeta = HCIEventCode(rawValue: 0x3E)
    public static let vendor = HCI.Vendor.declaration.code

    public var name: String { HCI.eventTable[rawValue]?.declaration.name ?? "Unknown Event" }
    public var description: String { "\(name) (0x\(Hex.int(rawValue, width: 2)))" }
}

/// LE Meta subevent codes (Core Vol 4 Part E 7.7.65). Open; names come from the declarations (`HCI.subevents`).
public struct LESubevent: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt8
    /// Any subevent code byte, including undeclared ones.
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    public static let connectionComplete = LESubevent(rawValue: 0x01)
    public static let advertisingReport = LESubevent(rawValue: 0x02)
    public static let connectionUpdateComplete = LESubevent(rawValue: 0x03)
    public static let readRemoteFeaturesComplete = LESubevent(rawValue: 0x04)
    public static let longTermKeyRequest = LESubevent(rawValue: 0x05)
    public static let dataLengthChange = LESubevent(rawValue: 0x07)
    public static let enhancedConnectionComplete = LESubevent(rawValue: 0x0A)
    public static let phyUpdateComplete = LESubevent(rawValue: 0x0C)
    public static let extendedAdvertisingReport = LESubevent(rawValue: 0x0D)
    public static let channelSelectionAlgorithm = LESubevent(rawValue: 0x14)

    public var name: String { HCI.subeventTable[rawValue]?.declaration.name ?? "Unknown LE Subevent" }
    public var description: String { "\(name) (0x\(Hex.int(rawValue, width: 2)))" }
}

/// A decoded HCI event. Undeclared events and subevents, and declared ones
/// without a case here, pass through with their bytes (their declarations
/// decode them: `EncryptionChange.decode`, `LEPHYUpdateComplete.decode`).
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
    public struct HandleCount: Hashable, Sendable, HCIListEntry {
        public var handle: UInt16
        public var count: UInt16
        public init(handle: UInt16, count: UInt16) { self.handle = handle; self.count = count }
        public init() { self.init(handle: 0, count: 0) }
        public mutating func fields(_ f: inout some HCIFieldWalker) throws {
            try f.handle(&handle)
            try f.u16("Num_Completed_Packets", "Count", &count)
        }
    }

    /// Decodes an event packet (the bytes after the H4 indicator) by its
    /// declaration. Throws `WireError` on any length inconsistency; never traps.
    /// - Throws: `WireError` (truncated parameters, extra bytes, or a field the spec forbids such as 0 reports).
    public static func decode(_ bytes: [UInt8]) throws -> HCIEvent {
        var r = ByteReader(bytes)
        let code = HCIEventCode(rawValue: try r.u8("event code"))
        let len = Int(try r.u8("parameter length"))
        let params = try r.bytes(len, "event parameters")
        try r.expectEnd("event \(code)")
        if code == .leMeta {
            var p = ByteReader(params)
            let sub = LESubevent(rawValue: try p.u8("Subevent_Code"))
            let rest = p.rest()
            if let t = HCI.subeventTable[sub.rawValue] as? any HCITypedEvent.Type { return try t.decodeEvent(rest) }
            return .leMeta(sub, rest)
        }
        if let t = HCI.eventTable[code.rawValue] as? any HCITypedEvent.Type { return try t.decodeEvent(params) }
        return .other(code, params)
    }

    /// The trace's lines under an event's header (`bytes` after the H4
    /// indicator). Command Complete, Command Status and LE Meta events start
    /// with a line naming the command or subevent; the fields are indented
    /// two spaces under it. Advertising reports are described by
    /// `advertisingReport` (BLEGAP knows their data); secrets are masked
    /// unless `showKeys`.
    public static func traceFields(_ bytes: [UInt8], showKeys: Bool = false,
                                   advertisingReport: @escaping (AdvertisingReport) -> [String]) -> [String] {
        let i = "  "
        guard bytes.count >= 2 else { return [] }
        var params = Array(bytes.dropFirst(2))
        var title: String? = nil
        let declared: (any HCIDeclaredEvent.Type)?
        if bytes[0] == HCIEventCode.leMeta.rawValue, let s = params.first {
            let sub = LESubevent(rawValue: s)
            title = "\(sub.name) (0x\(Hex.int(s, width: 2)))"
            declared = HCI.subeventTable[s]
            params.removeFirst()
        } else {
            declared = HCI.eventTable[bytes[0]]
        }
        let head = { (t: String?) in t.map { [$0] } ?? [] }
        guard let d = declared else { return head(title) + Hex.lines(params).map { i + $0 } }
        do {
            let (t, lines) = try d.traceLines(params, showKeys: showKeys, describeReport: advertisingReport)
            return head(t ?? title) + lines.map { i + $0 }
        } catch {
            return head(title) + ["\(i)malformed: \(error)"] + Hex.lines(params).map { i + $0 }
        }
    }
}

extension HCIEvent {
    /// The byte ranges of an event packet (`bytes` after the H4 indicator)
    /// that hold fields its declaration marks `secret` (LE Long Term Key
    /// Request's Rand and EDIV): what a hex dump masks. Parameters that do not
    /// match the declaration are masked from its first secret field on.
    public static func secretRanges(_ bytes: [UInt8]) -> [Range<Int>] {
        guard bytes.count >= 2 else { return [] }
        let declared: (any HCIDeclaredEvent.Type)?, start: Int
        if bytes[0] == HCIEventCode.leMeta.rawValue {
            guard bytes.count >= 3 else { return [] }
            declared = HCI.subeventTable[bytes[2]]; start = 3
        } else {
            declared = HCI.eventTable[bytes[0]]; start = 2
        }
        guard let d = declared else { return [] }
        return d.secretRanges(Array(bytes[start...])).map { $0.lowerBound + start..<$0.upperBound + start }
    }
}

// MARK: - Return parameters of the commands attled reads

/// Read Local Version Information return parameters (7.4.1).
public struct LocalVersion: Hashable, HCIReturnParameters {
    public var hciVersion: UInt8
    public var hciRevision: UInt16
    public var lmpVersion: UInt8
    public var manufacturer: UInt16
    public var lmpSubversion: UInt16

    public init(hciVersion: UInt8, hciRevision: UInt16, lmpVersion: UInt8, manufacturer: UInt16, lmpSubversion: UInt16) {
        self.hciVersion = hciVersion; self.hciRevision = hciRevision; self.lmpVersion = lmpVersion
        self.manufacturer = manufacturer; self.lmpSubversion = lmpSubversion
    }
    public init() { self.init(hciVersion: 0, hciRevision: 0, lmpVersion: 0, manufacturer: 0, lmpSubversion: 0) }

    public mutating func fields(_ f: inout some HCIFieldWalker) throws {
        let version = { (v: UInt8) in "\(LocalVersion.coreVersionName(v)) (\(HCIShow.h8(v)))" }
        try f.u8("HCI_Version", "HCI version", &hciVersion, version)
        try f.u16("HCI_Subversion", .after("HCI version", " - revision "), &hciRevision, HCIShow.h16)
        try f.u8("LMP_Version", "LMP version", &lmpVersion, version)
        try f.u16("Company_Identifier", "Manufacturer", &manufacturer, HCIShow.h16)
        try f.u16("LMP_Subversion", .after("LMP version", " - subversion "), &lmpSubversion, HCIShow.h16)
    }

    /// Decodes the return parameters; the leading Status byte is skipped, not checked.
    /// - Throws: `WireError.truncated` if fewer than 9 bytes are given.
    public static func decode(_ rp: [UInt8]) throws -> LocalVersion { try decodeReturn(rp) }

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

    /// LE Read Buffer Size's return parameters (7.8.2).
    public struct LE: HCIReturnParameters {
        public var length: UInt16 = 0
        public var packets: UInt8 = 0
        public init() {}
        public mutating func fields(_ f: inout some HCIFieldWalker) throws {
            try f.u16("LE_ACL_Data_Packet_Length", "Data packet length", &length)
            try f.u8("Total_Num_LE_ACL_Data_Packets", "Num data packets", &packets, HCIShow.dec)
        }
    }

    /// Read Buffer Size's return parameters (7.4.5), as far as the ACL count
    /// (the synchronous packet count after it is not read).
    public struct BREDR: HCIReturnParameters {
        public var length: UInt16 = 0
        public var syncLength: UInt8 = 0
        public var packets: UInt16 = 0
        public init() {}
        public mutating func fields(_ f: inout some HCIFieldWalker) throws {
            try f.u16("ACL_Data_Packet_Length", "ACL MTU", &length)
            try f.u8("Synchronous_Data_Packet_Length", .hidden, &syncLength)
            try f.u16("Total_Num_ACL_Data_Packets", .after("ACL MTU", " ACL max packet: "), &packets)
        }
    }

    /// Decodes LE Read Buffer Size return parameters (7.8.2); the Status byte is skipped, not checked.
    /// A length or count of 0 means the controller shares the BR/EDR buffers.
    /// - Throws: `WireError.truncated` if fewer than 4 bytes are given.
    public static func decodeLE(_ rp: [UInt8]) throws -> BufferSize {
        let v = try LE.decodeReturn(rp)
        return BufferSize(aclLength: v.length, aclPackets: UInt16(v.packets))
    }

    /// Decodes Read Buffer Size return parameters (7.4.5), keeping the ACL
    /// length and count; the Status byte is skipped and the synchronous fields ignored.
    /// - Throws: `WireError.truncated` if fewer than 6 bytes are given.
    public static func decodeBREDR(_ rp: [UInt8]) throws -> BufferSize {
        let v = try BREDR.decodeReturn(rp)
        return BufferSize(aclLength: v.length, aclPackets: v.packets)
    }
}
