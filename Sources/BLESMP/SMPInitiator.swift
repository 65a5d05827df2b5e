import BLEWire

/// The central's side of LE pairing (Core Vol 3 Part H 2.3, 3.5, 3.6, C.2):
/// a sans-IO state machine. Feed it received SMP PDUs (`receive`), the
/// Encryption Change (`encryptionChanged`) and the expiry of SMP's timer
/// (`timeout`); it answers with actions and never performs I/O.
///
/// Supports Just Works with LE Secure Connections (P-256 key exchange, f4
/// confirm, f5 keys, f6 DHKey checks) and LE legacy pairing (TK 0, c1, s1),
/// then key distribution. One instance is one pairing.
///
/// Timer: SMP's 30 s timer (`timeoutMs`) is the caller's. Restart it for
/// every `.send`, stop it at `.complete` or `.failed`, and call `timeout()`
/// when it fires; after that no SMP PDU may be sent on the link until it is
/// reconnected (3.4).
public struct SMPInitiator {
    /// SMP's transaction timeout (Core Vol 3 Part H 3.4).
    public static let timeoutMs = 30_000

    /// Where the pairing stands.
    public enum Phase: Hashable, Sendable {
        case idle
        case awaitingPairingResponse
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
    /// The addresses the link was made with (for c1, f5, f6).
    public let initiator: DeviceAddress
    public let responder: DeviceAddress
    public private(set) var phase: Phase = .idle

    // Negotiation.
    private var request: PairingParameters
    private var response: PairingParameters?
    private var preq: [UInt8] = []
    private var pres: [UInt8] = []
    private var secureConnections = false
    private var keySize = 16

    // Secure Connections.
    private var keyPair: P256KeyPair?
    private var peerPublicKey: [UInt8] = []
    private var dhKey: [UInt8] = []
    private var expectedEb: [UInt8] = []

    // Both methods: our random (Na / Mrand), the peer's confirm (Cb / Sconfirm).
    private var localRandom: [UInt8] = []
    private var peerConfirm: [UInt8] = []
    private var linkKey: LongTermKey?

    // Key distribution.
    private var peerKeys: SMPKeys.Collector?
    private var earlyPDUs: [[UInt8]] = []
    private var result = PairingResult(secureConnections: false, bonded: false, encryptionKeySize: 16)
    /// Nonces and key pairs (OpenSSL; tests inject the specification's).
    var randomness = SMPRandomness.system

    /// An idle pairing of the link from `initiator` (us) to `responder`, to be
    /// begun with `start()`. Its Pairing Request (3.5.1): NoInputNoOutput, no OOB,
    /// Bonding and SC as configured (never MITM), the maximum key size clamped to
    /// 7 ... 16, IdKey offered only with a local identity, and of the peer keys
    /// asked only EncKey, IdKey and SignKey.
    public init(configuration: SMPConfiguration = SMPConfiguration(), initiator: DeviceAddress, responder: DeviceAddress) {
        self.configuration = configuration
        self.initiator = initiator
        self.responder = responder
        var auth: AuthReq = []
        if configuration.bonding { auth.insert(.bonding) }
        if configuration.secureConnections { auth.insert(.secureConnections) }
        request = PairingParameters(ioCapability: .noInputNoOutput, oobDataFlag: .notPresent, authReq: auth,
                                    maxEncryptionKeySize: min(16, max(7, configuration.maxEncryptionKeySize)),
                                    initiatorKeyDistribution: configuration.localIdentity == nil ? [] : [.idKey],
                                    responderKeyDistribution: configuration.peerKeys.intersection([.encKey, .idKey, .signKey]))
    }

    /// Still pairing: started and neither complete nor failed.
    public var isActive: Bool { phase != .idle && phase != .complete && phase != .failed }

