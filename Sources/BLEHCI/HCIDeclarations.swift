import BLEWire

/// A command's row of the opcode table: its opcode and its name in the
/// specification (Core Vol 4 Part E 7).
public struct HCICommandDeclaration: Sendable {
    public let opcode: HCIOpcode
    public let name: String
    public init(_ opcode: UInt16, _ name: String) { self.opcode = HCIOpcode(rawValue: opcode); self.name = name }
}

/// An HCI command declared once: its row and its parameters in spec order.
/// Encoding (`command`), decoding (`decode`) and the trace come from `fields`.
public protocol HCIDeclaredCommand: Sendable {
    static var declaration: HCICommandDeclaration { get }
    /// The declaration of its return parameters after Status, when attled
    /// reads them (nil: the trace shows them as hex).
    static var returnParameters: (any HCIReturnParameters.Type)? { get }
    init()
    mutating func fields(_ f: inout some HCIFieldWalker) throws
}

/// Return parameters of a command (after the Status octet), declared like a packet.
public protocol HCIReturnParameters: Sendable {
    init()
    mutating func fields(_ f: inout some HCIFieldWalker) throws
}

extension HCIDeclaredCommand {
    public static var returnParameters: (any HCIReturnParameters.Type)? { nil }
    public static var opcode: HCIOpcode { declaration.opcode }

    /// The command packet.
    public var command: HCICommand {
        var w = HCIFieldWriter()
        var copy = self
        try? copy.fields(&w) // the writer never throws
        return HCICommand(Self.opcode, w.w.bytes)
    }

    /// Decodes the command's parameters.
    /// - Throws: `WireError` naming the field when they are short, too long or invalid.
    public static func decode(_ parameters: [UInt8]) throws -> Self {
        var r = HCIFieldReader(parameters)
        var v = Self()
        try v.fields(&r)
        try r.r.expectEnd(declaration.name)
        return v
    }

    /// The trace's lines for the parameters.
    static func traceLines(_ parameters: [UInt8], showKeys: Bool) throws -> [String] {
        var v = try decode(parameters)
        var p = HCIFieldPrinter(showKeys: showKeys)
        try v.fields(&p)
        return p.lines
    }

    /// Where the parameters' `secret` fields lie (`HCIFieldReader.secretRanges`).
    static func secretRanges(_ parameters: [UInt8]) -> [Range<Int>] {
        HCIFieldReader.secretRanges(parameters) { r in var v = Self(); try v.fields(&r) }
    }
}

extension HCIReturnParameters {
    /// Decodes return parameters that start with Status (skipped, not
    /// checked). Extra octets at the end are allowed (later versions of a
    /// command may add fields).
    /// - Throws: `WireError.truncated` when a field is missing.
    public static func decodeReturn(_ rp: [UInt8]) throws -> Self {
        var r = HCIFieldReader(Array(rp.dropFirst()))
        guard !rp.isEmpty else { throw WireError.truncated(field: "Status", needed: 1, available: 0) }
        var v = Self()
        try v.fields(&r)
        return v
    }

    static func traceLines(_ rp: [UInt8]) throws -> [String] {
        var v = try decodeReturn(rp)
        var p = HCIFieldPrinter()
        try v.fields(&p)
        return p.lines
    }
}

/// An event's (or LE subevent's) row of the event table.
public struct HCIEventDeclaration: Sendable {
    public let code: HCIEventCode
    /// For an LE Meta event, its subevent.
    public let subevent: LESubevent?
    public let name: String
    public init(_ code: UInt8, _ name: String) { self.code = HCIEventCode(rawValue: code); subevent = nil; self.name = name }
    public init(le subevent: UInt8, _ name: String) {
        code = .leMeta; self.subevent = LESubevent(rawValue: subevent); self.name = name
    }
}

/// An HCI event declared once: its row and its parameters in spec order
/// (after the subevent code for LE Meta events).
public protocol HCIDeclaredEvent: Sendable {
    static var declaration: HCIEventDeclaration { get }
    init()
    mutating func fields(_ f: inout some HCIFieldWalker) throws
    /// The trace's title line (nil: the subevent's name, or none) and lines
    /// for the parameters: one per field, unless the event says more by
    /// hand (Command Complete and Status name their command; advertising
    /// reports are described by `describeReport`, BLEGAP knowing their data).
    static func traceLines(_ parameters: [UInt8], showKeys: Bool, describeReport: ((AdvertisingReport) -> [String])?) throws
        -> (title: String?, lines: [String])
}

/// An event `HCIEvent` has a case for; the others pass through `HCIEvent.decode` with their bytes.
public protocol HCITypedEvent: HCIDeclaredEvent {
    var event: HCIEvent { get }
}

extension HCIDeclaredEvent {
    /// Decodes the event's parameters (after the subevent code for LE Meta events).
    /// - Throws: `WireError` naming the field when they are short, too long or invalid.
    public static func decode(_ parameters: [UInt8]) throws -> Self {
        var r = HCIFieldReader(parameters)
        var v = Self()
        try v.fields(&r)
        try r.r.expectEnd(declaration.name)
        return v
    }

    /// The event's packet (after the H4 indicator), for tests and peers.
    public var encoded: [UInt8] {
        var w = HCIFieldWriter()
        var copy = self
        try? copy.fields(&w)
        let d = Self.declaration
        let p = (d.subevent.map { [$0.rawValue] } ?? []) + w.w.bytes
        return [d.code.rawValue, UInt8(truncatingIfNeeded: p.count)] + p
    }

