import Testing
@testable import BLEWire
@testable import BLESMP

// Appendix D's nonces and addresses (D.2 - D.4): Na = N1, Nb = N2, A = A1, B = A2.
private let na = specLE("d5cb8454 d177733e ffffb2ec 712baeab")
private let nb = specLE("a6e8e7cc 25a75f6e 216583f7 ff3dc4cf")
private let specA = DeviceAddress(BDAddress(wire: specLE("56123737bfce")), .public)
private let specB = DeviceAddress(BDAddress(wire: specLE("a713702dcfc1")), .public)
/// D.3: f5(DHKey, N1, N2, A1, A2).
private let specMacKey = specLE("2965f176 a1084a02 fd3f6a20 ce636e20")
private let specLTK = specLE("69867911 69d7cd23 980522b5 94750a38")
private let zero = [UInt8](repeating: 0, count: 16)

private let ourIdentity = LocalIdentity(irk: SMPSecret(hex("e0 e1 e2 e3 e4 e5 e6 e7 e8 e9 ea eb ec ed ee ef")),
                                        address: DeviceAddress(BDAddress(wire: hex("06 05 04 03 02 c1")), .random))
private let clientIRK = SMPSecret(hex("a0 a1 a2 a3 a4 a5 a6 a7 a8 a9 aa ab ac ad ae af"))
private let clientIdentity = DeviceAddress(BDAddress(wire: hex("11 22 33 44 55 66")), .public)

/// Nonces handed out in order (then zeros), and a fixed private key.
final class ScriptedRandomness {
    var values: [[UInt8]]
    init(_ values: [[UInt8]]) { self.values = values }

    func randomness(privateKey: [UInt8] = P256Sample.privateB) -> SMPRandomness {
        SMPRandomness(random: { [self] n in
            guard !values.isEmpty else { return [UInt8](repeating: 0, count: n) }
            let v = values.removeFirst()
            #expect(v.count == n, "asked for \(n) random bytes, scripted \(v.count)")
            return v
        }, keyPair: { try P256KeyPair(privateKey: privateKey) })
    }
}

private func config(legacy: Bool = true, sc: Bool = true, identity: LocalIdentity? = ourIdentity) -> SMPConfiguration {
    var c = SMPConfiguration()
    c.allowLegacy = legacy
    c.secureConnections = sc
    c.localIdentity = identity
    c.peerKeys = [.idKey]
    return c
}

private func responder(_ c: SMPConfiguration = config(), initiator: DeviceAddress = specA, responder: DeviceAddress = specB,
                       nonces: [[UInt8]] = []) -> SMPResponder {
    var r = SMPResponder(configuration: c, initiator: initiator, responder: responder)
    r.randomness = ScriptedRandomness(nonces).randomness()
    return r
}

private func sent(_ actions: [SMPAction]) -> [[UInt8]] {
    actions.compactMap { if case let .send(b) = $0 { return b } else { return nil } }
}

private func failure(_ actions: [SMPAction]) -> PairingFailure? {
    for a in actions { if case let .failed(f) = a { return f } }
    return nil
}

private func completion(_ actions: [SMPAction]) -> PairingResult? {
    for a in actions { if case let .complete(r) = a { return r } }
    return nil
}

/// Pairing Request: NoInputNoOutput, no OOB, AuthReq as given, 16 bytes, initiator keys IdKey, responder keys EncKey|IdKey.
private func request(auth: String = "09", keys: String = "02 03") -> [UInt8] { hex("01 03 00 \(auth) 10 \(keys)") }

private let clientKeys = [SMPPDU.identityInformation(irk: clientIRK).encoded,
                          SMPPDU.identityAddressInformation(type: 0, address: clientIdentity.address).encoded]

