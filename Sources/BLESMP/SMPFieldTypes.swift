import BLEWire

// The SMP PDUs' field types (Core Vol 3 Part H 3.5, 3.6): failure reasons,
// IO capabilities, AuthReq, key distribution, pairing parameters.

/// Pairing Failed reasons (Core Vol 3 Part H 3.5.5, Table 3.7). Open: an
/// unknown reason survives and prints as hex.
public struct PairingFailedReason: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt8
    /// Any reason byte, including ones not named below.
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    public static let passkeyEntryFailed = PairingFailedReason(rawValue: 0x01)
    public static let oobNotAvailable = PairingFailedReason(rawValue: 0x02)
    public static let authenticationRequirements = PairingFailedReason(rawValue: 0x03)
    public static let confirmValueFailed = PairingFailedReason(rawValue: 0x04)
    public static let pairingNotSupported = PairingFailedReason(rawValue: 0x05)
    public static let encryptionKeySize = PairingFailedReason(rawValue: 0x06)
    public static let commandNotSupported = PairingFailedReason(rawValue: 0x07)
    public static let unspecifiedReason = PairingFailedReason(rawValue: 0x08)
    public static let repeatedAttempts = PairingFailedReason(rawValue: 0x09)
    public static let invalidParameters = PairingFailedReason(rawValue: 0x0A)
    public static let dhKeyCheckFailed = PairingFailedReason(rawValue: 0x0B)
    public static let numericComparisonFailed = PairingFailedReason(rawValue: 0x0C)
    public static let brEdrPairingInProgress = PairingFailedReason(rawValue: 0x0D)
    public static let crossTransportKeyNotAllowed = PairingFailedReason(rawValue: 0x0E)
    public static let keyRejected = PairingFailedReason(rawValue: 0x0F)
    public static let busy = PairingFailedReason(rawValue: 0x10)

    public static let names: [UInt8: String] = [
        0x01: "Passkey Entry Failed", 0x02: "OOB Not Available", 0x03: "Authentication Requirements",
        0x04: "Confirm Value Failed", 0x05: "Pairing Not Supported", 0x06: "Encryption Key Size",
        0x07: "Command Not Supported", 0x08: "Unspecified Reason", 0x09: "Repeated Attempts",
        0x0A: "Invalid Parameters", 0x0B: "DHKey Check Failed", 0x0C: "Numeric Comparison Failed",
        0x0D: "BR/EDR Pairing In Progress", 0x0E: "Cross-transport Key Derivation/Generation Not Allowed",
        0x0F: "Key Rejected", 0x10: "Busy",
    ]

    public var name: String { Self.names[rawValue] ?? "Unknown reason" }
    public var description: String { "\(name) (0x\(Hex.int(rawValue, width: 2)))" }
}

/// IO Capability (3.5.1, Table 3.4). Open: reserved values survive.
public struct IOCapability: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt8
    /// Any IO Capability byte, reserved values included.
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    public static let displayOnly = IOCapability(rawValue: 0x00)
    public static let displayYesNo = IOCapability(rawValue: 0x01)
    public static let keyboardOnly = IOCapability(rawValue: 0x02)
    public static let noInputNoOutput = IOCapability(rawValue: 0x03)
    public static let keyboardDisplay = IOCapability(rawValue: 0x04)

    public var isReserved: Bool { rawValue > 0x04 }
    public var description: String {
        switch rawValue {
        case 0x00: return "DisplayOnly"
        case 0x01: return "DisplayYesNo"
        case 0x02: return "KeyboardOnly"
        case 0x03: return "NoInputNoOutput"
        case 0x04: return "KeyboardDisplay"
        default: return "reserved 0x\(Hex.int(rawValue, width: 2))"
        }
    }
}

/// OOB data flag (3.5.1, Table 3.5).
public struct OOBDataFlag: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt8
    /// Any OOB data flag byte, reserved values included.
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    public static let notPresent = OOBDataFlag(rawValue: 0x00)
    public static let present = OOBDataFlag(rawValue: 0x01)
    public var description: String {
        switch rawValue {
        case 0: return "not present"
        case 1: return "present"
        default: return "reserved 0x\(Hex.int(rawValue, width: 2))"
        }
    }
}

/// The AuthReq field (3.5.1, Figure 3.3): Bonding_Flags (2 bits), MITM, SC,
/// Keypress, CT2, two RFU bits. Unknown bits survive.
public struct AuthReq: OptionSet, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt8
    /// AuthReq from its octet; RFU bits are kept.
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// Bonding_Flags 0b01: Bonding (0b00 is No Bonding; 0b1x reserved).
    public static let bonding = AuthReq(rawValue: 0x01)
    public static let mitm = AuthReq(rawValue: 0x04)
    public static let secureConnections = AuthReq(rawValue: 0x08)
    public static let keypress = AuthReq(rawValue: 0x10)
    public static let ct2 = AuthReq(rawValue: 0x20)

    /// The two Bonding_Flags bits.
    public var bondingFlags: UInt8 { rawValue & 0x03 }

    public var description: String {
        var parts: [String] = []
        switch bondingFlags {
        case 0: parts.append("No Bonding")
        case 1: parts.append("Bonding")
        default: parts.append("Bonding_Flags reserved 0b\(String(bondingFlags, radix: 2))")
        }
        if contains(.mitm) { parts.append("MITM") }
        if contains(.secureConnections) { parts.append("SC") }
        if contains(.keypress) { parts.append("Keypress") }
        if contains(.ct2) { parts.append("CT2") }
        if rawValue & 0xC0 != 0 { parts.append("RFU 0x\(Hex.int(rawValue & 0xC0, width: 2))") }
        return "0x\(Hex.int(rawValue, width: 2)) (\(parts.joined(separator: ", ")))"
    }
}

