import BLEWire

/// The peripheral's side of LE pairing (Core Vol 3 Part H 2.3, 2.4.6, 3.5,
/// 3.6, C.2): a sans-IO state machine, the counterpart of `SMPInitiator`
/// with the same types, PDUs, crypto and configuration. Feed it received SMP
/// PDUs (`receive`), the Encryption Change of the link (`encryptionChanged`)
/// and the expiry of SMP's timer (`timeout`); answer the controller's LE
/// Long Term Key Request during pairing with `key(ediv:rand:)`. It never
/// performs I/O.
///
/// Just Works only (IO capability NoInputNoOutput, never MITM): LE Secure
/// Connections (P-256, f4, f5, f6: the responder sends its public key and
/// Cb, checks Ea, sends Eb) and LE legacy pairing (TK 0, c1, s1), then key
/// distribution, the responder's keys first (3.6.1): its LTK, EDIV and Rand
/// (legacy only; Secure Connections derives the LTK), its IRK and identity
/// address; then the initiator's IRK and identity (and CSRK if asked).
///
/// Of `SMPConfiguration`: `bonding` and `secureConnections` set AuthReq;
/// `allowLegacy` false is Secure Connections Only mode; the key sizes bound
/// the negotiation; `localIdentity` is distributed (IdKey) when the
/// initiator asks for it; `peerKeys` ∩ {IdKey, SignKey} is what is accepted
/// of the initiator. Without bonding on either side no keys are exchanged.
///
/// Timer: SMP's 30 s timer (`timeoutMs`) is the caller's: restart it for
/// every PDU sent or received while `isActive`, stop it at `.complete` or
/// `.failed`, call `timeout()` when it fires (3.4). A Security Request
/// starts it too; pairing or encryption with a bond ends that wait.
public struct SMPResponder {
    /// SMP's transaction timeout (Core Vol 3 Part H 3.4).
    public static let timeoutMs = SMPInitiator.timeoutMs

    /// Where the pairing stands.
    public enum Phase: Hashable, Sendable {
        case idle
        /// A Security Request was sent; waiting for a Pairing Request or encryption.
        case securityRequested
        case awaitingPublicKey
        case awaitingConfirm
        case awaitingRandom
        case awaitingDHKeyCheck
        case awaitingEncryption
        case awaitingPeerKeys
        case complete
        case failed
    }

    public let configuration: SMPConfiguration
    /// The addresses the link was made with (for c1, f5, f6): the central's and ours.
    public let initiator: DeviceAddress
    public let responder: DeviceAddress
    public private(set) var phase: Phase = .idle

    // Negotiation.
    private var request: PairingParameters?
    private var response: PairingParameters?
    private var preq: [UInt8] = []
    private var pres: [UInt8] = []
    private var secureConnections = false
    private var keySize = 16

    // Secure Connections: our key pair, the DHKey, the Ea we expect, the Eb we send.
    private var keyPair: P256KeyPair?
    private var dhKey: [UInt8] = []
    private var peerPublicX: [UInt8] = []
    private var expectedEa: [UInt8] = []
    private var eb: [UInt8] = []

    // Both methods: our random (Nb / Srand), the initiator's Mconfirm, the STK or LTK.
    private var localRandom: [UInt8] = []
    private var peerConfirm: [UInt8] = []
    private var linkKey: LongTermKey?

    // Key distribution.
    private var peerKeys: SMPKeys.Collector?
    private var earlyPDUs: [[UInt8]] = []
    private var result = PairingResult(secureConnections: false, bonded: false, encryptionKeySize: 16)
    /// Nonces and key pairs (OpenSSL; tests inject the specification's).
    var randomness = SMPRandomness.system

    /// An idle responder on the link from `initiator` (the central) to
    /// `responder` (us), waiting for a Pairing Request.
    public init(configuration: SMPConfiguration = SMPConfiguration(), initiator: DeviceAddress, responder: DeviceAddress) {
        self.configuration = configuration
        self.initiator = initiator
        self.responder = responder
    }

    /// Pairing (or a Security Request) in progress: SMP's timer runs.
    public var isActive: Bool { phase != .idle && phase != .complete && phase != .failed }

    /// Our AuthReq: Bonding and SC as configured, never MITM.
    private var authReq: AuthReq {
        var a: AuthReq = []
        if configuration.bonding { a.insert(.bonding) }
        if configuration.secureConnections { a.insert(.secureConnections) }
        return a
    }

