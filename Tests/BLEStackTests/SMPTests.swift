import Testing
@testable import BLEWire
@testable import BLESMP

private let irk16 = SMPSecret(hex("00 11 22 33 44 55 66 77 88 99 aa bb cc dd ee ff"))

/// Every SMP PDU next to its bytes (Core Vol 3 Part H 3.5, 3.6).
let smpVectors: [(SMPPDU, String)] = [
    (.pairingRequest(PairingParameters(ioCapability: .noInputNoOutput, authReq: [.bonding, .secureConnections], maxEncryptionKeySize: 16,
                                       initiatorKeyDistribution: [.idKey], responderKeyDistribution: [.encKey, .idKey])),
     "01 03 00 09 10 02 03"),
    (.pairingResponse(PairingParameters(ioCapability: .displayYesNo, oobDataFlag: .present, authReq: [.bonding, .mitm, .secureConnections, .keypress, .ct2],
                                        maxEncryptionKeySize: 7, initiatorKeyDistribution: [.encKey, .idKey, .signKey, .linkKey],
                                        responderKeyDistribution: [.signKey])),
     "02 01 01 3d 07 0f 04"),
    (.pairingConfirm(hex("00 01 02 03 04 05 06 07 08 09 0a 0b 0c 0d 0e 0f")), "03 00 01 02 03 04 05 06 07 08 09 0a 0b 0c 0d 0e 0f"),
    (.pairingRandom(hex("f0 f1 f2 f3 f4 f5 f6 f7 f8 f9 fa fb fc fd fe ff")), "04 f0 f1 f2 f3 f4 f5 f6 f7 f8 f9 fa fb fc fd fe ff"),
    (.pairingFailed(.dhKeyCheckFailed), "05 0b"),
    (.encryptionInformation(ltk: irk16), "06 00 11 22 33 44 55 66 77 88 99 aa bb cc dd ee ff"),
    (.centralIdentification(ediv: 0x1234, rand: 0x0102_0304_0506_0708), "07 34 12 08 07 06 05 04 03 02 01"),
    (.identityInformation(irk: irk16), "08 00 11 22 33 44 55 66 77 88 99 aa bb cc dd ee ff"),
    (.identityAddressInformation(type: 1, address: BDAddress(wire: hex("66 55 44 33 22 c1"))), "09 01 66 55 44 33 22 c1"),
    (.signingInformation(csrk: irk16), "0a 00 11 22 33 44 55 66 77 88 99 aa bb cc dd ee ff"),
    (.securityRequest([.bonding, .mitm]), "0b 05"),
    (.pairingPublicKey(x: P256Sample.publicAX, y: P256Sample.publicAY),
     "0c " + Hex.string(P256Sample.publicAX) + " " + Hex.string(P256Sample.publicAY)),
    (.pairingDHKeyCheck(hex("e0 e1 e2 e3 e4 e5 e6 e7 e8 e9 ea eb ec ed ee ef")), "0d e0 e1 e2 e3 e4 e5 e6 e7 e8 e9 ea eb ec ed ee ef"),
    (.keypressNotification(.digitEntered), "0e 01"),
    (.unknown(SMPCode(rawValue: 0x0F), hex("aa bb")), "0f aa bb"),
    (.unknown(SMPCode(rawValue: 0x42), []), "42"),
]

@Suite("SMP PDUs (Core Vol 3 Part H 3)")
struct SMPPDUTests {
    @Test("every PDU encodes to its bytes and decodes back", arguments: smpVectors.indices)
    func roundTrip(i: Int) throws {
        let (pdu, wire) = smpVectors[i]
        #expect(pdu.encoded == hex(wire))
        let back = try SMPPDU.decode(hex(wire))
        #expect(back == pdu)
        #expect(back.code == pdu.code)
        #expect(back.encoded == hex(wire))
    }

    @Test("every code in the table has a vector and a name")
    func everyCodeCovered() {
        let covered = Set(smpVectors.map { hex($0.1)[0] })
        for (code, info) in SMPCode.table {
            #expect(covered.contains(code), "code 0x\(Hex.int(code, width: 2)) \(info.name) has no vector")
            #expect(SMPCode(rawValue: code).name == info.name)
        }
        #expect(SMPCode(rawValue: 0x42).name == "Unknown SMP command 0x42")
    }

