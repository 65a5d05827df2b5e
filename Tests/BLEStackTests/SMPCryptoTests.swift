import Testing
@testable import BLEWire
@testable import BLESMP

/// A value as the Core specification prints it (most significant octet
/// first, spaces ignored), reversed into SMP's order (least significant first).
func specLE(_ text: String, sourceLocation: SourceLocation = #_sourceLocation) -> [UInt8] {
    Array(hex(text, sourceLocation: sourceLocation).reversed())
}

/// Core Vol 3 Part H 2.3.5.6.1: the debug key pair; Vol 2 Part G 7.1.2: the
/// second P-256 key pair and the DHKey they share. Appendix D reuses these.
enum P256Sample {
    static let privateA = specLE("3f49f6d4 a3c55f38 74c9b3e3 d2103f50 4aff607b eb40b799 5899b8a6 cd3c1abd")
    static let publicAX = specLE("20b003d2 f297be2c 5e2c83a7 e9f9a5b9 eff49111 acf4fddb cc030148 0e359de6")
    static let publicAY = specLE("dc809c49 652aeb6d 63329abf 5a52155c 766345c2 8fed3024 741c8ed0 1589d28b")
    static let privateB = specLE("55188b3d 32f6bb9a 900afcfb eed4e72a 59cb9ac2 f19d7cfb 6b4fdd49 f47fc5fd")
    static let publicBX = specLE("1ea1f0f0 1faf1d96 09592284 f19e4c00 47b58afd 8615a69f 559077b2 2faaa190")
    static let publicBY = specLE("4c55f33e 429dad37 7356703a 9ab85160 472d1130 e28e3676 5f89aff9 15b1214a")
    static let dhKey = specLE("ec0234a3 57c8ad05 341010a6 0a397d9b 99796b13 b4f866f1 868d34f3 73bfa698")
}

/// Appendix D's nonces and addresses (D.2 - D.4).
private let n1 = specLE("d5cb8454 d177733e ffffb2ec 712baeab")
private let n2 = specLE("a6e8e7cc 25a75f6e 216583f7 ff3dc4cf")
private let a1 = DeviceAddress(BDAddress(wire: specLE("56123737bfce")), .public) // A1 = 00 56123737bfce
private let a2 = DeviceAddress(BDAddress(wire: specLE("a713702dcfc1")), .public) // A2 = 00 a713702dcfc1
private let zero16 = [UInt8](repeating: 0, count: 16)

@Suite("SMP crypto toolbox (Core Vol 3 Part H 2.2, Appendix D)")
struct SMPCryptoTests {
    @Test("AES-CMAC: the RFC 4493 examples Appendix D.1 repeats")
    func aesCMAC() throws {
        let key = hex("2b7e1516 28aed2a6 abf71588 09cf4f3c")
        let m = hex("6bc1bee2 2e409f96 e93d7e11 7393172a ae2d8a57 1e03ac9c 9eb76fac 45af8e51 30c81c46 a35ce411 e5fbc119 1a0a52ef f69f2445 df4f9b17 ad2b417b e66c3710")
        #expect(try SMPCrypto.aesCMAC(key: key, message: []) == hex("bb1d6929 e9593728 7fa37d12 9b756746"))
        #expect(try SMPCrypto.aesCMAC(key: key, message: Array(m.prefix(16))) == hex("070a16b4 6b4d4144 f79bdd9d d04a287c"))
        #expect(try SMPCrypto.aesCMAC(key: key, message: Array(m.prefix(40))) == hex("dfa66747 de9ae630 30ca3261 1497c827"))
        #expect(try SMPCrypto.aesCMAC(key: key, message: m) == hex("51f0bebf 7e3b9d92 fc497417 79363cfe"))
    }

    @Test("e is AES-128 (FIPS-197 C.1), in SMP byte order")
    func e() throws {
        let out = try SMPCrypto.e(key: specLE("000102030405060708090a0b0c0d0e0f"), plaintext: specLE("00112233445566778899aabbccddeeff"))
        #expect(out == specLE("69c4e0d86a7b0430d8cdb78070b4c55a"))
    }

    @Test("ah: Appendix D.7")
    func ah() throws {
        #expect(try SMPCrypto.ah(irk: specLE("ec0234a3 57c8ad05 341010a6 0a397d9b"), prand: specLE("708194")) == specLE("0dfbaa"))
    }

