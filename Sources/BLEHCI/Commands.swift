import BLEWire
import BLETransport

/// An HCI command packet: opcode and parameters (Core Vol 4 Part E 5.4.1).
public struct HCICommand: Hashable, Sendable {
    public var opcode: HCIOpcode
    public var parameters: [UInt8]
    /// A command from its opcode and already-encoded parameters.
    public init(_ opcode: HCIOpcode, _ parameters: [UInt8] = []) {
        self.opcode = opcode
        self.parameters = parameters
    }

    /// Bytes after the H4 indicator: opcode (LE16), parameter length, parameters.
    public var encoded: [UInt8] {
        var w = ByteWriter(capacity: 3 + parameters.count)
        w.u16(opcode.rawValue)
        w.u8(UInt8(truncatingIfNeeded: parameters.count))
        w.append(parameters)
        return w.bytes
    }

    public var packet: HCIPacket { HCIPacket(.command, encoded) }

    /// Parses a command packet (for the tracer and for tests).
    /// - Throws: `WireError` if the parameters are shorter than their length byte or followed by extra bytes.
    public static func decode(_ bytes: [UInt8]) throws -> HCICommand {
        var r = ByteReader(bytes)
        let op = HCIOpcode(rawValue: try r.u16("opcode"))
        let len = Int(try r.u8("parameter length"))
        let params = try r.bytes(len, "parameters")
        try r.expectEnd("command \(op)")
        return HCICommand(op, params)
    }
}

// MARK: - Commands without parameters (Core Vol 4 Part E 7.3.2, 7.4.x, 7.8.x)

extension HCICommand {
    public static var reset: HCICommand { HCICommand(.reset) }
    public static var readLocalVersion: HCICommand { HCICommand(.readLocalVersion) }
    public static var readLocalSupportedCommands: HCICommand { HCICommand(.readLocalSupportedCommands) }
    public static var readLocalSupportedFeatures: HCICommand { HCICommand(.readLocalSupportedFeatures) }
    public static var readBufferSize: HCICommand { HCICommand(.readBufferSize) }
    public static var readBDADDR: HCICommand { HCICommand(.readBDADDR) }
    public static var leReadBufferSize: HCICommand { HCICommand(.leReadBufferSize) }
    public static var leReadLocalSupportedFeatures: HCICommand { HCICommand(.leReadLocalSupportedFeatures) }
    public static var leCreateConnectionCancel: HCICommand { HCICommand(.leCreateConnectionCancel) }

    /// Set Event Mask (7.3.1): 8-byte mask.
    public static func setEventMask(_ mask: UInt64) -> HCICommand {
        var w = ByteWriter(); w.u64(mask); return HCICommand(.setEventMask, w.bytes)
    }
    /// LE Set Event Mask (7.8.1): 8-byte mask.
    public static func leSetEventMask(_ mask: UInt64) -> HCICommand {
        var w = ByteWriter(); w.u64(mask); return HCICommand(.leSetEventMask, w.bytes)
    }
    /// LE Set Random Address (7.8.4).
    public static func leSetRandomAddress(_ a: BDAddress) -> HCICommand {
        HCICommand(.leSetRandomAddress, a.bytes)
    }
    /// Disconnect (7.1.6): handle and reason.
    public static func disconnect(handle: UInt16, reason: HCIStatus = .remoteUserTerminated) -> HCICommand {
        var w = ByteWriter(); w.u16(handle); w.u8(reason.rawValue); return HCICommand(.disconnect, w.bytes)
    }
    /// LE Set Scan Enable (7.8.11).
    public static func leSetScanEnable(_ enable: Bool, filterDuplicates: Bool) -> HCICommand {
        HCICommand(.leSetScanEnable, [enable ? 1 : 0, filterDuplicates ? 1 : 0])
    }
    /// LE Set Extended Scan Enable (7.8.65): enable, filter duplicates, duration (10 ms), period (1.28 s).
    public static func leSetExtendedScanEnable(_ enable: Bool, filterDuplicates: Bool, duration: UInt16 = 0, period: UInt16 = 0) -> HCICommand {
        var w = ByteWriter()
        w.u8(enable ? 1 : 0); w.u8(filterDuplicates ? 1 : 0); w.u16(duration); w.u16(period)
        return HCICommand(.leSetExtendedScanEnable, w.bytes)
    }
}

/// Event mask bits this host asks for (Core Vol 4 Part E 7.3.1 and 7.8.1).
public enum EventMasks {
    /// Disconnection Complete (bit 4), Encryption Change (7), Read Remote Version Complete (11),
    /// Hardware Error (15), Data Buffer Overflow (25), Encryption Key Refresh (47), LE Meta (61).
    public static let standard: UInt64 = (1 << 4) | (1 << 7) | (1 << 11) | (1 << 15) | (1 << 25) | (1 << 47) | (1 << 61)
    /// LE Connection Complete (0), Advertising Report (1), Connection Update Complete (2),
    /// Remote Features (3), Data Length Change (6), Enhanced Connection Complete (9),
    /// PHY Update Complete (11), Extended Advertising Report (12), Channel Selection Algorithm (19).
    public static let le: UInt64 = {
        // Bit by bit: Swift 6.0's type checker gives up on one nine-term expression.
        let bits: [UInt64] = [0, 1, 2, 3, 6, 9, 11, 12, 19]
        return bits.reduce(UInt64(0)) { $0 | (UInt64(1) << $1) }
    }()
}