    @Test("a truncated or overlong PDU throws WireError, never traps", arguments: smpVectors.indices)
    func truncated(i: Int) {
        let wire = hex(smpVectors[i].1)
        guard SMPCode(rawValue: wire[0]).info != nil else { return }
        for p in prefixes(wire) { expectWireError("prefix of \(wire.count)") { try SMPPDU.decode(p) } }
        expectWireError("trailing byte") { try SMPPDU.decode(wire + [0x00]) }
    }

    @Test("fixed-size fields encode to their size even from short or long arrays")
    func fixedSizes() throws {
        #expect(SMPPDU.pairingConfirm([1, 2]).encoded.count == 17)
        #expect(SMPPDU.pairingPublicKey(x: [UInt8](repeating: 1, count: 40), y: []).encoded.count == 65)
        #expect(SMPPDU.encryptionInformation(ltk: SMPSecret([])).encoded == [0x06] + [UInt8](repeating: 0, count: 16))
        _ = try SMPPDU.decode(SMPPDU.pairingDHKeyCheck([]).encoded)
    }

    @Test("reasons, IO capabilities and keypress types are open: unknown values survive and print as hex")
    func openValues() throws {
        #expect(PairingFailedReason.keyRejected.description == "Key Rejected (0x0f)")
        #expect(PairingFailedReason(rawValue: 0x77).description == "Unknown reason (0x77)")
        #expect(try SMPPDU.decode(hex("05 77")) == .pairingFailed(PairingFailedReason(rawValue: 0x77)))
        #expect(IOCapability(rawValue: 9).description == "reserved 0x09")
        #expect(KeypressNotificationType(rawValue: 7).description == "reserved 0x07")
        for r in UInt8(1)...0x10 { #expect(PairingFailedReason(rawValue: r).name != "Unknown reason") }
    }

    @Test("AuthReq and key distribution bits print by name")
    func bits() {
        #expect(AuthReq(rawValue: 0x2D).description == "0x2d (Bonding, MITM, SC, CT2)")
        #expect(AuthReq(rawValue: 0xC2).description == "0xc2 (Bonding_Flags reserved 0b10, RFU 0xc0)")
        #expect(AuthReq([]).description == "0x00 (No Bonding)")
        #expect(KeyDistribution(rawValue: 0x13).description == "0x13 (EncKey, IdKey, RFU 0x10)")
        #expect(KeyDistribution([]).description == "0x00 (none)")
        #expect(AuthReq(rawValue: 0x09).bondingFlags == 1)
    }

    @Test("the tracer line masks keys unless asked")
    func describeMasksKeys() throws {
        let ltk = try SMPPDU.decode(hex("06 00 11 22 33 44 55 66 77 88 99 aa bb cc dd ee ff"))
        #expect(ltk.description == "Encryption Information: LTK <hidden>")
        #expect(ltk.describe(showKeys: true) == "Encryption Information: LTK ffeeddccbbaa99887766554433221100")
        let ident = try SMPPDU.decode(hex("07 34 12 08 07 06 05 04 03 02 01"))
        #expect(ident.description == "Central Identification: EDIV <hidden> Rand <hidden>")
        #expect(ident.describe(showKeys: true) == "Central Identification: EDIV 0x1234 Rand 0x0102030405060708")
        #expect(!SMPPDU.pairingRandom(hex("f0 f1 f2 f3 f4 f5 f6 f7 f8 f9 fa fb fc fd fe ff")).description.contains("f0"))
        #expect(SMPPDU.identityInformation(irk: irk16).description == "Identity Information: IRK <hidden>")
        #expect(SMPPDU.signingInformation(csrk: irk16).description == "Signing Information: CSRK <hidden>")
        // Values that are not secret are shown.
        #expect(SMPPDU.pairingFailed(.confirmValueFailed).description == "Pairing Failed: Confirm Value Failed (0x04)")
        #expect(try SMPPDU.decode(hex("09 00 66 55 44 33 22 11")).description == "Identity Address Information: 11:22:33:44:55:66 (public)")
        #expect(try SMPPDU.decode(hex("01 03 00 09 10 02 03")).description
                == "Pairing Request: IO Capability NoInputNoOutput, OOB data not present, AuthReq 0x09 (Bonding, SC), Max Key Size 16, "
                + "Initiator Keys 0x02 (IdKey), Responder Keys 0x03 (EncKey, IdKey)")
        // A malformed key PDU still hides its bytes.
        let bad = SMPPDU.describe(bytes: hex("06 00 11 22 33"), showKeys: false)
        #expect(bad.hasPrefix("Encryption Information: malformed") && bad.hasSuffix("<4 bytes hidden>") && !bad.contains("22"), "\(bad)")
        #expect(SMPPDU.describe(bytes: [], showKeys: true) == "SMP: empty PDU")
    }
}

