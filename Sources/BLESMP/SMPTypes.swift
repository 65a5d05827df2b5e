import BLEWire

/// Our identity, distributed to the peer when it asks for IdKey (Core Vol 3
/// Part H 3.6.4, 3.6.5).
public struct LocalIdentity: Hashable, Sendable, CustomStringConvertible {
    public var irk: SMPSecret
    /// A public or static random address.
    public var address: DeviceAddress
    /// Our IRK and the identity address distributed with it.
    public init(irk: SMPSecret, address: DeviceAddress) {
        self.irk = irk
        self.address = address
    }
    public var description: String { "identity \(address) IRK \(irk)" }
}

/// A key to encrypt a link with (LE Enable Encryption): the LTK with its EDIV
/// and Rand (zero for LE Secure Connections and for the STK).
public struct LongTermKey: Hashable, Sendable, CustomStringConvertible {
    public var key: SMPSecret
    public var ediv: UInt16
    public var rand: UInt64
    /// Pairing that made it: LE Secure Connections or legacy.
    public var secureConnections: Bool
    /// MITM-protected (never for Just Works).
    public var authenticated: Bool
    /// Negotiated encryption key size, 7 ... 16.
    public var keySize: Int

    /// A key with its EDIV and Rand (0 for LE Secure Connections and the STK);
    /// by default unauthenticated, with a 16-byte key size.
    public init(key: SMPSecret, ediv: UInt16 = 0, rand: UInt64 = 0, secureConnections: Bool, authenticated: Bool = false, keySize: Int = 16) {
        self.key = key
        self.ediv = ediv
        self.rand = rand
        self.secureConnections = secureConnections
        self.authenticated = authenticated
        self.keySize = keySize
    }

    public var description: String {
        "LTK \(key) (\(secureConnections ? "Secure Connections" : "legacy"), \(authenticated ? "authenticated" : "unauthenticated"), \(keySize) bytes)"
    }
}

/// The peer's identity: its IRK and its public or static random address.
public struct PeerIdentity: Hashable, Sendable, CustomStringConvertible {
    public var irk: SMPSecret
    public var address: DeviceAddress
    public var description: String { "identity \(address) IRK \(irk)" }
}

/// What a finished pairing leaves behind. Printing it never shows a key.
public struct PairingResult: Hashable, Sendable, CustomStringConvertible {
    public var secureConnections: Bool
    /// Both sides set Bonding: the keys are meant to be stored.
    public var bonded: Bool
    public var encryptionKeySize: Int
    /// The key for later re-encryption: the LTK derived by f5 (Secure
    /// Connections), or the LTK, EDIV and Rand the peer distributed (legacy;
    /// nil when it distributed none: the STK is never stored).
    public var longTermKey: LongTermKey?
    public var peerIdentity: PeerIdentity?
    public var peerCSRK: SMPSecret?
    /// The identity we distributed, if the peer asked for it.
    public var sentIdentity: LocalIdentity?

    public var description: String {
        var parts = [secureConnections ? "LE Secure Connections" : "LE legacy", "Just Works", bonded ? "bonded" : "not bonded",
                     "key size \(encryptionKeySize)"]
        if longTermKey != nil { parts.append("LTK") }
        if let id = peerIdentity { parts.append("peer \(id.address) with IRK") }
        if peerCSRK != nil { parts.append("peer CSRK") }
        if sentIdentity != nil { parts.append("our identity sent") }
        return parts.joined(separator: ", ")
    }
}

/// Why pairing ended without keys.
public enum PairingFailure: Error, Hashable, Sendable, CustomStringConvertible {
    /// The peer sent Pairing Failed with this reason.
    case peer(PairingFailedReason)
    /// We sent Pairing Failed with this reason; `detail` says why (never key material).
    case local(PairingFailedReason, detail: String)
    /// Encryption with the STK or LTK failed (HCI status of Encryption Change).
    case encryption(status: UInt8)
    /// SMP's 30 s timer expired (3.4): no further SMP PDU may be sent on this link.
    case timeout

    public var description: String {
        switch self {
        case let .peer(r): return "the peer ended pairing: \(r)"
        case let .local(r, detail): return "pairing failed: \(r): \(detail)"
        case let .encryption(status): return "encryption failed with status 0x\(Hex.int(status, width: 2))"
        case .timeout: return "pairing timed out (SMP's 30 s)"
        }
    }

    /// The Pairing Failed reason, received or sent.
    public var reason: PairingFailedReason? {
        switch self {
        case let .peer(r), let .local(r, _): return r
        case .encryption, .timeout: return nil
        }
    }
}

/// What the caller does next.
public enum SMPAction: Hashable, Sendable, CustomStringConvertible {
    /// Send these bytes on the SMP channel (CID 0x0006), and restart SMP's
    /// 30 s timer (3.4).
    case send([UInt8])
    /// Encrypt the link (LE Enable Encryption) with this key, EDIV and Rand,
    /// then report the Encryption Change with `encryptionChanged`.
    case startEncryption(LongTermKey)
    /// Pairing finished; stop the timer.
    case complete(PairingResult)
    /// Pairing ended; stop the timer.
    case failed(PairingFailure)

    public var description: String {
        switch self {
        case let .send(b): return "send \(SMPPDU.describe(bytes: b, showKeys: false))"
        case let .startEncryption(k): return "start encryption with \(k)"
        case let .complete(r): return "complete: \(r)"
        case let .failed(f): return "failed: \(f)"
        }
    }
}

/// What the pairing settings are. Only Just Works: attled has no display or
/// keyboard, so the IO capability is always NoInputNoOutput and MITM is never
/// requested.
public struct SMPConfiguration: Hashable, Sendable {
    /// Set Bonding in AuthReq (keys to be stored).
    public var bonding = true
    /// Offer LE Secure Connections.
    public var secureConnections = true
    /// Fall back to LE legacy pairing when the peer does not do Secure
    /// Connections; false is Secure Connections Only mode (fails with
    /// Authentication Requirements).
    public var allowLegacy = true
    /// Maximum Encryption Key Size we offer (7 ... 16).
    public var maxEncryptionKeySize: UInt8 = 16
    /// The smallest negotiated key size we accept (7 ... 16).
    public var minEncryptionKeySize: UInt8 = 7
    /// Keys we ask the peer for.
    public var peerKeys: KeyDistribution = [.encKey, .idKey]
    /// Our identity, offered (IdKey) when set.
    public var localIdentity: LocalIdentity?

    /// The defaults: bonding, LE Secure Connections with legacy fallback, key
    /// sizes 7 ... 16, EncKey and IdKey asked of the peer, no local identity.
    public init() {}
}