    /// Asks the central to secure the link (Security Request, 3.6.7, 2.4.6),
    /// e.g. when an unencrypted client touches a protected attribute. Only
    /// when idle; the central answers by pairing (a Pairing Request follows),
    /// by encrypting with its bond, or with Pairing Failed.
    public mutating func securityRequest() -> [SMPAction] {
        guard phase == .idle else { return [] }
        phase = .securityRequested
        return [.send(SMPPDU.securityRequest(authReq).encoded)]
    }

    /// Cancels a pairing in progress, telling the peer `reason`.
    public mutating func cancel(reason: PairingFailedReason = .unspecifiedReason) -> [SMPAction] {
        guard isActive else { return [] }
        return fail(reason, "cancelled")
    }

    /// SMP's 30 s timer expired: pairing failed, and nothing more is sent.
    public mutating func timeout() -> [SMPAction] {
        guard isActive else { return [] }
        phase = .failed
        wipe()
        return [.failed(.timeout)]
    }

    /// The key for the controller's LE Long Term Key Request during pairing:
    /// the STK (legacy) or the LTK (Secure Connections), asked for with EDIV
    /// 0 and Rand 0, once the checks passed. Nil otherwise (a bond's key is
    /// the caller's to find).
    public func key(ediv: UInt16, rand: UInt64) -> LongTermKey? {
        guard phase == .awaitingEncryption, ediv == 0, rand == 0 else { return nil }
        return linkKey
    }

    /// The link's Encryption Change (or Key Refresh): during pairing, status
    /// 0 and encryption on start key distribution, ours first (3.6.1).
    /// After a Security Request, the central's encryption with a bond (even
    /// a failed one) ends the wait.
    public mutating func encryptionChanged(status: UInt8, enabled: Bool = true) -> [SMPAction] {
        if phase == .securityRequested {
            phase = .idle  // the central answered with its bond (or tried to)
            return []
        }
        guard phase == .awaitingEncryption else { return [] }
        guard status == 0, enabled, let negotiated = response else {
            phase = .failed
            wipe()
            return [.failed(.encryption(status: status))]
        }
        phase = .awaitingPeerKeys
        var ltk: LongTermKey?
        if negotiated.responderKeyDistribution.contains(.encKey) && !secureConnections {
            // A fresh LTK of the negotiated size with a random EDIV and Rand (3.6.2, 3.6.3).
            guard let k = random(16), let e = random(2), let r = random(8) else { return fail(.unspecifiedReason, "no random number") }
            let rand = r.enumerated().reduce(UInt64(0)) { $0 | UInt64($1.element) << (8 * UInt64($1.offset)) }
            ltk = LongTermKey(key: SMPSecret(SMPCrypto.masked(k, size: keySize)), ediv: UInt16(e[0]) | UInt16(e[1]) << 8,
                              rand: rand, secureConnections: false, keySize: keySize)
            result.longTermKey = ltk
        }
        var identity: LocalIdentity?
        if negotiated.responderKeyDistribution.contains(.idKey), let id = configuration.localIdentity {
            identity = id
            result.sentIdentity = id
        }
        var actions = SMPKeys.pdus(ltk: ltk, identity: identity).map { SMPAction.send($0) }
        let collector = SMPKeys.Collector(keys: negotiated.initiatorKeyDistribution, secureConnections: secureConnections, keySize: keySize)
        peerKeys = collector
        if collector.isDone { return actions + complete() }
        let early = earlyPDUs
        earlyPDUs = []
        for pdu in early where phase == .awaitingPeerKeys { actions += receive(pdu) }
        return actions
    }