// MARK: - A responder for scripted exchanges

/// A peripheral's Security Manager written for the tests from the
/// specification, with the same crypto functions: it answers the central's
/// PDUs and can be told to misbehave at one step.
final class SimulatedResponder {
    enum Fault { case none, wrongConfirm, wrongDHKeyCheck, offCurveKey, reflectKey }

    var params: PairingParameters
    var fault: Fault = .none
    let initiator: DeviceAddress, responder: DeviceAddress
    var identity = PeerIdentity(irk: SMPSecret(hex("a0 a1 a2 a3 a4 a5 a6 a7 a8 a9 aa ab ac ad ae af")),
                                address: DeviceAddress(BDAddress(wire: hex("01 02 03 04 05 c6")), .random))
    var legacyLTK = LongTermKey(key: SMPSecret(hex("b0 b1 b2 b3 b4 b5 b6 b7 b8 b9 ba bb bc bd be bf")), ediv: 0xBEEF,
                                rand: 0x1122_3344_5566_7788, secureConnections: false)
    var csrk = SMPSecret(hex("c0 c1 c2 c3 c4 c5 c6 c7 c8 c9 ca cb cc cd ce cf"))

    private(set) var negotiated: PairingParameters?
    private(set) var preq: [UInt8] = [], pres: [UInt8] = []
    private(set) var key: [UInt8]? // the STK or LTK it would encrypt with
    private(set) var receivedIdentity: [SMPPDU] = []
    private var keyPair: P256KeyPair?
    private var peerKey: [UInt8] = []
    private var nb = [UInt8](repeating: 0, count: 16)
    private var mconfirm: [UInt8] = []

    init(_ params: PairingParameters, initiator: DeviceAddress, responder: DeviceAddress) {
        self.params = params
        self.initiator = initiator
        self.responder = responder
    }

    var secureConnections: Bool {
        guard let n = negotiated else { return false }
        return n.authReq.contains(.secureConnections) && AuthReq(rawValue: preq[3]).contains(.secureConnections)
    }
    var keySize: Int { Int(min(params.maxEncryptionKeySize, preq.count == 7 ? preq[4] : 16)) }

