import BLEWire

// Encrypting a link (Core Vol 4 Part E 7.8.24-7.8.26, 7.7.8, 7.7.39).

extension HCI {
    /// LE Enable Encryption (7.8.24): the connection handle, Random_Number
    /// (8 bytes LE), Encrypted_Diversifier (LE16) and Long_Term_Key (16 bytes,
    /// least significant first, as SMP carries it). Answered by Command
    /// Status; the outcome is an Encryption Change (or Encryption Key Refresh
    /// Complete when the link was already encrypted). The trace masks Rand,
    /// EDIV and the key unless keys are shown.
    public struct LEEnableEncryption: HCIDeclaredCommand {
        public static let declaration = HCICommandDeclaration(0x2019, "LE Enable Encryption")
        public var handle: UInt16
        public var rand: UInt64
        public var ediv: UInt16
        public var ltk: [UInt8]
        /// - Parameter ltk: exactly 16 bytes; others are padded or cut to 16
        ///   when written, so a wrong key fails at the controller, never traps here.
        public init(handle: UInt16, rand: UInt64, ediv: UInt16, ltk: [UInt8]) {
            self.handle = handle; self.rand = rand; self.ediv = ediv; self.ltk = ltk
        }
        public init() { self.init(handle: 0, rand: 0, ediv: 0, ltk: [UInt8](repeating: 0, count: 16)) }
        public mutating func fields(_ f: inout some HCIFieldWalker) throws {
            try f.u16("Connection_Handle", "Handle", &handle)
            try f.u64("Random_Number", "Rand", &rand, secret: true, HCIShow.h64)
            try f.u16("Encrypted_Diversifier", "EDIV", &ediv, secret: true, HCIShow.h16)
            try f.bytes("Long_Term_Key", "LTK", &ltk, count: 16, secret: true)
        }
    }

    /// LE Long Term Key Request Reply (7.8.25): a peripheral's answer, the handle and the LTK.
    public struct LELongTermKeyRequestReply: HCIDeclaredCommand {
        public static let declaration = HCICommandDeclaration(0x201A, "LE Long Term Key Request Reply")
        public var handle: UInt16 = 0
        public var ltk = [UInt8](repeating: 0, count: 16)
        public init() {}
        public mutating func fields(_ f: inout some HCIFieldWalker) throws {
            try f.u16("Connection_Handle", "Handle", &handle)
            try f.bytes("Long_Term_Key", "LTK", &ltk, count: 16, secret: true)
        }
    }

    /// LE Long Term Key Request Negative Reply (7.8.26): a peripheral's, when it has no key.
    public struct LELongTermKeyRequestNegativeReply: HCIDeclaredCommand {
        public static let declaration = HCICommandDeclaration(0x201B, "LE Long Term Key Request Negative Reply")
        public var handle: UInt16 = 0
        public init() {}
        public mutating func fields(_ f: inout some HCIFieldWalker) throws { try f.u16("Connection_Handle", "Handle", &handle) }
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
    /// 0x30: status, handle), by their declarations.
    /// - Throws: `WireError` when the parameters are short or too long.
    public static func decode(_ code: HCIEventCode, _ p: [UInt8]) throws -> EncryptionChange {
        if code == .encryptionKeyRefreshComplete {
            let e = try HCI.EncryptionKeyRefreshComplete.decode(p)
            return EncryptionChange(status: e.status, handle: e.handle, enabled: e.status == .success, isRefresh: true)
        }
        let e = try HCI.EncryptionChangeEvent.decode(p)
        return EncryptionChange(status: e.status, handle: e.handle, enabled: e.enabled != 0, isRefresh: false)
    }
}

extension HCI {
    /// Encryption Change (7.7.8): status, handle, Encryption_Enabled.
    public struct EncryptionChangeEvent: HCIDeclaredEvent {
        public static let declaration = HCIEventDeclaration(0x08, "Encryption Change")
        public var status = HCIStatus.success
        public var handle: UInt16 = 0
        /// 0 off, 1 on (AES-CCM for LE), 2 on with AES-CCM for BR/EDR.
        public var enabled: UInt8 = 0
        public init() {}
        public mutating func fields(_ f: inout some HCIFieldWalker) throws {
            try f.code("Status", "Status", &status)
            try f.handle(&handle)
            try f.u8("Encryption_Enabled", "Encryption", &enabled) { $0 == 0 ? "Disabled (0x00)" : "Enabled (\(HCIShow.h8($0)))" }
        }
    }

    /// Encryption Key Refresh Complete (7.7.39): a link already encrypted
    /// was encrypted again (the Encryption Change of a re-encryption).
    public struct EncryptionKeyRefreshComplete: HCIDeclaredEvent {
        public static let declaration = HCIEventDeclaration(0x30, "Encryption Key Refresh Complete")
        public var status = HCIStatus.success
        public var handle: UInt16 = 0
        public init() {}
        public mutating func fields(_ f: inout some HCIFieldWalker) throws {
            try f.code("Status", "Status", &status)
            try f.handle(&handle)
        }
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