    /// Starts pairing: sends the Pairing Request.
    public mutating func start() -> [SMPAction] {
        guard phase == .idle else { return [] }
        preq = SMPPDU.pairingRequest(request).encoded
        phase = .awaitingPairingResponse
        return [.send(preq)]
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

    /// The Encryption Change (or Encryption Key Refresh Complete) for the
    /// link: status 0 and encryption on continue with key distribution.
    public mutating func encryptionChanged(status: UInt8, enabled: Bool = true) -> [SMPAction] {
        guard phase == .awaitingEncryption else { return [] }
        guard status == 0, enabled else {
            phase = .failed
            wipe()
            return [.failed(.encryption(status: status))]
        }
        phase = .awaitingPeerKeys
        // Secure Connections never distributes the LTK (3.6.1); LinkKey has no LE PDU.
        guard let negotiated = response else { return fail(.unspecifiedReason, "no Pairing Response") }
        let collector = SMPKeys.Collector(keys: negotiated.responderKeyDistribution, secureConnections: secureConnections, keySize: keySize)
        peerKeys = collector
        var actions: [SMPAction] = []
        if collector.isDone { return distributeAndComplete() }
        let early = earlyPDUs
        earlyPDUs = []
        for pdu in early where phase == .awaitingPeerKeys { actions += receive(pdu) }
        return actions
    }

    /// One received SMP PDU (the L2CAP payload on CID 0x0006).
    public mutating func receive(_ bytes: [UInt8]) -> [SMPAction] {
        if phase == .idle {
            // A Security Request asks the central to start (2.4.6).
            if bytes.first == SMPCode.securityRequest.rawValue { return start() }
            return []
        }
        guard isActive else { return [] }
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
        case let .pairingFailed(reason): return peerFailed(reason)
        case .unknown(let code, _): return fail(.commandNotSupported, "unknown SMP code 0x\(Hex.int(code.rawValue, width: 2))")
        case .securityRequest, .keypressNotification: return [] // ignored while pairing (2.4.6; no Passkey Entry)
        case .pairingRequest: return fail(.commandNotSupported, "a Pairing Request sent to the central")
        default: break
        }
        switch (phase, pdu) {
        case let (.awaitingPairingResponse, .pairingResponse(p)):
            pres = bytes
            return negotiate(p)
        case let (.awaitingPublicKey, .pairingPublicKey(x, y)):
            return peerPublicKeyReceived(x + y)
        case let (.awaitingConfirm, .pairingConfirm(c)):
            peerConfirm = c
            if secureConnections {
                // Just Works: the responder's Cb comes first, then we send Na (C.2.2.3).
                guard let na = random(16) else { return fail(.unspecifiedReason, "no random number") }
                localRandom = na
            }
            phase = .awaitingRandom
            return [.send(SMPPDU.pairingRandom(localRandom).encoded)]
        case let (.awaitingRandom, .pairingRandom(r)):
            return secureConnections ? scRandomReceived(r) : legacyRandomReceived(r)
        case let (.awaitingDHKeyCheck, .pairingDHKeyCheck(eb)):
            return dhKeyCheckReceived(eb)
        case (.awaitingEncryption, _) where SMPKeys.isKeyDistribution(pdu.code):
            // The peer's keys can overtake the Encryption Change event; keep them until it comes.
            guard earlyPDUs.count < 5 else { return fail(.unspecifiedReason, "too many PDUs before encryption") }
            earlyPDUs.append(bytes)
            return []
        case (.awaitingPeerKeys, _):
            return keyReceived(pdu)
        default:
            return fail(.unspecifiedReason, "unexpected \(pdu.code.name) while \(phase)")
        }
    }

    // MARK: Pairing Feature Exchange (2.3.5.1)