    /// The PDUs it answers `bytes` with.
    func receive(_ bytes: [UInt8]) throws -> [[UInt8]] {
        let pdu = try SMPPDU.decode(bytes)
        switch pdu {
        case let .pairingRequest(req):
            preq = bytes
            var p = params
            p.initiatorKeyDistribution = params.initiatorKeyDistribution.intersection(req.initiatorKeyDistribution)
            p.responderKeyDistribution = params.responderKeyDistribution.intersection(req.responderKeyDistribution)
            negotiated = p
            pres = SMPPDU.pairingResponse(p).encoded
            return [pres]
        case let .pairingPublicKey(x, y):
            peerKey = x + y
            let kp = try P256KeyPair()
            keyPair = kp
            nb = try SMPCrypto.random(16)
            var cb = try SMPCrypto.f4(u: kp.x, v: x, x: nb, z: 0)
            if fault == .wrongConfirm { cb[0] ^= 1 }
            var pk = kp.publicKey
            if fault == .offCurveKey { pk[63] ^= 0x40 }
            if fault == .reflectKey { pk = peerKey }
            return [SMPPDU.pairingPublicKey(x: Array(pk.prefix(32)), y: Array(pk.suffix(32))).encoded, SMPPDU.pairingConfirm(cb).encoded]
        case let .pairingConfirm(c):
            mconfirm = c
            nb = try SMPCrypto.random(16)
            var sconfirm = try SMPCrypto.c1(k: [UInt8](repeating: 0, count: 16), r: nb, preq: preq, pres: pres, initiator: initiator, responder: responder)
            if fault == .wrongConfirm { sconfirm[15] ^= 0x80 }
            return [SMPPDU.pairingConfirm(sconfirm).encoded]
        case let .pairingRandom(r):
            if secureConnections { return [SMPPDU.pairingRandom(nb).encoded] }
            let zero = [UInt8](repeating: 0, count: 16)
            let expected = try SMPCrypto.c1(k: zero, r: r, preq: preq, pres: pres, initiator: initiator, responder: responder)
            guard expected == mconfirm else { return [SMPPDU.pairingFailed(.confirmValueFailed).encoded] }
            key = SMPCrypto.masked(try SMPCrypto.s1(k: zero, r1: nb, r2: r), size: keySize)
            return [SMPPDU.pairingRandom(nb).encoded]
        case let .pairingDHKeyCheck(ea):
            guard let kp = keyPair, let n = negotiated else { return [SMPPDU.pairingFailed(.unspecifiedReason).encoded] }
            let dh = try kp.dhKey(peerPublicKey: peerKey)
            let na = lastNa
            let keys = try SMPCrypto.f5(w: dh, n1: na, n2: nb, a1: initiator, a2: responder)
            let zero = [UInt8](repeating: 0, count: 16)
            let reqParams = PairingParameters(ioCapability: IOCapability(rawValue: preq[1]), oobDataFlag: OOBDataFlag(rawValue: preq[2]),
                                              authReq: AuthReq(rawValue: preq[3]), initiatorKeyDistribution: [], responderKeyDistribution: [])
            let expectedEa = try SMPCrypto.f6(w: keys.macKey, n1: na, n2: nb, r: zero, ioCap: reqParams.ioCap, a1: initiator, a2: responder)
            guard expectedEa == ea else { return [SMPPDU.pairingFailed(.dhKeyCheckFailed).encoded] }
            var eb = try SMPCrypto.f6(w: keys.macKey, n1: nb, n2: na, r: zero, ioCap: n.ioCap, a1: responder, a2: initiator)
            if fault == .wrongDHKeyCheck { eb[3] ^= 0x10 }
            key = SMPCrypto.masked(keys.ltk, size: keySize)
            return [SMPPDU.pairingDHKeyCheck(eb).encoded]
        case .identityInformation, .identityAddressInformation, .encryptionInformation, .centralIdentification, .signingInformation:
            receivedIdentity.append(pdu)
            return []
        default:
            return []
        }
    }

    /// Na, seen in the central's Pairing Random (SC).
    var lastNa: [UInt8] = []

    /// Its keys, in the order of 3.6.1, once the link is encrypted.
    func distribution() -> [[UInt8]] {
        guard let n = negotiated else { return [] }
        var out: [[UInt8]] = []
        let keys = n.responderKeyDistribution
        if keys.contains(.encKey) && !secureConnections {
            out.append(SMPPDU.encryptionInformation(ltk: legacyLTK.key).encoded)
            out.append(SMPPDU.centralIdentification(ediv: legacyLTK.ediv, rand: legacyLTK.rand).encoded)
        }
        if keys.contains(.idKey) {
            out.append(SMPPDU.identityInformation(irk: identity.irk).encoded)
            out.append(SMPPDU.identityAddressInformation(type: identity.address.type.isRandom ? 1 : 0, address: identity.address.address).encoded)
        }
        if keys.contains(.signKey) { out.append(SMPPDU.signingInformation(csrk: csrk).encoded) }
        return out
    }
}

/// What a scripted exchange ended with.
struct Exchange {
    var sent: [[UInt8]] = [] // by the central, in order
    var encryptedWith: LongTermKey?
    var outcome: SMPAction?
    var sentCodes: [UInt8] { sent.compactMap(\.first) }
}

private let central = DeviceAddress(BDAddress(wire: hex("11 22 33 44 55 c0")), .random)
private let peripheral = DeviceAddress(BDAddress(wire: hex("a1 a2 a3 a4 a5 a6")), .public)

private func responderParams(sc: Bool = true, maxKey: UInt8 = 16, oob: OOBDataFlag = .notPresent,
                             initiatorKeys: KeyDistribution = [.idKey], responderKeys: KeyDistribution = [.encKey, .idKey]) -> PairingParameters {
    PairingParameters(ioCapability: .noInputNoOutput, oobDataFlag: oob, authReq: sc ? [.bonding, .secureConnections] : [.bonding],
                      maxEncryptionKeySize: maxKey, initiatorKeyDistribution: initiatorKeys, responderKeyDistribution: responderKeys)
}