    @Test("c1: the legacy confirm sample (2.2.3)")
    func c1() throws {
        // preq 07071000000101 and pres 05000800000302 printed MSB first: the PDUs 01 01 00 00 10 07 07 and 02 03 00 00 08 00 05.
        let preq = specLE("07071000000101"), pres = specLE("05000800000302")
        #expect(preq == hex("01 01 00 00 10 07 07"))
        let out = try SMPCrypto.c1(k: zero16, r: specLE("5783D52156AD6F0E6388274EC6702EE0"), preq: preq, pres: pres,
                                   initiator: DeviceAddress(BDAddress(wire: specLE("A1A2A3A4A5A6")), .random),
                                   responder: DeviceAddress(BDAddress(wire: specLE("B1B2B3B4B5B6")), .public))
        #expect(out == specLE("1e1e3fef878988ead2a74dc5bef13b86"))
    }

    @Test("s1: the legacy STK sample (2.2.4)")
    func s1() throws {
        let out = try SMPCrypto.s1(k: zero16, r1: specLE("000F0E0D0C0B0A091122334455667788"), r2: specLE("010203040506070899AABBCCDDEEFF00"))
        #expect(out == specLE("9a1fe1f0e8b0f49b5b4216ae796da062"))
    }

    @Test("f4: Appendix D.2")
    func f4() throws {
        let out = try SMPCrypto.f4(u: P256Sample.publicAX, v: P256Sample.privateB, x: n1, z: 0)
        #expect(out == specLE("f2c916f1 07a9bd1c f1eda1be a974872d"))
    }

    @Test("f5: Appendix D.3, MacKey and LTK")
    func f5() throws {
        let keys = try SMPCrypto.f5(w: P256Sample.dhKey, n1: n1, n2: n2, a1: a1, a2: a2)
        #expect(keys.macKey == specLE("2965f176 a1084a02 fd3f6a20 ce636e20"))
        #expect(keys.ltk == specLE("69867911 69d7cd23 980522b5 94750a38"))
        // T = AES-CMAC_SALT(W), the intermediate value D.3 prints.
        #expect(try SMPCrypto.cmacLE(key: SMPCrypto.f5Salt, P256Sample.dhKey) == specLE("3c128f20 de883288 97624bdb 8dac6989"))
    }

    @Test("f6: Appendix D.4")
    func f6() throws {
        let out = try SMPCrypto.f6(w: specLE("2965f176 a1084a02 fd3f6a20 ce636e20"), n1: n1, n2: n2,
                                   r: specLE("12a3343b b453bb54 08da42d2 0c2d0fc8"), ioCap: specLE("010102"), a1: a1, a2: a2)
        #expect(out == specLE("e3c47398 9cd0e8c5 d26c0b09 da958f61"))
        // IOcap 0x010102 is AuthReq 01, OOB 01, IO capability 02.
        let p = PairingParameters(ioCapability: .keyboardOnly, oobDataFlag: .present, authReq: .bonding,
                                  initiatorKeyDistribution: [], responderKeyDistribution: [])
        #expect(p.ioCap == specLE("010102"))
    }

    @Test("g2: Appendix D.5")
    func g2() throws {
        let v = try SMPCrypto.g2(u: P256Sample.publicAX, v: P256Sample.privateB, x: n1, y: n2)
        #expect(v == 0x2F9E_D5BA)
        #expect(v % 1_000_000 == 0x2F9E_D5BA % 1_000_000)
    }

    @Test("P-256: the debug private key gives the debug public key (2.3.5.6.1)")
    func debugKeyPair() throws {
        let a = try P256KeyPair(privateKey: P256Sample.privateA)
        #expect(a.publicKey == P256Sample.publicAX + P256Sample.publicAY)
        #expect(a.x == P256Sample.publicAX)
        let b = try P256KeyPair(privateKey: P256Sample.privateB)
        #expect(b.publicKey == P256Sample.publicBX + P256Sample.publicBY)
    }

    @Test("P-256: ECDH of the sample keys gives the sample DHKey, both ways")
    func sampleDHKey() throws {
        let a = try P256KeyPair(privateKey: P256Sample.privateA)
        let b = try P256KeyPair(privateKey: P256Sample.privateB)
        #expect(try a.dhKey(peerPublicKey: P256Sample.publicBX + P256Sample.publicBY) == P256Sample.dhKey)
        #expect(try b.dhKey(peerPublicKey: P256Sample.publicAX + P256Sample.publicAY) == P256Sample.dhKey)
    }