    private mutating func negotiate(_ p: PairingParameters) -> [SMPAction] {
        if let problem = p.reservedValueProblem() { return fail(.invalidParameters, problem) }
        let size = min(request.maxEncryptionKeySize, p.maxEncryptionKeySize)
        if size < max(7, configuration.minEncryptionKeySize) { return fail(.encryptionKeySize, "key size \(size) is too small") }
        if !request.initiatorKeyDistribution.isSuperset(of: p.initiatorKeyDistribution)
            || !request.responderKeyDistribution.isSuperset(of: p.responderKeyDistribution) {
            return fail(.invalidParameters, "the response distributes keys the request did not offer")
        }
        response = p
        keySize = Int(size)
        secureConnections = request.authReq.contains(.secureConnections) && p.authReq.contains(.secureConnections)
        result.secureConnections = secureConnections
        result.bonded = request.authReq.bondingFlags == 1 && p.authReq.bondingFlags == 1
        result.encryptionKeySize = keySize
        // OOB: we never sent OOB data, so a peer claiming to hold ours cannot be served (2.3.5.1).
        if secureConnections && p.oobDataFlag == .present { return fail(.oobNotAvailable, "the peer asks for OOB data we never gave") }
        if secureConnections {
            do {
                keyPair = try randomness.keyPair()
            } catch {
                return fail(.unspecifiedReason, "\(error)")
            }
            guard let pk = keyPair?.publicKey else { return fail(.unspecifiedReason, "no key pair") }
            phase = .awaitingPublicKey
            return [.send(SMPPDU.pairingPublicKey(x: Array(pk.prefix(32)), y: Array(pk.suffix(32))).encoded)]
        }
        guard configuration.allowLegacy else { return fail(.authenticationRequirements, "the peer does not support LE Secure Connections") }
        // Legacy Just Works: TK = 0, Mconfirm = c1(TK, Mrand, ...) (2.3.5.5).
        guard let mrand = random(16) else { return fail(.unspecifiedReason, "no random number") }
        localRandom = mrand
        do {
            let mconfirm = try LegacyJustWorks.confirm(mrand, preq: preq, pres: pres, initiator: initiator, responder: responder)
            phase = .awaitingConfirm
            return [.send(SMPPDU.pairingConfirm(mconfirm).encoded)]
        } catch {
            return fail(.unspecifiedReason, "\(error)")
        }
    }

    // MARK: LE Secure Connections (2.3.5.6)

    private mutating func peerPublicKeyReceived(_ key: [UInt8]) -> [SMPAction] {
        guard let ours = keyPair else { return fail(.unspecifiedReason, "no key pair") }
        // Our own key sent back is no key exchange at all.
        if SMPCrypto.constantTimeEqual(Array(key.prefix(32)), ours.x) {
            return fail(.dhKeyCheckFailed, "the peer's public key is our own")
        }
        do {
            dhKey = try ours.dhKey(peerPublicKey: key)
        } catch .invalidPublicKey {
            // An invalid public key is reported as DHKey Check Failed (3.5.5, 2.3.5.6.1).
            return fail(.dhKeyCheckFailed, "the peer's public key is not on P-256")
        } catch {
            return fail(.unspecifiedReason, "\(error)")
        }
        peerPublicKey = key
        phase = .awaitingConfirm
        return []
    }

    private mutating func scRandomReceived(_ nb: [UInt8]) -> [SMPAction] {
        guard let ours = keyPair, let negotiated = response else { return fail(.unspecifiedReason, "no key pair") }
        do {
            // Cb = f4(PKbx, PKax, Nb, 0) (2.3.5.6.2).
            let cb = try SMPCrypto.f4(u: Array(peerPublicKey.prefix(32)), v: ours.x, x: nb, z: 0)
            guard SMPCrypto.constantTimeEqual(cb, peerConfirm) else { return fail(.confirmValueFailed, "Cb does not match Nb") }
            // f5 and f6 (2.3.5.6.5): we send Ea and check Eb.
            let keys = try SecureConnectionsKeys(dhKey: dhKey, na: localRandom, nb: nb, initiator: initiator, responder: responder,
                                                 ioCapA: request.ioCap, ioCapB: negotiated.ioCap, keySize: keySize)
            linkKey = keys.ltk
            expectedEb = keys.eb
            phase = .awaitingDHKeyCheck
            return [.send(SMPPDU.pairingDHKeyCheck(keys.ea).encoded)]
        } catch {
            return fail(.unspecifiedReason, "\(error)")
        }
    }