@Suite("SMP responder: scripted exchanges (Core Vol 3 Part H 2.3, 3.6, C.2)")
struct SMPResponderTests {
    @Test("LE Secure Connections Just Works with Appendix D's keys and nonces: Cb, Nb, Ea checked, Eb, the LTK of D.3")
    func secureConnectionsSampleData() throws {
        var r = responder(nonces: [nb])
        // Pairing Response: NoInputNoOutput, no OOB, Bonding|SC, 16, IdKey of the initiator, EncKey|IdKey of ours.
        #expect(sent(r.receive(request())) == [hex("02 03 00 09 10 02 03")])
        #expect(r.phase == .awaitingPublicKey)

        // The initiator's public key (the sample pair A); ours is pair B, then Cb = f4(PKbx, PKax, Nb, 0).
        let out = sent(r.receive(SMPPDU.pairingPublicKey(x: P256Sample.publicAX, y: P256Sample.publicAY).encoded))
        #expect(out.count == 2)
        #expect(out.first == SMPPDU.pairingPublicKey(x: P256Sample.publicBX, y: P256Sample.publicBY).encoded)
        let cb = try SMPCrypto.f4(u: P256Sample.publicBX, v: P256Sample.publicAX, x: nb, z: 0)
        #expect(out.last == SMPPDU.pairingConfirm(cb).encoded)

        // Na, answered with Nb.
        #expect(sent(r.receive(SMPPDU.pairingRandom(na).encoded)) == [SMPPDU.pairingRandom(nb).encoded])

        // Ea = f6(MacKey of D.3, Na, Nb, 0, IOcapA, A, B); the answer Eb = f6(MacKey, Nb, Na, 0, IOcapB, B, A).
        let ea = try SMPCrypto.f6(w: specMacKey, n1: na, n2: nb, r: zero, ioCap: hex("03 00 09"), a1: specA, a2: specB)
        let eb = try SMPCrypto.f6(w: specMacKey, n1: nb, n2: na, r: zero, ioCap: hex("03 00 09"), a1: specB, a2: specA)
        #expect(r.key(ediv: 0, rand: 0) == nil, "no key before the DHKey checks")
        #expect(sent(r.receive(SMPPDU.pairingDHKeyCheck(ea).encoded)) == [SMPPDU.pairingDHKeyCheck(eb).encoded])
        #expect(r.phase == .awaitingEncryption)

        // The LTK Request during pairing (EDIV 0, Rand 0) gets the LTK of Appendix D.3.
        #expect(r.key(ediv: 0, rand: 0)?.key.bytes == specLTK)
        #expect(r.key(ediv: 1, rand: 0) == nil)

        // Encrypted: our identity first, no LTK PDUs (SC derives the LTK), then the initiator's.
        let distributed = r.encryptionChanged(status: 0)
        #expect(sent(distributed) == SMPKeys.pdus(ltk: nil, identity: ourIdentity))
        #expect(sent(distributed).map { $0[0] } == [0x08, 0x09])
        #expect(r.receive(clientKeys[0]).isEmpty)
        guard let result = completion(r.receive(clientKeys[1])) else { Issue.record("no completion"); return }
        #expect(result.secureConnections && result.bonded && result.encryptionKeySize == 16)
        #expect(result.longTermKey == LongTermKey(key: SMPSecret(specLTK), secureConnections: true))
        #expect(result.peerIdentity == PeerIdentity(irk: clientIRK, address: clientIdentity))
        #expect(result.sentIdentity == ourIdentity)
        #expect(r.phase == .complete && !r.isActive && r.key(ediv: 0, rand: 0) == nil)
    }