    /// One received SMP PDU (the L2CAP payload on CID 0x0006).
    public mutating func receive(_ bytes: [UInt8]) -> [SMPAction] {
        guard phase != .complete && phase != .failed else { return [] }
        let pdu: SMPPDU
        do {
            pdu = try SMPPDU.decode(bytes)
        } catch {
            if bytes.first == SMPCode.pairingFailed.rawValue {
                // Never answer a Pairing Failed, even a malformed one.
                return peerFailed(PairingFailedReason(rawValue: bytes.count > 1 ? bytes[1] : PairingFailedReason.unspecifiedReason.rawValue))
            }
            return fail(.invalidParameters, "\(SMPCode(rawValue: bytes.first ?? 0).name) has the wrong length (\(bytes.count) bytes)")
        }
        switch pdu {
        case let .pairingFailed(reason): return phase == .idle ? [] : peerFailed(reason)
        case .unknown(let code, _): return fail(.commandNotSupported, "unknown SMP code 0x\(Hex.int(code.rawValue, width: 2))")
        case .keypressNotification: return [] // no Passkey Entry
        case .pairingResponse, .securityRequest: return fail(.commandNotSupported, "a \(pdu.code.name) sent to the peripheral")
        default: break
        }
        switch (phase, pdu) {
        case let (.idle, .pairingRequest(p)), let (.securityRequested, .pairingRequest(p)):
            preq = bytes
            return negotiate(p)
        case let (.awaitingPublicKey, .pairingPublicKey(x, y)):
            return peerPublicKeyReceived(x + y)
        case let (.awaitingConfirm, .pairingConfirm(c)):
            return legacyConfirmReceived(c)
        case let (.awaitingRandom, .pairingRandom(r)):
            return secureConnections ? scRandomReceived(r) : legacyRandomReceived(r)
        case let (.awaitingDHKeyCheck, .pairingDHKeyCheck(ea)):
            return dhKeyCheckReceived(ea)
        case (.awaitingEncryption, _) where SMPKeys.isKeyDistribution(pdu.code):
            // The initiator's keys can overtake our Encryption Change event; keep them until it comes.
            guard earlyPDUs.count < 5 else { return fail(.unspecifiedReason, "too many PDUs before encryption") }
            earlyPDUs.append(bytes)
            return []
        case (.awaitingPeerKeys, _):
            guard var collector = peerKeys else { return fail(.unspecifiedReason, "no key distribution") }
            if case let (reason, detail)? = collector.receive(pdu, into: &result) { return fail(reason, detail) }
            peerKeys = collector
            return collector.isDone ? complete() : []
        default:
            return fail(.unspecifiedReason, "unexpected \(pdu.code.name) while \(phase)")
        }
    }

    // MARK: Pairing Feature Exchange (2.3.5.1)

    private mutating func negotiate(_ p: PairingParameters) -> [SMPAction] {
        if let problem = p.reservedValueProblem() { return fail(.invalidParameters, problem) }
        let ours = min(16, max(7, configuration.maxEncryptionKeySize))
        let size = min(ours, p.maxEncryptionKeySize)
        if size < max(7, configuration.minEncryptionKeySize) { return fail(.encryptionKeySize, "key size \(size) is too small") }
        secureConnections = configuration.secureConnections && p.authReq.contains(.secureConnections)
        if !secureConnections && !configuration.allowLegacy {
            return fail(.authenticationRequirements, "the central does not support LE Secure Connections")
        }
        // We hold no OOB data of the central's: one claiming to hold ours cannot be served (2.3.5.1).
        if secureConnections && p.oobDataFlag == .present { return fail(.oobNotAvailable, "the central asks for OOB data we never gave") }
        let bonding = configuration.bonding && p.authReq.bondingFlags == 1
        var ownKeys: KeyDistribution = [.encKey]
        if configuration.localIdentity != nil { ownKeys.insert(.idKey) }
        let r = PairingParameters(ioCapability: .noInputNoOutput, oobDataFlag: .notPresent, authReq: authReq, maxEncryptionKeySize: ours,
                                  initiatorKeyDistribution: bonding ? p.initiatorKeyDistribution.intersection(configuration.peerKeys)
                                      .intersection([.idKey, .signKey]) : [],
                                  responderKeyDistribution: bonding ? p.responderKeyDistribution.intersection(ownKeys) : [])
        request = p
        response = r
        pres = SMPPDU.pairingResponse(r).encoded
        keySize = Int(size)
        result.secureConnections = secureConnections
        result.bonded = bonding
        result.encryptionKeySize = keySize
        phase = secureConnections ? .awaitingPublicKey : .awaitingConfirm
        return [.send(pres)]
    }

    // MARK: LE Secure Connections (2.3.5.6)

