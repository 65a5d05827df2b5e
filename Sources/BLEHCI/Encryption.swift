import BLEWire

extension HCIOpcode {
    /// LE Enable Encryption (Core Vol 4 Part E 7.8.24).
    public static let leEnableEncryption = HCIOpcode(rawValue: 0x2019)
    /// LE Long Term Key Request Reply (7.8.25): a peripheral's; decoded only.
    public static let leLongTermKeyRequestReply = HCIOpcode(rawValue: 0x201A)
    /// LE Long Term Key Request Negative Reply (7.8.26): a peripheral's; decoded only.
    public static let leLongTermKeyRequestNegativeReply = HCIOpcode(rawValue: 0x201B)
}

extension HCIEventCode {
    /// Encryption Key Refresh Complete (7.7.39): a link already encrypted was
    /// encrypted again (the Encryption Change of a re-encryption).
    public static let encryptionKeyRefreshComplete = HCIEventCode(rawValue: 0x30)
}

extension HCICommand {
    /// LE Enable Encryption (7.8.24): the connection handle, Random_Number
    /// (8 bytes LE), Encrypted_Diversifier (LE16) and Long_Term_Key (16 bytes,
    /// least significant first, as SMP carries it). Answered by Command
    /// Status; the outcome is an Encryption Change (or Encryption Key Refresh
    /// Complete when the link was already encrypted).
    /// - Parameter ltk: exactly 16 bytes; others are padded or cut to 16, so
    ///   a wrong key fails at the controller, never traps here.
    public static func leEnableEncryption(handle: UInt16, rand: UInt64, ediv: UInt16, ltk: [UInt8]) -> HCICommand {
        var w = ByteWriter()
        w.u16(handle)
        w.u64(rand)
        w.u16(ediv)
        w.append((ltk + [UInt8](repeating: 0, count: 16)).prefix(16))
        return HCICommand(.leEnableEncryption, w.bytes)
    }
}

/// Encryption Change (7.7.8) or Encryption Key Refresh Complete (7.7.39):
/// the outcome of LE Enable Encryption on one connection.
public struct EncryptionChange: Hashable, Sendable {
    /// 0x00 success; 0x06 PIN or Key Missing when the peer has no such key
    /// (it sent LE Long Term Key Request Negative Reply), 0x3D MIC Failure, ...
    public var status: HCIStatus
    public var handle: UInt16
    /// Encryption on (always true for a key refresh that succeeded).
    public var enabled: Bool
    /// True for Encryption Key Refresh Complete.
    public var isRefresh: Bool

    /// A decoded event.
    public init(status: HCIStatus, handle: UInt16, enabled: Bool, isRefresh: Bool) {
        self.status = status; self.handle = handle; self.enabled = enabled; self.isRefresh = isRefresh
    }

    /// Decodes the parameters of event `code` (0x08: status, handle, enabled;
    /// 0x30: status, handle).
    /// - Throws: `WireError` when the parameters are short or too long.
    public static func decode(_ code: HCIEventCode, _ p: [UInt8]) throws -> EncryptionChange {
        var r = ByteReader(p)
        let status = HCIStatus(rawValue: try r.u8("Status"))
        let handle = try r.u16("Connection_Handle") & 0x0FFF
        if code == .encryptionKeyRefreshComplete {
            try r.expectEnd("Encryption Key Refresh Complete")
            return EncryptionChange(status: status, handle: handle, enabled: status == .success, isRefresh: true)
        }
        let enabled = try r.u8("Encryption_Enabled") != 0
        try r.expectEnd("Encryption Change")
        return EncryptionChange(status: status, handle: handle, enabled: enabled, isRefresh: false)
    }
}

extension HCIEvent {
    /// The Encryption Change or Encryption Key Refresh Complete this event
    /// carries; nil for other events and for malformed parameters.
    public var encryptionChange: EncryptionChange? {
        guard case let .other(code, p) = self, code == .encryptionChange || code == .encryptionKeyRefreshComplete else { return nil }
        return try? EncryptionChange.decode(code, p)
    }
}
