import Testing
@testable import BLEWire
@testable import ESPHomeAPI

private func responder(psk: String = NoiseVector.psk) throws -> NoiseResponder {
    NoiseResponder(psk: try NoisePSK(base64: psk), name: NoiseVector.name, macAddress: NoiseVector.mac,
                   ephemeralPrivateKey: NoiseVector.serverEphemeralPrivateKey)
}

/// The bytes of every `.send`, and the transport or failure the actions end with.
private func outcome(_ actions: [NoiseResponderAction]) -> (sent: [[UInt8]], transport: NoiseTransport?, failure: NoiseHandshakeFailure?) {
    var sent: [[UInt8]] = [], transport: NoiseTransport?, failure: NoiseHandshakeFailure?
    for a in actions {
        switch a {
        case let .send(bytes): sent.append(bytes)
        case let .handshakeComplete(t): transport = t
        case let .failed(why): failure = why
        }
    }
    return (sent, transport, failure)
}

/// A reject frame: 01, u16 length, 01, the reason.
private func reject(_ reason: String) -> [UInt8] {
    let body = [0x01] + Array(reason.utf8)
    return [0x01, 0x00, UInt8(body.count)] + body
}

@Suite("ESPHome API: the Noise responder")
struct ESPHomeAPINoiseTests {
    @Test("the primitives: RFC 7748 X25519, RFC 8439 ChaCha20-Poly1305, SHA-256, RFC 4231 HMAC")
    func primitives() throws {
        // RFC 7748 6.1.
        let alice = hex("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a")
        let bob = hex("5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb")
        #expect(try NoiseCrypto.x25519Public(alice) == hex("8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a"))
        #expect(try NoiseCrypto.x25519Public(bob) == hex("de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f"))
        let shared = hex("4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742")
        #expect(try NoiseCrypto.x25519(alice, try NoiseCrypto.x25519Public(bob)) == shared)
        // A low-order public key (all zeros) gives an all-zero secret, which is refused.
        #expect(throws: NoiseError.invalidPublicKey) { try NoiseCrypto.x25519(alice, [UInt8](repeating: 0, count: 32)) }
        // RFC 8439 2.8.2.
        let key = Array(0x80...0x9F).map { UInt8($0) }
        let plaintext = Array("Ladies and Gentlemen of the class of '99: If I could offer you only one tip for the future, sunscreen would be it.".utf8)
        let sealed = try NoiseCrypto.seal(key: key, nonce: hex("07000000 4041424344454647"), ad: hex("50515253c0c1c2c3c4c5c6c7"), plaintext: plaintext)
        #expect(sealed == hex("""
            d31a8d34648e60db7b86afbc53ef7ec2a4aded51296e08fea9e2b5a736ee62d63dbea45e8ca9671282fafb69da92728b\
            1a71de0a9e060b2905d6a5b67ecd3b3692ddbd7f2d778b8c9803aee328091b58fab324e4fad675945585808b4831d7bc\
            3ff4def08e4b7a9de576d26586cec64b6116 1ae10b594f09e26a7e902ecbd0600691
            """))
        // The Noise nonce: 4 zero bytes, then the counter little-endian.
        #expect(NoiseCrypto.nonce(0x0102) == hex("00000000 0201000000000000"))
        var c = NoiseCipherState(key: key)
        let ct = try c.encrypt(ad: [1], [9, 9])
        var d = NoiseCipherState(key: key)
        #expect(throws: NoiseError.macFailure) { try d.decrypt(ad: [2], ct) }
        #expect(d.nonce == 0)  // a failed check does not use up the nonce
        #expect(try d.decrypt(ad: [1], ct) == [9, 9])
        #expect(try NoiseCrypto.hash(Array("abc".utf8)) == hex("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"))
        #expect(try NoiseCrypto.hmac(key: Array("Jefe".utf8), Array("what do ya want for nothing?".utf8))
                == hex("5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"))
    }

    @Test("the key is 32 bytes of base64")
    func psk() throws {
        #expect(try NoisePSK(base64: "  \(NoiseVector.psk)\n").bytes == Array(0..<32))
        #expect(throws: NoisePSK.Problem.wrongLength(3)) { try NoisePSK(base64: "AAEC") }
        #expect(throws: NoisePSK.Problem.notBase64) { try NoisePSK(base64: "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8") }
        #expect(throws: NoisePSK.Problem.notBase64) { try NoisePSK(base64: "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh*=") }
        // The last character's unused bits must be zero.
        #expect(throws: NoisePSK.Problem.notBase64) { try NoisePSK(base64: "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh9=") }
        #expect(try NoisePSK(bytes: [UInt8](repeating: 1, count: 32)).description == "NoisePSK(32 bytes)")
    }

    @Test("aioesphomeapi's handshake: the responder's frames are byte for byte the reference's")
    func handshake() throws {
        var r = try responder()
        let (sent, transport, failure) = outcome(r.receive(NoiseVector.clientHandshake))
        #expect(sent == [NoiseVector.serverHello, NoiseVector.serverHandshake])
        #expect(failure == nil)
        #expect(transport?.handshakeHash == NoiseVector.handshakeHash)
        #expect(r.phase == .complete)
        #expect(r.receive([0x01]).isEmpty)
        // The server hello: 01, "attled-proxy", 00, "a4c138f00d01", 00.
        let header: [UInt8] = [0x01, 0x00, 0x1B, 0x01]
        let name: [UInt8] = Array("attled-proxy".utf8)
        let mac: [UInt8] = Array("a4c138f00d01".utf8)
        let expected: [UInt8] = header + name + [0] + mac + [0]
        #expect(NoiseVector.serverHello == expected)
    }

    @Test("the same handshake fed one byte at a time")
    func handshakeByteByByte() throws {
        var r = try responder()
        var actions: [NoiseResponderAction] = []
        for b in NoiseVector.clientHandshake { actions += r.receive([b]) }
        let (sent, transport, failure) = outcome(actions)
        #expect(sent == [NoiseVector.serverHello, NoiseVector.serverHandshake])
        #expect(transport != nil && failure == nil)
    }

    @Test("the transport decrypts aioesphomeapi's two messages and encrypts the reference's two")
    func transport() throws {
        var r = try responder()
        guard var t = outcome(r.receive(NoiseVector.clientHandshake)).transport else { Issue.record("no transport"); return }
        #expect(t.receive(NoiseVector.clientMessages) == [
            .message(type: HelloRequest.messageType, payload: NoiseVector.clientPayload1),
            .message(type: SubscribeBluetoothLEAdvertisementsRequest.messageType, payload: NoiseVector.clientPayload2),
        ])
        #expect(try HelloRequest(protobuf: NoiseVector.clientPayload1) == HelloRequest(clientInfo: "aioesphomeapi", apiVersionMajor: 1, apiVersionMinor: 10))
        #expect(try SubscribeBluetoothLEAdvertisementsRequest(protobuf: NoiseVector.clientPayload2).flags == .rawAdvertisements)
        // Our messages, encoded by our declarations, give the reference's ciphertext.
        let hello = try t.encrypt(HelloResponse(apiVersionMajor: 1, apiVersionMinor: 10, serverInfo: "attled", name: "attled-proxy"))
        let ads = try t.encrypt(BluetoothLERawAdvertisementsResponse(advertisements: [
            BluetoothLERawAdvertisement(address: 0xA4C1_38F0_0D02, rssi: -60, addressType: 0, data: hex("02 01 06 05 09 61 74 74 31")),
        ]))
        #expect(hello + ads == NoiseVector.serverMessages)
        #expect(t.sendCipher.nonce == 2 && t.receiveCipher.nonce == 2)
    }

    @Test("the client's messages arrive in random chunks and byte by byte")
    func transportChunks() throws {
        var g = ESPHomeTestRandom(state: 0x4E01)
        for round in 0..<20 {
            var r = try responder()
            let all = NoiseVector.clientHandshake + NoiseVector.clientMessages
            var actions: [NoiseResponderAction] = []
            var messages: [NoiseTransportEvent] = []
            var transport: NoiseTransport?
            var offset = 0
            while offset < all.count {
                let end = min(all.count, offset + (round == 0 ? 1 : Int.random(in: 1...30, using: &g)))
                if transport != nil {
                    messages += transport!.receive(all[offset..<end])
                } else {
                    let more = r.receive(all[offset..<end])
                    actions += more
                    if var t = outcome(more).transport {
                        messages += t.receive([UInt8]())  // bytes past the handshake are already in it
                        transport = t
                    }
                }
                offset = end
            }
            #expect(outcome(actions).sent == [NoiseVector.serverHello, NoiseVector.serverHandshake])
            #expect(messages.count == 2)
        }
    }

    @Test("the wrong key: the reject frame \"Handshake MAC failure\"")
    func wrongPSK() throws {
        var r = try responder()
        let (sent, transport, failure) = outcome(r.receive(NoiseVector.wrongPSKClientHandshake))
        #expect(sent == [NoiseVector.serverHello, hex("01 00 16 01") + Array("Handshake MAC failure".utf8)])
        #expect(transport == nil)
        #expect(failure == .macFailure)
        #expect(r.phase == .failed)
        #expect(r.receive(NoiseVector.clientHandshake).isEmpty)
        // The client with the right key, to a responder with the wrong one: the same.
        var other = try responder(psk: NoiseVector.wrongPSK)
        #expect(outcome(other.receive(NoiseVector.clientHandshake)).failure == .macFailure)
    }

    @Test("a plaintext client gets \"Bad indicator byte\" as a Noise frame")
    func plaintextClient() throws {
        var r = try responder()
        let hello = PlaintextFrame.encode(HelloRequest(clientInfo: "aioesphomeapi", apiVersionMajor: 1, apiVersionMinor: 10))
        let (sent, _, failure) = outcome(r.receive(hello))
        #expect(sent == [reject("Bad indicator byte")])
        #expect(sent == [hex("01 00 13 01") + Array("Bad indicator byte".utf8)])
        #expect(failure == .badIndicator(0x00))
    }

    @Test("malformed handshakes get ESPHome's reasons")
    func malformed() throws {
        let hello = hex("01 00 00")
        let cases: [([UInt8], NoiseHandshakeFailure, String)] = [
            (hex("01 00 81"), .packetTooLong(129), "Bad handshake packet len"),
            (hello + hex("01 00 00"), .emptyHandshakeMessage, "Empty handshake message"),
            (hello + hex("01 00 01 05"), .badHandshakeErrorByte(5), "Bad handshake error byte"),
            (hello + hex("01 00 05 00 01 02 03 04"), .handshakeError(.invalidLength(field: "handshake message", expected: 48, actual: 4)), "Handshake error"),
            (hello + hex("02"), .badIndicator(0x02), "Bad indicator byte"),
        ]
        for (bytes, expected, reason) in cases {
            var r = try responder()
            let (sent, _, failure) = outcome(r.receive(bytes))
            #expect(sent.last == reject(reason))
            #expect(failure == expected)
            #expect(expected.rejectReason == reason)
        }
    }

    @Test("a client whose ephemeral key is a low-order point, with the right key's tag: \"Handshake error\"")
    func lowOrderEphemeral() throws {
        // What a client with our PSK would send for e = 0 (X25519 of it is all zeros):
        // -> psk, e with an empty payload, its tag made with the right key, after the empty hello.
        var s = try NoiseSymmetricState(protocolName: NoiseNNpsk0Responder.protocolName)
        try s.mixHash(NoiseResponder.prologuePrefix + [0, 0])
        try s.mixKeyAndHash(try NoisePSK(base64: NoiseVector.psk).bytes)
        let e = [UInt8](repeating: 0, count: 32)
        try s.mixHash(e)
        try s.mixKey(e)
        let body = [0x00] + e + (try s.encryptAndHash([]))
        var r = try responder()
        let (sent, transport, failure) = outcome(r.receive(hex("01 00 00") + [0x01, 0x00, UInt8(body.count)] + body))
        #expect(sent == [NoiseVector.serverHello, reject("Handshake error")])
        #expect(transport == nil)
        #expect(failure == .handshakeError(.invalidPublicKey))
        #expect(r.phase == .failed)
    }

    @Test("a longer client hello goes into the prologue: the client's tag no longer matches")
    func prologueBindsHello() throws {
        var r = try responder()
        // The hello "x" instead of the empty one aioesphomeapi signed its handshake over.
        let (_, _, failure) = outcome(r.receive(hex("01 00 01 78") + NoiseVector.clientHandshake.dropFirst(3)))
        #expect(failure == .macFailure)
    }

    @Test("transport failures: a changed byte, a wrong indicator, a plaintext shorter than its header")
    func transportFailures() throws {
        var r = try responder()
        guard let t = outcome(r.receive(NoiseVector.clientHandshake)).transport else { Issue.record("no transport"); return }
        var changed = NoiseVector.clientMessages
        changed[10] ^= 1
        var a = t
        #expect(a.receive(changed).first == .failed(.decryptFailed(.macFailure)))
        #expect(a.receive(NoiseVector.clientMessages) == [.failed(.decryptFailed(.macFailure))])  // it sticks
        var b = t
        #expect(b.receive([0x00]) == [.failed(.corruptFrame(.wrongIndicator(0, expected: 1)))])
        // The client's cipher (the responder's receiving key), sealing 2 and then 6 bytes.
        var client = NoiseCipherState(key: t.receiveCipher.key)
        var c = t
        #expect(c.receive(try NoiseFrame.encode(try client.encrypt([0x00, 0x07]))) == [.failed(.badDataPacket("2 bytes, shorter than the 4-byte header"))])
        var d = t
        var client2 = NoiseCipherState(key: t.receiveCipher.key)
        #expect(d.receive(try NoiseFrame.encode(try client2.encrypt([0x00, 0x07, 0x00, 0x03, 0xAA, 0xBB])))
                == [.failed(.badDataPacket("length 3 over the 2 bytes that follow"))])
        // Padding after the payload is dropped.
        var e = t
        var client3 = NoiseCipherState(key: t.receiveCipher.key)
        #expect(e.receive(try NoiseFrame.encode(try client3.encrypt([0x00, 0x07, 0x00, 0x00, 0x00, 0x00])))
                == [.message(type: PingRequest.messageType, payload: [])])
        var f = t
        #expect(throws: FrameEncodingError.bodyTooLarge(count: 65516, limit: 65515)) {
            try f.encrypt(type: PingRequest.messageType, payload: [UInt8](repeating: 0, count: 65516))
        }
    }

    @Test("random bytes never trap the responder or the transport")
    func randomBytes() throws {
        var g = ESPHomeTestRandom(state: 0xBAD)
        var r0 = try responder()
        guard let t = outcome(r0.receive(NoiseVector.clientHandshake)).transport else { Issue.record("no transport"); return }
        for i in 0..<2_000 {
            var bytes = g.bytes(Int.random(in: 0...80, using: &g))
            if i % 2 == 0, !bytes.isEmpty { bytes[0] = 0x01 }  // get past the indicator now and then
            var r = try responder()
            _ = r.receive(i % 3 == 0 ? hex("01 00 00") + bytes : bytes)
            var u = t
            _ = u.receive(bytes)
        }
    }

    @Test("without an injected key the responder makes its own, and the handshake still completes")
    func freshEphemeral() throws {
        var r = NoiseResponder(psk: try NoisePSK(base64: NoiseVector.psk), name: "n", macAddress: [1, 2, 3, 4, 5, 6])
        let (sent, transport, failure) = outcome(r.receive(NoiseVector.clientHandshake))
        #expect(sent.first == hex("01 00 10 01 6e 00") + Array("010203040506".utf8) + [0])
        #expect(sent.count == 2 && sent.last != NoiseVector.serverHandshake)
        #expect(transport != nil && failure == nil)
    }
}
