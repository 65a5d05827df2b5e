import BLEWire

// What both roles of the Security Manager share (Core Vol 3 Part H): where
// their randomness comes from, the checks of a Pairing Request or Response,
// the Secure Connections and legacy Just Works computations, and key
// distribution (3.6) in both directions.

/// Where a pairing's nonces and P-256 key pair come from: OpenSSL by default.
/// Tests replace it (`@testable`) to replay the specification's sample data.
struct SMPRandomness {
    var random: (Int) -> [UInt8]? = { try? SMPCrypto.random($0) }
    var keyPair: () throws -> P256KeyPair = { try P256KeyPair() }

    /// OpenSSL's CSPRNG and key generator.
    static var system: SMPRandomness { SMPRandomness() }
}

extension PairingParameters {
    /// The peer's Pairing Request or Response checked for values the
    /// specification reserves (3.5.1): an IO capability above 0x04, an OOB
    /// data flag above 0x01, a Maximum Encryption Key Size above 16.
    /// - Returns: a description of the first problem (answered with Invalid
    ///   Parameters), nil when the values are usable.
    func reservedValueProblem() -> String? {
        if ioCapability.isReserved { return "reserved IO capability \(ioCapability)" }
        if oobDataFlag.rawValue > 1 { return "reserved OOB data flag" }
        if maxEncryptionKeySize > 16 { return "maximum key size \(maxEncryptionKeySize)" }
        return nil
    }
}

/// LE Secure Connections Just Works after the random exchange (2.3.5.6.5):
/// `MacKey || LTK = f5(DHKey, Na, Nb, A, B)`,
/// `Ea = f6(MacKey, Na, Nb, 0, IOcapA, A, B)` and
/// `Eb = f6(MacKey, Nb, Na, 0, IOcapB, B, A)`; the LTK masked to the key size.
struct SecureConnectionsKeys {
    let ltk: LongTermKey
    let ea: [UInt8]
    let eb: [UInt8]

    /// - Parameters: `ioCapA`/`ioCapB` are the initiator's and the
    ///   responder's IO Capability, OOB flag and AuthReq (`PairingParameters.ioCap`).
    init(dhKey: [UInt8], na: [UInt8], nb: [UInt8], initiator: DeviceAddress, responder: DeviceAddress,
         ioCapA: [UInt8], ioCapB: [UInt8], keySize: Int) throws(SMPCryptoError) {
        let zero = SMPKeys.zero16
        let keys = try SMPCrypto.f5(w: dhKey, n1: na, n2: nb, a1: initiator, a2: responder)
        ltk = LongTermKey(key: SMPSecret(SMPCrypto.masked(keys.ltk, size: keySize)), secureConnections: true, keySize: keySize)
        ea = try SMPCrypto.f6(w: keys.macKey, n1: na, n2: nb, r: zero, ioCap: ioCapA, a1: initiator, a2: responder)
        eb = try SMPCrypto.f6(w: keys.macKey, n1: nb, n2: na, r: zero, ioCap: ioCapB, a1: responder, a2: initiator)
    }
}

/// LE legacy Just Works (2.3.5.5): TK is zero.
enum LegacyJustWorks {
    /// Mconfirm or Sconfirm: `c1(TK 0, rand, preq, pres, iat, ia, rat, ra)`.
    static func confirm(_ rand: [UInt8], preq: [UInt8], pres: [UInt8],
                        initiator: DeviceAddress, responder: DeviceAddress) throws(SMPCryptoError) -> [UInt8] {
        try SMPCrypto.c1(k: SMPKeys.zero16, r: rand, preq: preq, pres: pres, initiator: initiator, responder: responder)
    }

    /// The STK, `s1(TK 0, Srand, Mrand)` masked to the key size; EDIV and Rand 0.
    static func stk(srand: [UInt8], mrand: [UInt8], keySize: Int) throws(SMPCryptoError) -> LongTermKey {
        let stk = try SMPCrypto.s1(k: SMPKeys.zero16, r1: srand, r2: mrand)
        return LongTermKey(key: SMPSecret(SMPCrypto.masked(stk, size: keySize)), secureConnections: false, keySize: keySize)
    }
}