    public static func traceLines(_ parameters: [UInt8], showKeys: Bool, describeReport: ((AdvertisingReport) -> [String])?) throws
        -> (title: String?, lines: [String]) {
        (nil, try fieldLines(parameters, showKeys: showKeys))
    }

    /// One line per field, as the declaration prints them.
    static func fieldLines(_ parameters: [UInt8], showKeys: Bool) throws -> [String] {
        var v = try decode(parameters)
        var p = HCIFieldPrinter(showKeys: showKeys)
        try v.fields(&p)
        return p.lines
    }
}

extension HCIDeclaredEvent {
    /// Where the parameters' `secret` fields lie (`HCIFieldReader.secretRanges`).
    static func secretRanges(_ parameters: [UInt8]) -> [Range<Int>] {
        HCIFieldReader.secretRanges(parameters) { r in var v = Self(); try v.fields(&r) }
    }
}

extension HCIFieldReader {
    /// The byte ranges of `bytes` that hold the fields declared `secret`, as
    /// `walk` reads them with their declaration: what a hex dump masks. Bytes
    /// that do not match the declaration (cut short, or longer) are masked
    /// from its first secret field to their end.
    static func secretRanges(_ bytes: [UInt8], _ walk: (inout HCIFieldReader) throws -> Void) -> [Range<Int>] {
        var r = HCIFieldReader(bytes)
        do {
            try walk(&r)
            try r.r.expectEnd("parameters")
            return r.secrets
        } catch {
            return r.secrets.first.map { [$0.lowerBound..<bytes.count] } ?? []
        }
    }
}

extension HCITypedEvent {
    static func decodeEvent(_ parameters: [UInt8]) throws -> HCIEvent { try decode(parameters).event }
}

/// The tables: every HCI command and event attled sends or understands, each
/// declared once (its struct); names, the decoder and the tracer come from here.
public enum HCI {
    /// The declared commands.
    public static let commands: [any HCIDeclaredCommand.Type] = [
        // Link control, controller and baseband, informational, status (7.1-7.5)
        Disconnect.self, SetEventMask.self, Reset.self, ReadLocalVersion.self, ReadLocalSupportedCommands.self,
        ReadLocalSupportedFeatures.self, ReadBufferSize.self, ReadBDADDR.self, ReadRSSI.self,
        // LE controller (7.8)
        LESetEventMask.self, LEReadBufferSize.self, LEReadLocalSupportedFeatures.self, LESetRandomAddress.self,
        LESetAdvertisingParameters.self, LESetAdvertisingData.self, LESetScanResponseData.self, LESetAdvertisingEnable.self,
        LEScanParameters.self, LESetScanEnable.self, LECreateConnection.self, LECreateConnectionCancel.self,
        LEReadFilterAcceptListSize.self, LEClearFilterAcceptList.self, LEAddDeviceToFilterAcceptList.self,
        LERemoveDeviceFromFilterAcceptList.self, LEConnectionUpdate.self, LEReadRemoteFeatures.self,
        LEEnableEncryption.self, LELongTermKeyRequestReply.self, LELongTermKeyRequestNegativeReply.self,
        LEReadSupportedStates.self, LESetDataLength.self, LESetPHY.self,
        LESetExtendedScanParameters.self, LESetExtendedScanEnable.self, LEExtendedCreateConnection.self,
        LESetAdvertisingSetRandomAddress.self, LESetExtendedAdvertisingParameters.self, LESetExtendedAdvertisingData.self,
        LESetExtendedScanResponseData.self, LESetExtendedAdvertisingEnable.self, LERemoveAdvertisingSet.self,
    ]

    /// The declared events; LE Meta's subevents are in `subevents`.
    public static let events: [any HCIDeclaredEvent.Type] = [
        DisconnectionComplete.self, EncryptionChangeEvent.self, ReadRemoteVersionComplete.self, CommandComplete.self,
        CommandStatus.self, HardwareError.self, NumberOfCompletedPackets.self, DataBufferOverflow.self,
        EncryptionKeyRefreshComplete.self, LEMeta.self, Vendor.self,
    ]

    /// The declared LE Meta subevents (7.7.65).
    public static let subevents: [any HCIDeclaredEvent.Type] = [
        LEConnectionComplete.self, LEAdvertisingReport.self, LEConnectionUpdateComplete.self, LEReadRemoteFeaturesComplete.self,
        LELongTermKeyRequest.self, LERemoteConnectionParameterRequest.self, LEDataLengthChange.self,
        LEEnhancedConnectionComplete.self, LEDirectedAdvertisingReport.self, LEPHYUpdateComplete.self,
        LEExtendedAdvertisingReport.self, LEScanTimeout.self, LEAdvertisingSetTerminated.self,
        LEChannelSelectionAlgorithm.self, LEEnhancedConnectionCompleteV2.self,
    ]

    static let commandTable: [UInt16: any HCIDeclaredCommand.Type] = Dictionary(
        commands.map { ($0.declaration.opcode.rawValue, $0) }, uniquingKeysWith: { first, _ in first })
    static let eventTable: [UInt8: any HCIDeclaredEvent.Type] = Dictionary(
        events.map { ($0.declaration.code.rawValue, $0) }, uniquingKeysWith: { first, _ in first })
    static let subeventTable: [UInt8: any HCIDeclaredEvent.Type] = Dictionary(
        subevents.compactMap { d in d.declaration.subevent.map { ($0.rawValue, d) } }, uniquingKeysWith: { first, _ in first })
}