    @Test("LE legacy Just Works: Sconfirm = c1(0, Srand), Mconfirm checked, the STK of the s1 sample, our LTK/EDIV/Rand first")
    func legacySampleData() throws {
        // The s1 sample (2.2.4): r1 = Srand, r2 = Mrand.
        let srand = specLE("000F0E0D0C0B0A091122334455667788"), mrand = specLE("010203040506070899AABBCCDDEEFF00")
        let ltk = hex("c0 c1 c2 c3 c4 c5 c6 c7 c8 c9 ca cb cc cd ce cf")
        let ia = DeviceAddress(BDAddress(wire: specLE("A1A2A3A4A5A6")), .random), ra = DeviceAddress(BDAddress(wire: specLE("B1B2B3B4B5B6")), .public)
        var r = responder(initiator: ia, responder: ra, nonces: [srand, ltk, hex("ef be"), hex("08 07 06 05 04 03 02 01")])
        let preq = request(auth: "01")
        let pres = hex("02 03 00 09 10 02 03")
        #expect(sent(r.receive(preq)) == [pres])
        #expect(r.phase == .awaitingConfirm)
        let mconfirm = try SMPCrypto.c1(k: zero, r: mrand, preq: preq, pres: pres, initiator: ia, responder: ra)
        let sconfirm = try SMPCrypto.c1(k: zero, r: srand, preq: preq, pres: pres, initiator: ia, responder: ra)
        #expect(sent(r.receive(SMPPDU.pairingConfirm(mconfirm).encoded)) == [SMPPDU.pairingConfirm(sconfirm).encoded])
        #expect(sent(r.receive(SMPPDU.pairingRandom(mrand).encoded)) == [SMPPDU.pairingRandom(srand).encoded])
        #expect(r.key(ediv: 0, rand: 0)?.key.bytes == specLE("9a1fe1f0e8b0f49b5b4216ae796da062"))

        // Key distribution (3.6.1): the responder's LTK, EDIV and Rand, IRK, address; then the initiator's.
        let out = sent(r.encryptionChanged(status: 0))
        #expect(out == [hex("06") + ltk, hex("07 ef be 08 07 06 05 04 03 02 01"),
                        SMPPDU.identityInformation(irk: ourIdentity.irk).encoded, hex("09 01 06 05 04 03 02 c1")])
        _ = r.receive(clientKeys[0])
        guard let result = completion(r.receive(clientKeys[1])) else { Issue.record("no completion"); return }
        #expect(!result.secureConnections && result.bonded)
        #expect(result.longTermKey == LongTermKey(key: SMPSecret(ltk), ediv: 0xBEEF, rand: 0x0102_0304_0506_0708, secureConnections: false))
        #expect(result.peerIdentity?.address == clientIdentity)
    }

    @Test("a shorter key size masks the STK and the distributed LTK")
    func shortKey() throws {
        var c = config()
        c.maxEncryptionKeySize = 7
        var r = responder(c, nonces: [zero, [UInt8](repeating: 0xAA, count: 16), [1, 2], [UInt8](repeating: 3, count: 8)])
        #expect(sent(r.receive(request(auth: "01"))) == [hex("02 03 00 09 07 02 03")])
        let preq = request(auth: "01"), pres = hex("02 03 00 09 07 02 03")
        _ = r.receive(SMPPDU.pairingConfirm(try SMPCrypto.c1(k: zero, r: zero, preq: preq, pres: pres, initiator: specA, responder: specB)).encoded)
        _ = r.receive(SMPPDU.pairingRandom(zero).encoded)
        #expect(r.key(ediv: 0, rand: 0)?.key.bytes.suffix(9) == ArraySlice(repeating: 0, count: 9))
        let out = sent(r.encryptionChanged(status: 0))
        let ltk: [UInt8] = [0x06] + [UInt8](repeating: 0xAA, count: 7) + [UInt8](repeating: 0, count: 9)
        #expect(out.first == ltk)
    }

    @Test("no bonding on either side: no keys are exchanged", arguments: [("08", true, "02 03 00 09 10 00 00"), ("09", false, "02 03 00 08 10 00 00")])
    func noBonding(auth: String, weBond: Bool, response: String) {
        var c = config()
        c.bonding = weBond
        var r = responder(c)
        #expect(sent(r.receive(request(auth: auth))) == [hex(response)])
    }

    @Test("against attled's own initiator: both methods agree on the key and exchange keys both ways", arguments: [true, false])
    func againstInitiator(sc: Bool) throws {
        var ic = SMPConfiguration()
        ic.secureConnections = sc
        ic.localIdentity = LocalIdentity(irk: clientIRK, address: clientIdentity)
        var initiator = SMPInitiator(configuration: ic, initiator: specA, responder: specB)
        var r = SMPResponder(configuration: config(), initiator: specA, responder: specB)
        var toResponder = initiator.start(), steps = 0
        var central: PairingResult?, peripheral: PairingResult?
        while !toResponder.isEmpty, steps < 50 {
            steps += 1
            var back: [SMPAction] = [], next: [SMPAction] = []
            for a in toResponder {
                switch a {
                case let .send(b): back += r.receive(b)
                case let .startEncryption(k):
                    #expect(r.key(ediv: k.ediv, rand: k.rand) == k, "the controllers would encrypt with different keys")
                    back += r.encryptionChanged(status: 0)
                    next += initiator.encryptionChanged(status: 0)
                case let .complete(res): central = res
                case let .failed(f): Issue.record("initiator failed: \(f)")
                }
            }
            for a in back {
                switch a {
                case let .send(b): next += initiator.receive(b)
                case let .complete(res): peripheral = res
                case let .failed(f): Issue.record("responder failed: \(f)")
                case .startEncryption: Issue.record("a responder never starts encryption")
                }
            }
            toResponder = next
        }
        guard let central, let peripheral else { Issue.record("incomplete: \(initiator.phase) / \(r.phase)"); return }
        #expect(central.secureConnections == sc && peripheral.secureConnections == sc)
        #expect(central.longTermKey == peripheral.longTermKey && central.longTermKey != nil)
        #expect(central.peerIdentity == PeerIdentity(irk: ourIdentity.irk, address: ourIdentity.address))
        #expect(peripheral.peerIdentity == PeerIdentity(irk: clientIRK, address: clientIdentity))
    }

    @Test("bad input gets Pairing Failed with the reason the specification gives", arguments: [
        ("reserved IO capability", "01 05 00 09 10 02 03", UInt8(0x0A)),
        ("reserved OOB data flag", "01 03 02 09 10 02 03", 0x0A),
        ("maximum key size above 16", "01 03 00 09 11 02 03", 0x0A),
        ("key size below 7", "01 03 00 09 06 02 03", 0x06),
        ("OOB data we never gave (SC)", "01 03 01 09 10 02 03", 0x02),
        ("a short Pairing Request", "01 03 00", 0x0A),
        ("an unknown code", "42 00", 0x07),
        ("a Pairing Response to the peripheral", "02 03 00 09 10 02 03", 0x07),
        ("a Security Request to the peripheral", "0b 09", 0x07),
        ("a Pairing Confirm before the Pairing Request", "03 00 01 02 03 04 05 06 07 08 09 0a 0b 0c 0d 0e 0f", 0x08),
        ("a Pairing Random before the Pairing Request", "04 00 01 02 03 04 05 06 07 08 09 0a 0b 0c 0d 0e 0f", 0x08),
    ])
    func badRequests(what: String, input: String, reason: UInt8) {
        var r = responder()
        let actions = r.receive(hex(input))
        #expect(sent(actions) == [[0x05, reason]], "\(what)")
        #expect(failure(actions)?.reason == PairingFailedReason(rawValue: reason) && r.phase == .failed)
        #expect(r.receive(request()).isEmpty, "nothing after a failure")
    }

    @Test("Secure Connections Only mode refuses a legacy central with Authentication Requirements")
    func secureConnectionsOnly() {
        var r = responder(config(legacy: false))
        #expect(sent(r.receive(request(auth: "01"))) == [hex("05 03")])
    }

    @Test("failures during the exchange", arguments: ["bad Mconfirm", "bad Ea", "off-curve key", "our own key", "out of order", "short PDU", "DHKey Check early"])
    func exchangeFailures(kind: String) throws {
        var r = responder(nonces: [nb])
        let sc = kind != "bad Mconfirm"
        _ = r.receive(request(auth: sc ? "09" : "01"))
        var actions: [SMPAction] = []
        var want: UInt8 = 0
        switch kind {
        case "bad Mconfirm":
            _ = r.receive(SMPPDU.pairingConfirm(zero).encoded)
            actions = r.receive(SMPPDU.pairingRandom(na).encoded)
            want = 0x04
        case "bad Ea":
            _ = r.receive(SMPPDU.pairingPublicKey(x: P256Sample.publicAX, y: P256Sample.publicAY).encoded)
            _ = r.receive(SMPPDU.pairingRandom(na).encoded)
            actions = r.receive(SMPPDU.pairingDHKeyCheck(zero).encoded)
            want = 0x0B
        case "off-curve key":
            var y = P256Sample.publicAY
            y[0] ^= 1
            actions = r.receive(SMPPDU.pairingPublicKey(x: P256Sample.publicAX, y: y).encoded)
            want = 0x0B
        case "our own key":
            actions = r.receive(SMPPDU.pairingPublicKey(x: P256Sample.publicBX, y: P256Sample.publicBY).encoded)
            want = 0x0B
        case "out of order":
            actions = r.receive(SMPPDU.pairingRandom(na).encoded)
            want = 0x08
        case "short PDU":
            actions = r.receive(hex("0c 01 02"))
            want = 0x0A
        default:
            _ = r.receive(SMPPDU.pairingPublicKey(x: P256Sample.publicAX, y: P256Sample.publicAY).encoded)
            actions = r.receive(SMPPDU.pairingDHKeyCheck(zero).encoded)
            want = 0x08
        }
        #expect(sent(actions) == [[0x05, want]], "\(kind)")
        #expect(failure(actions)?.reason == PairingFailedReason(rawValue: want))
        #expect(r.key(ediv: 0, rand: 0) == nil)
    }

    @Test("the central's Pairing Failed ends pairing with its reason, unanswered; a stray one before pairing is ignored")
    func peerFails() {
        var r = responder()
        #expect(r.receive(hex("05 05")).isEmpty && r.phase == .idle)
        _ = r.receive(request())
        let actions = r.receive(hex("05 0b"))
        #expect(actions == [.failed(.peer(.dhKeyCheckFailed))])
    }

    @Test("SMP's timeout: failed, nothing sent, later input ignored (3.4)")
    func timeout() {
        var r = responder()
        #expect(r.timeout().isEmpty, "no timer while idle")
        _ = r.receive(request())
        #expect(r.timeout() == [.failed(.timeout)])
        #expect(r.receive(SMPPDU.pairingPublicKey(x: P256Sample.publicAX, y: P256Sample.publicAY).encoded).isEmpty)
        var s = responder()
        _ = s.securityRequest()
        #expect(s.timeout() == [.failed(.timeout)])
    }

    @Test("a failed encryption ends pairing with its HCI status")
    func encryptionFails() throws {
        var r = responder(nonces: [nb])
        _ = r.receive(request())
        _ = r.receive(SMPPDU.pairingPublicKey(x: P256Sample.publicAX, y: P256Sample.publicAY).encoded)
        _ = r.receive(SMPPDU.pairingRandom(na).encoded)
        _ = r.receive(SMPPDU.pairingDHKeyCheck(try SMPCrypto.f6(w: specMacKey, n1: na, n2: nb, r: zero, ioCap: hex("03 00 09"), a1: specA, a2: specB)).encoded)
        #expect(r.encryptionChanged(status: 0x3D, enabled: false) == [.failed(.encryption(status: 0x3D))])
    }

    @Test("the initiator's keys: out of order fails, early ones wait for the Encryption Change")
    func initiatorKeys() throws {
        func ready() throws -> SMPResponder {
            var r = responder(config(identity: nil), nonces: [nb])
            #expect(sent(r.receive(request())) == [hex("02 03 00 09 10 02 01")], "no identity: EncKey only")
            _ = r.receive(SMPPDU.pairingPublicKey(x: P256Sample.publicAX, y: P256Sample.publicAY).encoded)
            _ = r.receive(SMPPDU.pairingRandom(na).encoded)
            _ = r.receive(SMPPDU.pairingDHKeyCheck(try SMPCrypto.f6(w: specMacKey, n1: na, n2: nb, r: zero, ioCap: hex("03 00 09"), a1: specA, a2: specB)).encoded)
            return r
        }
        var early = try ready()
        #expect(early.receive(clientKeys[0]).isEmpty && early.receive(clientKeys[1]).isEmpty)
        let done = early.encryptionChanged(status: 0)
        #expect(sent(done).isEmpty, "SC, no identity: nothing of ours")
        #expect(completion(done)?.peerIdentity?.address == clientIdentity)
        var wrong = try ready()
        _ = wrong.encryptionChanged(status: 0)
        #expect(sent(wrong.receive(clientKeys[1])) == [hex("05 08")])
    }

    @Test("Security Request (3.6.7): AuthReq Bonding|SC; then a Pairing Request pairs, or encryption with a bond ends the wait")
    func securityRequest() {
        var r = responder()
        #expect(sent(r.securityRequest()) == [hex("0b 09")])
        #expect(r.isActive && r.securityRequest().isEmpty)
        #expect(sent(r.receive(request())) == [hex("02 03 00 09 10 02 03")])
        var s = responder(config(sc: false))
        #expect(sent(s.securityRequest()) == [hex("0b 01")])
        #expect(s.encryptionChanged(status: 0).isEmpty && s.phase == .idle && !s.isActive)
        var t = responder()
        _ = t.securityRequest()
        #expect(t.receive(hex("05 05")) == [.failed(.peer(.pairingNotSupported))])
    }

    @Test("no input traps the responder: every prefix of every vector in every phase")
    func noTraps() throws {
        for (_, wire) in smpVectors {
            for p in prefixes(hex(wire)) + [hex(wire)] {
                var r = responder(nonces: [nb])
                _ = r.receive(p)
                var s = responder(nonces: [nb])
                _ = s.receive(request())
                _ = s.receive(p)
                _ = s.receive(SMPPDU.pairingPublicKey(x: P256Sample.publicAX, y: P256Sample.publicAY).encoded)
                _ = s.receive(p)
            }
        }
    }
}