    private mutating func peerPublicKeyReceived(_ key: [UInt8]) -> [SMPAction] {
        let ours: P256KeyPair
        do {
            ours = try randomness.keyPair()
        } catch {
            return fail(.unspecifiedReason, "\(error)")
        }
        // Our own key sent back is no key exchange at all.
        if SMPCrypto.constantTimeEqual(Array(key.prefix(32)), ours.x) { return fail(.dhKeyCheckFailed, "the central's public key is our own") }
        do {
            dhKey = try ours.dhKey(peerPublicKey: key)
        } catch .invalidPublicKey {
            // An invalid public key is reported as DHKey Check Failed (3.5.5, 2.3.5.6.1).
            return fail(.dhKeyCheckFailed, "the central's public key is not on P-256")
        } catch {
            return fail(.unspecifiedReason, "\(error)")
        }
        keyPair = ours
        peerPublicX = Array(key.prefix(32))
        guard let nb = random(16) else { return fail(.unspecifiedReason, "no random number") }
        localRandom = nb
        do {
            // Cb = f4(PKbx, PKax, Nb, 0), sent right after our public key (2.3.5.6.2).
            let cb = try SMPCrypto.f4(u: ours.x, v: peerPublicX, x: nb, z: 0)
            phase = .awaitingRandom
            let pk = ours.publicKey
            return [.send(SMPPDU.pairingPublicKey(x: Array(pk.prefix(32)), y: Array(pk.suffix(32))).encoded),
                    .send(SMPPDU.pairingConfirm(cb).encoded)]
        } catch {
            return fail(.unspecifiedReason, "\(error)")
        }
    }

    private mutating func scRandomReceived(_ na: [UInt8]) -> [SMPAction] {
        guard let req = request, let res = response else { return fail(.unspecifiedReason, "no negotiation") }
        do {
            let keys = try SecureConnectionsKeys(dhKey: dhKey, na: na, nb: localRandom, initiator: initiator, responder: responder,
                                                 ioCapA: req.ioCap, ioCapB: res.ioCap, keySize: keySize)
            expectedEa = keys.ea
            eb = keys.eb
            linkKey = keys.ltk
            phase = .awaitingDHKeyCheck
            return [.send(SMPPDU.pairingRandom(localRandom).encoded)]
        } catch {
            return fail(.unspecifiedReason, "\(error)")
        }
    }

    private mutating func dhKeyCheckReceived(_ ea: [UInt8]) -> [SMPAction] {
        guard let key = linkKey else { return fail(.unspecifiedReason, "no keys") }
        guard SMPCrypto.constantTimeEqual(expectedEa, ea) else { return fail(.dhKeyCheckFailed, "Ea does not match") }
        result.longTermKey = key
        phase = .awaitingEncryption
        return [.send(SMPPDU.pairingDHKeyCheck(eb).encoded)]
    }

    // MARK: LE legacy pairing (2.3.5.5)

    private mutating func legacyConfirmReceived(_ mconfirm: [UInt8]) -> [SMPAction] {
        guard let srand = random(16) else { return fail(.unspecifiedReason, "no random number") }
        peerConfirm = mconfirm
        localRandom = srand
        do {
            let sconfirm = try LegacyJustWorks.confirm(srand, preq: preq, pres: pres, initiator: initiator, responder: responder)
            phase = .awaitingRandom
            return [.send(SMPPDU.pairingConfirm(sconfirm).encoded)]
        } catch {
            return fail(.unspecifiedReason, "\(error)")
        }
    }

    private mutating func legacyRandomReceived(_ mrand: [UInt8]) -> [SMPAction] {
        do {
            let expected = try LegacyJustWorks.confirm(mrand, preq: preq, pres: pres, initiator: initiator, responder: responder)
            guard SMPCrypto.constantTimeEqual(expected, peerConfirm) else { return fail(.confirmValueFailed, "Mconfirm does not match Mrand") }
            linkKey = try LegacyJustWorks.stk(srand: localRandom, mrand: mrand, keySize: keySize)
            phase = .awaitingEncryption
            return [.send(SMPPDU.pairingRandom(localRandom).encoded)]
        } catch {
            return fail(.unspecifiedReason, "\(error)")
        }
    }

    // MARK: End

    private mutating func complete() -> [SMPAction] {
        phase = .complete
        let done = result
        wipe()
        return [.complete(done)]
    }

    private mutating func fail(_ reason: PairingFailedReason, _ detail: String) -> [SMPAction] {
        phase = .failed
        wipe()
        return [.send(SMPPDU.pairingFailed(reason).encoded), .failed(.local(reason, detail: detail))]
    }

    private mutating func peerFailed(_ reason: PairingFailedReason) -> [SMPAction] {
        phase = .failed
        wipe()
        return [.failed(.peer(reason))]
    }

    /// Drops the pairing's secrets once they are no longer needed.
    private mutating func wipe() {
        keyPair = nil
        dhKey = []
        expectedEa = []
        eb = []
        localRandom = []
        linkKey = nil
        peerKeys = nil
        earlyPDUs = []
        if phase == .failed { result = PairingResult(secureConnections: false, bonded: false, encryptionKeySize: 16) }
    }

    private func random(_ n: Int) -> [UInt8]? { randomness.random(n) }
}