/// LE Set Scan Parameters (Core Vol 4 Part E 7.8.10). Interval and window in 0.625 ms units.
public struct LEScanParameters: Hashable, Sendable {
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

    public var command: HCICommand {
        var w = ByteWriter()
        w.u8(active ? 1 : 0); w.u16(interval); w.u16(window); w.u8(ownAddressType.rawValue); w.u8(filterPolicy)
        return HCICommand(.leSetScanParameters, w.bytes)
    }

    /// Decodes the parameters of LE Set Scan Parameters (7.8.10), e.g. as seen by the tracer.
    /// - Throws: `WireError` if the parameters are not exactly 7 bytes.
    public static func decode(_ p: [UInt8]) throws -> LEScanParameters {
        var r = ByteReader(p)
        let v = LEScanParameters(active: try r.u8("LE_Scan_Type") == 1, interval: try r.u16("LE_Scan_Interval"),
                                 window: try r.u16("LE_Scan_Window"), ownAddressType: AddressType(rawValue: try r.u8("Own_Address_Type")),
                                 filterPolicy: try r.u8("Scanning_Filter_Policy"))
        try r.expectEnd("LE Set Scan Parameters")
        return v
    }

    /// As the extended command (7.8.64), 1M PHY only.
    public var extendedCommand: HCICommand {
        var w = ByteWriter()
        w.u8(ownAddressType.rawValue); w.u8(filterPolicy); w.u8(0x01) // PHYs: LE 1M
        w.u8(active ? 1 : 0); w.u16(interval); w.u16(window)
        return HCICommand(.leSetExtendedScanParameters, w.bytes)
    }

    /// Decodes LE Set Extended Scan Parameters, returning the first PHY's settings.
    /// - Throws: `WireError` if a PHY's block is truncated, bytes are left over, or no PHY bit is set.
    public static func decodeExtended(_ p: [UInt8]) throws -> (params: LEScanParameters, phys: UInt8) {
        var r = ByteReader(p)
        let own = AddressType(rawValue: try r.u8("Own_Address_Type"))
        let filter = try r.u8("Scanning_Filter_Policy")
        let phys = try r.u8("Scanning_PHYs")
        var first: LEScanParameters? = nil
        for bit in 0..<8 where phys & (1 << UInt8(bit)) != 0 {
            let v = LEScanParameters(active: try r.u8("Scan_Type") == 1, interval: try r.u16("Scan_Interval"),
                                     window: try r.u16("Scan_Window"), ownAddressType: own, filterPolicy: filter)
            if first == nil { first = v }
        }
        try r.expectEnd("LE Set Extended Scan Parameters")
        guard let f = first else { throw WireError.invalid(field: "Scanning_PHYs", reason: "no PHY selected") }
        return (f, phys)
    }
}

/// Connection parameters (Core Vol 4 Part E 7.8.12/7.8.18). Intervals in 1.25 ms, timeout in 10 ms.
public struct ConnectionParameters: Hashable, Sendable {
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

    /// For one-shot jobs (a CLI run): 7.5-15 ms, no latency, 2 s supervision
    /// timeout. Every ATT round trip costs one or two connection intervals on
    /// real radio, so a short job asks for the shortest interval.
    public static let oneShot = ConnectionParameters(intervalMin: 0x0006, intervalMax: 0x000C, latency: 0, supervisionTimeout: 0x00C8)

    /// For a link kept up while idle (the gateway, after a quiet spell):
    /// 30 ms, no peripheral latency, 4 s supervision timeout. LED lamps are
    /// mains-powered, so the idle policy is chosen for the first command's
    /// latency: a command's writes go out before the update back to the
    /// short interval takes effect (its instant is at least 6 events away),
    /// so a pycom colour (3 Write Requests) costs 3 x 30 = 90 ms of air time
    /// on an idle link (`make bench` reports the model; it was up to 3 x 200
    /// ms plus 4 skipped events at 100-200 ms with latency 4).
    public static let idle = ConnectionParameters(intervalMin: 0x0018, intervalMax: 0x0018, latency: 0, supervisionTimeout: 0x0190)

    /// The range checks of Core Vol 4 Part E 7.8.12: interval 7.5 ms..4 s, latency <= 499,
    /// timeout 100 ms..32 s and longer than (1 + latency) * interval_max * 2.
    public var isValid: Bool {
        guard intervalMin >= 6, intervalMax <= 3200, intervalMin <= intervalMax else { return false }
        guard latency <= 499, supervisionTimeout >= 10, supervisionTimeout <= 3200 else { return false }
        // timeout (10 ms units) * 10 > (1 + latency) * intervalMax (1.25 ms units) * 1.25 * 2
        return UInt32(supervisionTimeout) * 4 > (1 + UInt32(latency)) * UInt32(intervalMax)
    }