    private mutating func dhKeyCheckReceived(_ eb: [UInt8]) -> [SMPAction] {
        guard let key = linkKey else { return fail(.unspecifiedReason, "no keys") }
        guard SMPCrypto.constantTimeEqual(expectedEb, eb) else { return fail(.dhKeyCheckFailed, "Eb does not match") }
        result.longTermKey = key
        phase = .awaitingEncryption
        return [.startEncryption(key)]
    }

    // MARK: LE legacy pairing (2.3.5.5)

    private mutating func legacyRandomReceived(_ srand: [UInt8]) -> [SMPAction] {
        do {
            let sconfirm = try LegacyJustWorks.confirm(srand, preq: preq, pres: pres, initiator: initiator, responder: responder)
            guard SMPCrypto.constantTimeEqual(sconfirm, peerConfirm) else { return fail(.confirmValueFailed, "Sconfirm does not match Srand") }
            // STK = s1(TK, Srand, Mrand), masked to the key size; EDIV and Rand are zero.
            let key = try LegacyJustWorks.stk(srand: srand, mrand: localRandom, keySize: keySize)
            phase = .awaitingEncryption
            return [.startEncryption(key)]
        } catch {
            return fail(.unspecifiedReason, "\(error)")
        }
    }

    // MARK: Transport Specific Key Distribution (3.6)

    private mutating func keyReceived(_ pdu: SMPPDU) -> [SMPAction] {
        guard var collector = peerKeys else { return fail(.unspecifiedReason, "no key distribution") }
        if case let (reason, detail)? = collector.receive(pdu, into: &result) { return fail(reason, detail) }
        peerKeys = collector
        return collector.isDone ? distributeAndComplete() : []
    }

    /// The responder has distributed its keys; now ours (3.6.1), then done.
    private mutating func distributeAndComplete() -> [SMPAction] {
        var actions: [SMPAction] = []
        if let negotiated = response, negotiated.initiatorKeyDistribution.contains(.idKey), let id = configuration.localIdentity {
            actions += SMPKeys.pdus(ltk: nil, identity: id).map { .send($0) }
            result.sentIdentity = id
        }
        phase = .complete
        let done = result
        wipe()
        actions.append(.complete(done))
        return actions
    }

    // MARK: Failure

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
        expectedEb = []
        localRandom = []
        peerKeys = nil
        earlyPDUs = []
        if phase == .failed { result = PairingResult(secureConnections: false, bonded: false, encryptionKeySize: 16) }
    }

    private func random(_ n: Int) -> [UInt8]? { randomness.random(n) }
}

// MARK: - Security Request (2.4.6)

/// What the central does with a Security Request.
public enum SecurityRequestAnswer: Hashable, Sendable {
    /// Encrypt with the stored bond (LE Enable Encryption).
    case encrypt(LongTermKey)
    /// Pair: create an `SMPInitiator` and `start()` it (or feed the Security
    /// Request to a fresh one).
    case pair
    /// Send these bytes (Pairing Failed) and do not pair.
    case reject([UInt8])
    /// Not a Security Request, or a malformed one: nothing to do.
    case ignore
}

extension SMPInitiator {
    /// Decides how the central answers a Security Request (Core Vol 3 Part H
    /// 2.4.6): with a bond that is at least as strong as the peer asks for
    /// (Secure Connections when it sets SC) it encrypts; otherwise it pairs,
    /// or, when pairing is not allowed, answers Pairing Not Supported. MITM is
    /// not weighed: Just Works cannot give it, so pairing again would not help.
    public static func answer(securityRequest bytes: [UInt8], bond: LongTermKey?, pairingAllowed: Bool = true) -> SecurityRequestAnswer {
        guard case let .securityRequest(auth)? = try? SMPPDU.decode(bytes) else { return .ignore }
        if let bond, bond.secureConnections || !auth.contains(.secureConnections) { return .encrypt(bond) }
        if !pairingAllowed { return .reject(SMPPDU.pairingFailed(.pairingNotSupported).encoded) }
        return .pair
    }
}