    @Test("P-256: fresh key pairs differ and agree on their DHKey")
    func freshKeyPairs() throws {
        let a = try P256KeyPair(), b = try P256KeyPair()
        #expect(a.publicKey != b.publicKey)
        #expect(a.publicKey.count == 64)
        #expect(P256KeyPair.isValidPublicKey(a.publicKey))
        let ab = try a.dhKey(peerPublicKey: b.publicKey)
        let ba = try b.dhKey(peerPublicKey: a.publicKey)
        #expect(ab == ba)
        #expect(ab.count == 32)
    }

    @Test("P-256: a public key off the curve is rejected with invalidPublicKey", arguments: [
        "Y changed by one bit", "X and Y zero", "X at the field prime", "Y and X swapped", "all ones",
    ])
    func offCurve(kind: String) throws {
        let ours = try P256KeyPair()
        var bad = P256Sample.publicBX + P256Sample.publicBY
        switch kind {
        case "Y changed by one bit": bad[40] ^= 0x01
        case "X and Y zero": bad = [UInt8](repeating: 0, count: 64)
        case "X at the field prime":
            // p = ffffffff 00000001 00000000 00000000 00000000 ffffffff ffffffff ffffffff
            bad = specLE("ffffffff 00000001 00000000 00000000 00000000 ffffffff ffffffff ffffffff") + P256Sample.publicBY
        case "Y and X swapped": bad = P256Sample.publicBY + P256Sample.publicBX
        default: bad = [UInt8](repeating: 0xFF, count: 64)
        }
        #expect(!P256KeyPair.isValidPublicKey(bad))
        #expect(throws: SMPCryptoError.invalidPublicKey) { try ours.dhKey(peerPublicKey: bad) }
    }

    @Test("wrong sizes and bad private keys are typed errors, not traps")
    func badInputs() throws {
        let ours = try P256KeyPair()
        #expect(throws: SMPCryptoError.invalidLength(field: "public key", expected: 64, actual: 63)) {
            try ours.dhKey(peerPublicKey: [UInt8](repeating: 1, count: 63))
        }
        #expect(throws: SMPCryptoError.invalidLength(field: "U", expected: 32, actual: 31)) {
            try SMPCrypto.f4(u: [UInt8](repeating: 0, count: 31), v: P256Sample.publicAX, x: n1, z: 0)
        }
        #expect(throws: SMPCryptoError.invalidLength(field: "key", expected: 16, actual: 0)) { try SMPCrypto.e(key: [], plaintext: zero16) }
        #expect(throws: SMPCryptoError.invalidLength(field: "preq", expected: 7, actual: 6)) {
            try SMPCrypto.c1(k: zero16, r: zero16, preq: [1, 2, 3, 4, 5, 6], pres: [UInt8](repeating: 0, count: 7), initiator: a1, responder: a2)
        }
        #expect(throws: SMPCryptoError.invalidPrivateKey) { try P256KeyPair(privateKey: [UInt8](repeating: 0, count: 32)) }
        // n, the group order, is not a valid scalar either.
        let order = specLE("ffffffff 00000000 ffffffff ffffffff bce6faad a7179e84 f3b9cac2 fc632551")
        #expect(throws: SMPCryptoError.invalidPrivateKey) { try P256KeyPair(privateKey: order) }
        #expect(try SMPCrypto.random(0) == [])
        #expect(try SMPCrypto.random(16).count == 16)
    }

    @Test("a key shorter than 16 bytes keeps its least significant octets (2.3.4)")
    func masking() {
        let k = Array(1...16).map(UInt8.init)
        #expect(SMPCrypto.masked(k, size: 7) == [1, 2, 3, 4, 5, 6, 7] + [UInt8](repeating: 0, count: 9))
        #expect(SMPCrypto.masked(k, size: 16) == k)
        #expect(SMPCrypto.masked(k, size: 20) == k)
    }

    @Test("a secret never prints its bytes")
    func secretsDoNotPrint() {
        let s = SMPSecret(specLE("ec0234a3 57c8ad05 341010a6 0a397d9b"))
        for text in [s.description, "\(s)", String(reflecting: s), String(describing: [s])] {
            #expect(!text.contains("ec0234") && !text.contains("9b"), "\(text)")
        }
        var dumped = ""
        dump(s, to: &dumped)
        #expect(!dumped.contains("236"), "\(dumped)") // 0xec as a decimal element
        #expect(s.revealedHex == "ec0234a357c8ad05341010a60a397d9b")
    }
}