    func write(_ w: inout ByteWriter) {
        w.u16(intervalMin); w.u16(intervalMax); w.u16(latency); w.u16(supervisionTimeout)
        w.u16(minCELength); w.u16(maxCELength)
    }

    static func read(_ r: inout ByteReader) throws -> ConnectionParameters {
        ConnectionParameters(intervalMin: try r.u16("Connection_Interval_Min"), intervalMax: try r.u16("Connection_Interval_Max"),
                             latency: try r.u16("Max_Latency"), supervisionTimeout: try r.u16("Supervision_Timeout"),
                             minCELength: try r.u16("Min_CE_Length"), maxCELength: try r.u16("Max_CE_Length"))
    }
}

/// LE Create Connection (Core Vol 4 Part E 7.8.12).
public struct LECreateConnection: Hashable, Sendable {
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

    public var command: HCICommand {
        var w = ByteWriter(capacity: 25)
        w.u16(scanInterval); w.u16(scanWindow); w.u8(filterPolicy)
        w.u8(peer.type.rawValue); peer.address.write(&w); w.u8(ownAddressType.rawValue)
        connection.write(&w)
        return HCICommand(.leCreateConnection, w.bytes)
    }

    /// Decodes the parameters of LE Create Connection (7.8.12).
    /// - Throws: `WireError` if the parameters are not exactly 25 bytes.
    public static func decode(_ p: [UInt8]) throws -> LECreateConnection {
        var r = ByteReader(p)
        let si = try r.u16("LE_Scan_Interval"), sw = try r.u16("LE_Scan_Window"), fp = try r.u8("Initiator_Filter_Policy")
        let pt = AddressType(rawValue: try r.u8("Peer_Address_Type"))
        let pa = try BDAddress.read(&r, "Peer_Address")
        let own = AddressType(rawValue: try r.u8("Own_Address_Type"))
        let c = try ConnectionParameters.read(&r)
        try r.expectEnd("LE Create Connection")
        return LECreateConnection(peer: DeviceAddress(pa, pt), ownAddressType: own, scanInterval: si, scanWindow: sw, filterPolicy: fp, connection: c)
    }

    /// As LE Extended Create Connection (7.8.66), 1M PHY only.
    public var extendedCommand: HCICommand {
        var w = ByteWriter(capacity: 26)
        w.u8(filterPolicy); w.u8(ownAddressType.rawValue); w.u8(peer.type.rawValue); peer.address.write(&w)
        w.u8(0x01) // Initiating_PHYs: LE 1M
        w.u16(scanInterval); w.u16(scanWindow); connection.write(&w)
        return HCICommand(.leExtendedCreateConnection, w.bytes)
    }

    /// Decodes LE Extended Create Connection (7.8.66), keeping the first initiating PHY's parameters.
    /// - Throws: `WireError` if a PHY's block is truncated, bytes are left over, or no PHY bit is set.
    public static func decodeExtended(_ p: [UInt8]) throws -> LECreateConnection {
        var r = ByteReader(p)
        let fp = try r.u8("Initiator_Filter_Policy")
        let own = AddressType(rawValue: try r.u8("Own_Address_Type"))
        let pt = AddressType(rawValue: try r.u8("Peer_Address_Type"))
        let pa = try BDAddress.read(&r, "Peer_Address")
        let phys = try r.u8("Initiating_PHYs")
        var first: LECreateConnection? = nil
        for bit in 0..<8 where phys & (1 << UInt8(bit)) != 0 {
            let si = try r.u16("Scan_Interval"), sw = try r.u16("Scan_Window")
            let c = try ConnectionParameters.read(&r)
            if first == nil {
                first = LECreateConnection(peer: DeviceAddress(pa, pt), ownAddressType: own, scanInterval: si, scanWindow: sw, filterPolicy: fp, connection: c)
            }
        }
        try r.expectEnd("LE Extended Create Connection")
        guard let f = first else { throw WireError.invalid(field: "Initiating_PHYs", reason: "no PHY selected") }
        return f
    }
}

/// LE Connection Update (Core Vol 4 Part E 7.8.18).
public struct LEConnectionUpdate: Hashable, Sendable {
    public var handle: UInt16
    public var parameters: ConnectionParameters
    /// An update of connection `handle` to `parameters`.
    public init(handle: UInt16, parameters: ConnectionParameters) {
        self.handle = handle; self.parameters = parameters
    }
    public var command: HCICommand {
        var w = ByteWriter(); w.u16(handle); parameters.write(&w)
        return HCICommand(.leConnectionUpdate, w.bytes)
    }
    /// Decodes the parameters of LE Connection Update (7.8.18).
    /// - Throws: `WireError` if the parameters are not exactly 14 bytes.
    public static func decode(_ p: [UInt8]) throws -> LEConnectionUpdate {
        var r = ByteReader(p)
        let h = try r.u16("Connection_Handle")
        let c = try ConnectionParameters.read(&r)
        try r.expectEnd("LE Connection Update")
        return LEConnectionUpdate(handle: h, parameters: c)
    }
}