/// Transport Specific Key Distribution (3.6): the PDUs one side sends, and
/// the collection of what the other side sends, in the order of 3.6.1
/// (LTK, EDIV and Rand, IRK, identity address, CSRK). With LE Secure
/// Connections EncKey is ignored: the LTK is derived, never sent.
enum SMPKeys {
    static let zero16 = [UInt8](repeating: 0, count: 16)

    static func isKeyDistribution(_ code: SMPCode) -> Bool {
        [.encryptionInformation, .centralIdentification, .identityInformation, .identityAddressInformation, .signingInformation].contains(code)
    }

    /// The PDUs of the keys we distribute: our legacy LTK with its EDIV and
    /// Rand (responder only), then our identity.
    static func pdus(ltk: LongTermKey?, identity: LocalIdentity?) -> [[UInt8]] {
        var out: [[UInt8]] = []
        if let ltk {
            out.append(SMPPDU.encryptionInformation(ltk: ltk.key).encoded)
            out.append(SMPPDU.centralIdentification(ediv: ltk.ediv, rand: ltk.rand).encoded)
        }
        if let id = identity {
            out.append(SMPPDU.identityInformation(irk: id.irk).encoded)
            out.append(SMPPDU.identityAddressInformation(type: id.address.type.isRandom ? 1 : 0, address: id.address.address).encoded)
        }
        return out
    }

    /// The peer's keys, as they arrive.
    struct Collector {
        /// The PDUs still to come, in order.
        private(set) var expected: [SMPCode] = []
        private var pendingLTK: SMPSecret?
        private var pendingIRK: SMPSecret?
        let keySize: Int

        /// Expects the PDUs of `keys` (the peer's distribution bits as negotiated).
        init(keys: KeyDistribution, secureConnections: Bool, keySize: Int) {
            self.keySize = keySize
            if keys.contains(.encKey) && !secureConnections { expected += [.encryptionInformation, .centralIdentification] }
            if keys.contains(.idKey) { expected += [.identityInformation, .identityAddressInformation] }
            if keys.contains(.signKey) { expected.append(.signingInformation) }
        }

        var isDone: Bool { expected.isEmpty }

        /// One key PDU into `result` (the peer's LTK into `longTermKey`, its
        /// identity, its CSRK).
        /// - Returns: the reason and detail to fail with; nil when it was the PDU due.
        mutating func receive(_ pdu: SMPPDU, into result: inout PairingResult) -> (PairingFailedReason, String)? {
            guard let next = expected.first, pdu.code == next else {
                return (.unspecifiedReason, "unexpected \(pdu.code.name) during key distribution")
            }
            expected.removeFirst()
            switch pdu {
            case let .encryptionInformation(ltk): pendingLTK = ltk
            case let .centralIdentification(ediv, rand):
                guard let ltk = pendingLTK else { return (.unspecifiedReason, "Central Identification without an LTK") }
                result.longTermKey = LongTermKey(key: ltk, ediv: ediv, rand: rand, secureConnections: false, keySize: keySize)
            case let .identityInformation(irk): pendingIRK = irk
            case let .identityAddressInformation(type, address):
                guard type <= 1, let irk = pendingIRK else { return (.invalidParameters, "identity address type 0x\(Hex.int(type, width: 2))") }
                result.peerIdentity = PeerIdentity(irk: irk, address: DeviceAddress(address, type == 0 ? .public : .random))
            case let .signingInformation(csrk): result.peerCSRK = csrk
            default: break
            }
            pendingLTK = expected.first == .centralIdentification ? pendingLTK : nil
            pendingIRK = expected.first == .identityAddressInformation ? pendingIRK : nil
            return nil
        }
    }
}