/// Initiator/Responder Key Distribution bits (3.6.1, Figure 3.11).
public struct KeyDistribution: OptionSet, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt8
    /// Key distribution bits from their octet; RFU bits are kept.
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// LTK, EDIV and Rand (legacy); ignored in LE Secure Connections.
    public static let encKey = KeyDistribution(rawValue: 0x01)
    /// IRK and identity address.
    public static let idKey = KeyDistribution(rawValue: 0x02)
    /// CSRK.
    public static let signKey = KeyDistribution(rawValue: 0x04)
    /// Derive a BR/EDR link key (no PDU on LE).
    public static let linkKey = KeyDistribution(rawValue: 0x08)

    public var description: String {
        var parts: [String] = []
        if contains(.encKey) { parts.append("EncKey") }
        if contains(.idKey) { parts.append("IdKey") }
        if contains(.signKey) { parts.append("SignKey") }
        if contains(.linkKey) { parts.append("LinkKey") }
        if rawValue & 0xF0 != 0 { parts.append("RFU 0x\(Hex.int(rawValue & 0xF0, width: 2))") }
        return "0x\(Hex.int(rawValue, width: 2)) (\(parts.isEmpty ? "none" : parts.joined(separator: ", ")))"
    }
}

/// Keypress Notification Type (3.5.8, Table 3.9). Open.
public struct KeypressNotificationType: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt8
    /// Any notification type byte, reserved values included.
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    public static let entryStarted = KeypressNotificationType(rawValue: 0)
    public static let digitEntered = KeypressNotificationType(rawValue: 1)
    public static let digitErased = KeypressNotificationType(rawValue: 2)
    public static let cleared = KeypressNotificationType(rawValue: 3)
    public static let entryCompleted = KeypressNotificationType(rawValue: 4)
    public var description: String {
        switch rawValue {
        case 0: return "Passkey entry started"
        case 1: return "Passkey digit entered"
        case 2: return "Passkey digit erased"
        case 3: return "Passkey cleared"
        case 4: return "Passkey entry completed"
        default: return "reserved 0x\(Hex.int(rawValue, width: 2))"
        }
    }
}

/// The six parameter octets of Pairing Request and Pairing Response (3.5.1, 3.5.2).
public struct PairingParameters: Hashable, Sendable, CustomStringConvertible {
    public var ioCapability: IOCapability
    public var oobDataFlag: OOBDataFlag
    public var authReq: AuthReq
    /// 7 ... 16 octets.
    public var maxEncryptionKeySize: UInt8
    public var initiatorKeyDistribution: KeyDistribution
    public var responderKeyDistribution: KeyDistribution

    /// Pairing parameters; by default no OOB data and a maximum encryption key size of 16.
    public init(ioCapability: IOCapability, oobDataFlag: OOBDataFlag = .notPresent, authReq: AuthReq,
                maxEncryptionKeySize: UInt8 = 16, initiatorKeyDistribution: KeyDistribution, responderKeyDistribution: KeyDistribution) {
        self.ioCapability = ioCapability
        self.oobDataFlag = oobDataFlag
        self.authReq = authReq
        self.maxEncryptionKeySize = maxEncryptionKeySize
        self.initiatorKeyDistribution = initiatorKeyDistribution
        self.responderKeyDistribution = responderKeyDistribution
    }

    /// IOcapA / IOcapB of f6 (2.2.8), least significant octet first:
    /// IO Capability, OOB data flag, AuthReq.
    public var ioCap: [UInt8] { [ioCapability.rawValue, oobDataFlag.rawValue, authReq.rawValue] }

    static func read(_ r: inout ByteReader) throws -> PairingParameters {
        PairingParameters(ioCapability: IOCapability(rawValue: try r.u8("IO Capability")),
                          oobDataFlag: OOBDataFlag(rawValue: try r.u8("OOB data flag")),
                          authReq: AuthReq(rawValue: try r.u8("AuthReq")),
                          maxEncryptionKeySize: try r.u8("Maximum Encryption Key Size"),
                          initiatorKeyDistribution: KeyDistribution(rawValue: try r.u8("Initiator Key Distribution")),
                          responderKeyDistribution: KeyDistribution(rawValue: try r.u8("Responder Key Distribution")))
    }

    func write(_ w: inout ByteWriter) {
        w.u8(ioCapability.rawValue); w.u8(oobDataFlag.rawValue); w.u8(authReq.rawValue)
        w.u8(maxEncryptionKeySize); w.u8(initiatorKeyDistribution.rawValue); w.u8(responderKeyDistribution.rawValue)
    }

    public var description: String {
        "IO Capability \(ioCapability), OOB data \(oobDataFlag), AuthReq \(authReq), Max Key Size \(maxEncryptionKeySize), "
            + "Initiator Keys \(initiatorKeyDistribution), Responder Keys \(responderKeyDistribution)"
    }
}