/// Runs a whole pairing between `initiator` and `responder`: every PDU the
/// central sends goes to the responder and its answers come back; at
/// `.startEncryption` the link is "encrypted" (the keys must agree) and the
/// responder distributes its keys.
private func runExchange(_ initiator: inout SMPInitiator, _ responder: SimulatedResponder,
                         encryptionStatus: UInt8 = 0) throws -> Exchange {
    var ex = Exchange()
    var queue = initiator.start()
    var steps = 0
    while !queue.isEmpty, steps < 100 {
        steps += 1
        let action = queue.removeFirst()
        switch action {
        case let .send(bytes):
            ex.sent.append(bytes)
            if case let .pairingRandom(na)? = try? SMPPDU.decode(bytes) { responder.lastNa = na }
            for answer in try responder.receive(bytes) { queue += initiator.receive(answer) }
        case let .startEncryption(key):
            ex.encryptedWith = key
            #expect(key.key.bytes == responder.key, "the central and the responder encrypt with different keys")
            queue += initiator.encryptionChanged(status: encryptionStatus)
            if encryptionStatus == 0 { for pdu in responder.distribution() { queue += initiator.receive(pdu) } }
        case .complete, .failed:
            ex.outcome = action
        }
    }
    return ex
}

@Suite("SMP initiator: scripted exchanges (Core Vol 3 Part H 2.3, C.2)")
struct SMPInitiatorTests {
    @Test("LE Secure Connections Just Works: key exchange, confirm, random, DHKey checks, LTK, keys both ways")
    func secureConnectionsHappyPath() throws {
        var config = SMPConfiguration()
        let ours = LocalIdentity(irk: SMPSecret(hex("d0 d1 d2 d3 d4 d5 d6 d7 d8 d9 da db dc dd de df")),
                                 address: DeviceAddress(BDAddress(wire: hex("01 00 00 00 00 c0")), .random))
        config.localIdentity = ours
        var initiator = SMPInitiator(configuration: config, initiator: central, responder: peripheral)
        let responder = SimulatedResponder(responderParams(), initiator: central, responder: peripheral)
        let ex = try runExchange(&initiator, responder)

        // Pairing Request, Public Key, Random, DHKey Check, then our identity.
        #expect(ex.sentCodes == [0x01, 0x0C, 0x04, 0x0D, 0x08, 0x09])
        #expect(ex.sent.first == hex("01 03 00 09 10 02 03"))
        guard case let .complete(result)? = ex.outcome else { Issue.record("outcome \(String(describing: ex.outcome))"); return }
        #expect(initiator.phase == .complete)
        #expect(result.secureConnections && result.bonded && result.encryptionKeySize == 16)
        #expect(result.longTermKey?.key.bytes == responder.key)
        #expect(result.longTermKey?.ediv == 0 && result.longTermKey?.rand == 0)
        #expect(ex.encryptedWith == result.longTermKey)
        #expect(result.peerIdentity == responder.identity)
        #expect(result.peerCSRK == nil)
        #expect(result.sentIdentity == ours)
        #expect(responder.receivedIdentity == [.identityInformation(irk: ours.irk),
                                               .identityAddressInformation(type: 1, address: ours.address.address)])
        // Nothing about the result prints a key.
        let text = "\(result) \(SMPAction.complete(result))"
        #expect(!text.contains(Hex.string(responder.identity.irk.bytes.reversed(), separator: "")))
        #expect(!text.contains("a0a1") && !text.contains("dfde"), "\(text)")
    }

    @Test("LE Secure Connections with a 7-byte key: the LTK is masked on both sides")
    func secureConnectionsShortKey() throws {
        var config = SMPConfiguration()
        config.peerKeys = [.encKey, .idKey, .signKey]
        var initiator = SMPInitiator(configuration: config, initiator: central, responder: peripheral)
        let responder = SimulatedResponder(responderParams(maxKey: 7, responderKeys: [.idKey, .signKey]), initiator: central, responder: peripheral)
        let ex = try runExchange(&initiator, responder)
        guard case let .complete(result)? = ex.outcome else { Issue.record("outcome \(String(describing: ex.outcome))"); return }
        #expect(result.encryptionKeySize == 7)
        #expect(result.longTermKey?.key.bytes.suffix(9).allSatisfy { $0 == 0 } == true)
        #expect(result.peerCSRK == responder.csrk)
        #expect(result.sentIdentity == nil) // none configured, none offered
        #expect(ex.sentCodes == [0x01, 0x0C, 0x04, 0x0D])
    }

    @Test("LE legacy Just Works: TK 0, c1 confirm, s1 STK, the peer's LTK/EDIV/Rand and identity")
    func legacyHappyPath() throws {
        var initiator = SMPInitiator(initiator: central, responder: peripheral)
        let responder = SimulatedResponder(responderParams(sc: false), initiator: central, responder: peripheral)
        let ex = try runExchange(&initiator, responder)
        #expect(ex.sentCodes == [0x01, 0x03, 0x04])
        guard case let .complete(result)? = ex.outcome else { Issue.record("outcome \(String(describing: ex.outcome))"); return }
        #expect(!result.secureConnections)
        // The link was encrypted with the STK; the stored key is the peer's distributed LTK.
        #expect(ex.encryptedWith?.key.bytes == responder.key)
        #expect(ex.encryptedWith?.ediv == 0 && ex.encryptedWith?.rand == 0)
        #expect(result.longTermKey?.key == responder.legacyLTK.key)
        #expect(result.longTermKey?.ediv == 0xBEEF && result.longTermKey?.rand == 0x1122_3344_5566_7788)
        #expect(result.peerIdentity == responder.identity)
    }

    @Test("Secure Connections Only mode refuses a legacy peer with Authentication Requirements")
    func secureConnectionsOnly() throws {
        var config = SMPConfiguration()
        config.allowLegacy = false
        var initiator = SMPInitiator(configuration: config, initiator: central, responder: peripheral)
        let ex = try runExchange(&initiator, SimulatedResponder(responderParams(sc: false), initiator: central, responder: peripheral))
        #expect(ex.sent.last == hex("05 03"))
        #expect(ex.outcome == .failed(.local(.authenticationRequirements, detail: "the peer does not support LE Secure Connections")))
    }

    @Test("local failures send Pairing Failed with the reason the spec gives", arguments: [
        ("off-curve public key", UInt8(0x0B)), ("reflected public key", 0x0B), ("wrong Cb", 0x04), ("wrong Eb", 0x0B),
        ("wrong Sconfirm", 0x04), ("key size 6", 0x06), ("OOB claimed", 0x02), ("extra keys", 0x0A),
    ] as [(String, UInt8)])
    func localFailures(kind: String, reason: UInt8) throws {
        var params = responderParams()
        var fault = SimulatedResponder.Fault.none
        switch kind {
        case "off-curve public key": fault = .offCurveKey
        case "reflected public key": fault = .reflectKey
        case "wrong Cb": fault = .wrongConfirm
        case "wrong Eb": fault = .wrongDHKeyCheck
        case "wrong Sconfirm": fault = .wrongConfirm; params = responderParams(sc: false)
        case "key size 6": params.maxEncryptionKeySize = 6
        case "OOB claimed": params.oobDataFlag = .present
        default: params.responderKeyDistribution = [.encKey, .idKey, .signKey]
        }
        var initiator = SMPInitiator(initiator: central, responder: peripheral)
        let responder = SimulatedResponder(params, initiator: central, responder: peripheral)
        responder.fault = fault
        if kind == "extra keys" {
            // The simulated responder only narrows; answer by hand with a key the request did not offer.
            _ = initiator.start()
            let actions = initiator.receive(hex("02 03 00 09 10 02 07"))
            #expect(actions.first == .send([0x05, reason]))
            #expect(initiator.phase == .failed)
            return
        }
        let ex = try runExchange(&initiator, responder)
        #expect(ex.sent.last == [0x05, reason], "\(kind): sent \(ex.sent.map { Hex.string($0) })")
        guard case let .failed(.local(r, _))? = ex.outcome else { Issue.record("\(kind): outcome \(String(describing: ex.outcome))"); return }
        #expect(r.rawValue == reason)
        #expect(ex.encryptedWith == nil)
        #expect(initiator.phase == .failed)
        // Once failed, nothing more happens.
        #expect(initiator.receive(hex("05 08")).isEmpty)
        #expect(initiator.encryptionChanged(status: 0).isEmpty)
    }

    @Test("every Pairing Failed reason from the peer ends pairing with that reason and no answer",
          arguments: Array(UInt8(0x01)...0x10) + [0x00, 0x42, 0xFF])
    func peerPairingFailed(reason: UInt8) throws {
        // At three points: after the request, after the public key exchange, during legacy confirm.
        for stage in 0..<3 {
            var initiator = SMPInitiator(initiator: central, responder: peripheral)
            _ = initiator.start()
            if stage >= 1 {
                let response = stage == 1 ? "02 03 00 09 10 00 02" : "02 03 00 01 10 00 02"
                let a = initiator.receive(hex(response))
                #expect(a.count == 1)
            }
            let actions = initiator.receive([0x05, reason])
            #expect(actions == [.failed(.peer(PairingFailedReason(rawValue: reason)))], "stage \(stage)")
            #expect(initiator.phase == .failed)
            if case let .failed(f)? = actions.first { #expect(f.reason?.rawValue == reason) }
        }
    }

    @Test("a malformed Pairing Failed still ends pairing, unanswered")
    func malformedPairingFailed() {
        var initiator = SMPInitiator(initiator: central, responder: peripheral)
        _ = initiator.start()
        #expect(initiator.receive(hex("05")) == [.failed(.peer(.unspecifiedReason))])
        var other = SMPInitiator(initiator: central, responder: peripheral)
        _ = other.start()
        #expect(other.receive(hex("05 0b 00")) == [.failed(.peer(.dhKeyCheckFailed))])
    }

    @Test("protocol errors: unknown code, wrong length, out of order, a Pairing Request to the central", arguments: [
        ("0f 01", UInt8(0x07)), ("02 03 00 09 10 02", UInt8(0x0A)), ("03 00 01", UInt8(0x0A)),
        ("04 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00", UInt8(0x08)), ("01 03 00 09 10 02 03", UInt8(0x07)), ("", UInt8(0x0A)),
    ] as [(String, UInt8)])
    func protocolErrors(input: String, reason: UInt8) {
        var initiator = SMPInitiator(initiator: central, responder: peripheral)
        _ = initiator.start()
        let actions = initiator.receive(hex(input))
        #expect(actions.first == .send([0x05, reason]), "\(input): \(actions)")
        if case let .failed(f)? = actions.last { #expect(f.reason?.rawValue == reason) } else { Issue.record("no failure for \(input)") }
    }

    @Test("SMP timeout: failed, nothing sent, later input ignored (3.4)")
    func timeout() {
        #expect(SMPInitiator.timeoutMs == 30_000)
        var initiator = SMPInitiator(initiator: central, responder: peripheral)
        #expect(initiator.timeout().isEmpty) // not started
        _ = initiator.start()
        #expect(initiator.isActive)
        #expect(initiator.timeout() == [.failed(.timeout)])
        #expect(!initiator.isActive)
        #expect(initiator.receive(hex("02 03 00 09 10 02 03")).isEmpty)
        #expect(initiator.start().isEmpty)
        #expect(initiator.cancel().isEmpty)
    }

    @Test("cancel sends Pairing Failed with the caller's reason")
    func cancel() {
        var initiator = SMPInitiator(initiator: central, responder: peripheral)
        _ = initiator.start()
        let a = initiator.cancel(reason: .busy)
        #expect(a == [.send(hex("05 10")), .failed(.local(.busy, detail: "cancelled"))])
    }

    @Test("a failed encryption ends pairing with its HCI status")
    func encryptionFails() throws {
        var initiator = SMPInitiator(initiator: central, responder: peripheral)
        let ex = try runExchange(&initiator, SimulatedResponder(responderParams(), initiator: central, responder: peripheral), encryptionStatus: 0x06)
        #expect(ex.outcome == .failed(.encryption(status: 0x06)))
        #expect(ex.sentCodes == [0x01, 0x0C, 0x04, 0x0D])
    }

    @Test("keys that overtake the Encryption Change wait for it")
    func keysBeforeEncryptionChange() throws {
        var initiator = SMPInitiator(initiator: central, responder: peripheral)
        let responder = SimulatedResponder(responderParams(sc: false), initiator: central, responder: peripheral)
        var queue = initiator.start()
        var key: LongTermKey?
        while let action = queue.first {
            queue.removeFirst()
            switch action {
            case let .send(bytes): for answer in try responder.receive(bytes) { queue += initiator.receive(answer) }
            case let .startEncryption(k): key = k
            default: Issue.record("unexpected \(action)")
            }
        }
        #expect(key != nil && initiator.phase == .awaitingEncryption)
        for pdu in responder.distribution() { #expect(initiator.receive(pdu).isEmpty) }
        let done = initiator.encryptionChanged(status: 0)
        guard case let .complete(result)? = done.last else { Issue.record("\(done)"); return }
        #expect(result.longTermKey?.ediv == 0xBEEF)
        #expect(result.peerIdentity == responder.identity)
    }

    @Test("keys out of order fail with Unspecified Reason")
    func keysOutOfOrder() throws {
        var initiator = SMPInitiator(initiator: central, responder: peripheral)
        let responder = SimulatedResponder(responderParams(sc: false), initiator: central, responder: peripheral)
        var queue = initiator.start()
        while let action = queue.first {
            queue.removeFirst()
            if case let .send(bytes) = action { for answer in try responder.receive(bytes) { queue += initiator.receive(answer) } }
        }
        _ = initiator.encryptionChanged(status: 0)
        let keys = responder.distribution()
        let a = initiator.receive(keys[2]) // Identity Information before Encryption Information
        #expect(a.first == .send(hex("05 08")))
    }

    @Test("a Security Request starts pairing; during pairing it and keypress notifications are ignored")
    func securityRequestStarts() {
        var initiator = SMPInitiator(initiator: central, responder: peripheral)
        #expect(initiator.receive(hex("02 03 00 09 10 02 03")).isEmpty) // nothing before start but a Security Request
        #expect(initiator.receive(hex("0b 09")) == [.send(hex("01 03 00 09 10 00 03"))])
        #expect(initiator.phase == .awaitingPairingResponse)
        #expect(initiator.receive(hex("0b 09")).isEmpty)
        #expect(initiator.receive(hex("0e 01")).isEmpty)
        #expect(initiator.phase == .awaitingPairingResponse)
    }

    @Test("answering a Security Request: encrypt with a good enough bond, else pair, else Pairing Not Supported")
    func securityRequestAnswer() {
        let sc = LongTermKey(key: SMPSecret([UInt8](repeating: 1, count: 16)), secureConnections: true)
        let legacy = LongTermKey(key: SMPSecret([UInt8](repeating: 2, count: 16)), ediv: 1, rand: 2, secureConnections: false)
        #expect(SMPInitiator.answer(securityRequest: hex("0b 09"), bond: sc) == .encrypt(sc))
        #expect(SMPInitiator.answer(securityRequest: hex("0b 01"), bond: legacy) == .encrypt(legacy))
        #expect(SMPInitiator.answer(securityRequest: hex("0b 09"), bond: legacy) == .pair)
        #expect(SMPInitiator.answer(securityRequest: hex("0b 0d"), bond: nil) == .pair)
        #expect(SMPInitiator.answer(securityRequest: hex("0b 01"), bond: nil, pairingAllowed: false) == .reject(hex("05 05")))
        #expect(SMPInitiator.answer(securityRequest: hex("0b"), bond: sc) == .ignore)
        #expect(SMPInitiator.answer(securityRequest: hex("01 03 00 09 10 02 03"), bond: sc) == .ignore)
    }

    @Test("no input traps the initiator in any phase: every prefix of every vector, and garbage")
    func noTraps() throws {
        var inputs: [[UInt8]] = []
        for v in smpVectors.map({ hex($0.1) }) { inputs += prefixes(v) + [v, v + [0]] }
        var state: UInt64 = 0x1234_5678
        for _ in 0..<200 {
            state = state &* 6364136223846793005 &+ 1442695040888963407
            let n = Int(state >> 58)
            let s = state
            inputs.append((0..<n).map { i -> UInt8 in UInt8(truncatingIfNeeded: (s >> UInt64(i % 56)) &+ UInt64(i)) })
        }
        // Phases reached by replaying a real SC exchange up to a point.
        for stop in 0..<6 {
            for input in inputs {
                var initiator = SMPInitiator(initiator: central, responder: peripheral)
                let responder = SimulatedResponder(responderParams(), initiator: central, responder: peripheral)
                var queue = initiator.start()
                var steps = 0
                while steps < stop, let action = queue.first {
                    queue.removeFirst()
                    steps += 1
                    switch action {
                    case let .send(b):
                        if case let .pairingRandom(na)? = try? SMPPDU.decode(b) { responder.lastNa = na }
                        for a in try responder.receive(b) { queue += initiator.receive(a) }
                    case .startEncryption: queue += initiator.encryptionChanged(status: 0)
                    default: break
                    }
                }
                _ = initiator.receive(input)
                _ = initiator.encryptionChanged(status: 0)
                _ = initiator.receive(input)
            }
        }
    }
}
