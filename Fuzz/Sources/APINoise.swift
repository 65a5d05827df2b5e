// api-noise: the server side of the ESPHome API's Noise handshake
// (NoiseResponder) and the encrypted transport it hands over, with the key,
// node name, MAC and server ephemeral key of the test vectors
// (Tests/BLEStackTests/ESPHomeAPINoiseVectors.swift, aioesphomeapi 29.9.0 as
// the client), so the vectors' client bytes complete the handshake.
// The input:
//   byte 0: mode. Bit 0 clear, "raw": the rest is the client's byte stream.
//           Bit 0 set, "sealed": the client's stream is the vectors' client
//           handshake, then one piece per record `op, len, bytes`:
//           op % 3 = 0 the bytes encrypted as one frame with the client's
//           cipher (the transport's plaintext: u16 type, u16 length,
//           payload, padding); 1 a message, u16 type and payload, its
//           length filled in, encrypted as one frame; 2 the bytes as they
//           are. Only the harness can encrypt, so this is how the fuzzer
//           gets past the tag to the transport's own parsing.
// The stream is fed whole and in pieces whose sizes come from the input, to
// the responder and, once it hands over the transport, to
// NoiseTransport.receive; both ways must send the same frames, fail the
// same way and yield the same events.
// The responder must: send only whole Noise frames, the server hello first;
// end (fail or complete) at most once, as the last action, and say nothing
// after; precede a failure ESPHome answers with its reject frame; never fail
// on its own side (libcrypto is there, the keys are fixed); complete only
// for the client's real handshake (a forged tag is a finding), with the
// vectors' answer and handshake hash. The transport must: report a failure
// once, then only that failure; give the messages of sealed records exactly
// (until a raw record makes the stream unpredictable) and fail a frame
// whose plaintext is too short for its header or its length. Every message
// is checked as in api-message, and re-encrypted by the transport it must
// decrypt, with the client's cipher, to its type and payload.
import BLEWire
import ESPHomeAPI

/// The test vectors (Tests/BLEStackTests/ESPHomeAPINoiseVectors.swift).
enum APINoiseVector {
    static let psk = Array(0..<32).map { UInt8($0) }  // "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
    static let name = "attled-proxy"
    static let mac = Hex.parse("a4c138f00d01")!
    static let serverEphemeralPrivateKey = Hex.parse("4800000000000000000000000000000000000000000000000000000000000050")!
    /// The client hello frame, then the client's handshake frame.
    static let clientHandshake = Hex.parse("01000001003100e3712d851a0e5d79b831c5e34ab22b41a198171de209b8b8faca23a11c624859e19f513fca64c8dedd78e987dc4a72b9")!
    static let serverHello = Hex.parse("01001b016174746c65642d70726f78790061346331333866303064303100")!
    static let serverHandshake = Hex.parse("01003100ce8e6ff8695ca98943503ce6f9b34f5121c3386a9a52531050c03b66a92df73618c16cfc8601af72db130b34e21c69fc")!
    static let handshakeHash = Hex.parse("53dd5aa4f69b6523b7625cebd67460d43716ad0199aa36a1019c45f7150f936a")!
}

func apiNoiseResponder() -> NoiseResponder {
    NoiseResponder(psk: try! NoisePSK(bytes: APINoiseVector.psk), name: APINoiseVector.name,
                   macAddress: APINoiseVector.mac, ephemeralPrivateKey: APINoiseVector.serverEphemeralPrivateKey)
}

/// The client's cipher states right after the vectors' handshake: (send,
/// receive), the transport's (receive, send). The same every time (fixed keys).
let apiNoiseClientCiphers: (send: NoiseCipherState, receive: NoiseCipherState) = {
    var r = apiNoiseResponder()
    for a in r.receive(APINoiseVector.clientHandshake) {
        if case let .handshakeComplete(t) = a { return (t.receiveCipher, t.sendCipher) }
    }
    require(false, "the vectors' client handshake does not complete")
    fatalError()
}()

/// What a run of the client's stream produced.
struct NoiseRun {
    var sent: [[UInt8]] = []
    var failure: NoiseHandshakeFailure?
    var completed = false
    var handshakeHash: [UInt8] = []
    var events: [NoiseTransportEvent] = []
    var transport: NoiseTransport?
}

/// Checks one call's actions and files them in `run`.
func checkResponderActions(_ actions: [NoiseResponderAction], _ run: inout NoiseRun, _ r: NoiseResponder) {
    require(run.failure == nil && !run.completed || actions.isEmpty, "actions after the handshake ended: \(actions)")
    for (i, a) in actions.enumerated() {
        let last = i == actions.count - 1
        switch a {
        case let .send(bytes):
            var d = NoiseFrameDecoder(limit: NoiseFrame.maxBody)
            d.append(bytes)
            guard case .frame = d.next(), d.bufferedCount == 0 else {
                require(false, "the responder sent something other than one Noise frame: \(Hex.string(bytes))")
                return
            }
            if run.sent.isEmpty {
                require(bytes == APINoiseVector.serverHello || i == actions.count - 2,
                        "the first frame sent is neither the server hello nor a reject: \(Hex.string(bytes))")
            }
            run.sent.append(bytes)
        case let .failed(why):
            _ = why.description
            require(last, "the failure is not the last action: \(actions)")
            require(r.phase == .failed, "failed with \(why), phase \(r.phase)")
            if case .localFailure = why { require(false, "the responder failed on its own side: \(why)") }
            if let reason = why.rejectReason {
                require(i > 0 && actions[i - 1].sentBytes == NoiseResponder.rejectFrame(reason), "\(why) without its reject frame")
            } else {
                require(i == 0 || actions[i - 1].sentBytes == nil, "\(why) after a frame: \(actions)")
            }
            switch why {
            case let .badIndicator(b): require(b != 0x01, "\(why)")
            case let .packetTooLong(n): require(n > NoiseFrameDecoder.handshakeLimit, "\(why)")
            case let .badHandshakeErrorByte(b): require(b != 0x00, "\(why)")
            default: break
            }
            run.failure = why
        case let .handshakeComplete(t):
            require(last, "the completion is not the last action: \(actions)")
            require(r.phase == .complete, "completed, phase \(r.phase)")
            require(i > 0 && actions[i - 1].sentBytes == APINoiseVector.serverHandshake,
                    "completed without the vectors' answer: \(actions)")
            require(t.handshakeHash == APINoiseVector.handshakeHash, "completed with another handshake hash")
            require(t.sendCipher.hasKey && t.receiveCipher.hasKey && t.sendCipher.nonce == 0 && t.receiveCipher.nonce == 0,
                    "the transport's ciphers are not fresh")
            run.completed = true
            run.handshakeHash = t.handshakeHash
            run.transport = t
        }
    }
}

extension NoiseResponderAction {
    var sentBytes: [UInt8]? { if case let .send(b) = self { return b } else { return nil } }
}

/// Feeds the transport one piece, checking a failure is reported once and then only repeated.
func transportReceive(_ piece: ArraySlice<UInt8>, _ run: inout NoiseRun) {
    guard var t = run.transport else { return }
    if case .failed? = run.events.last { return }
    let events = t.receive(piece)
    for (i, e) in events.enumerated() {
        if case let .failed(why) = e {
            _ = why.description
            require(i == events.count - 1, "events after the transport failed: \(events)")
            require(t.receive([0x01, 0x00, 0x00]) == [.failed(why)], "a failed transport did not stay failed")
        }
    }
    run.events += events
    run.transport = t
}

/// Runs the client's stream in `pieces`.
func noiseRun(_ pieces: [ArraySlice<UInt8>]) -> NoiseRun {
    var r = apiNoiseResponder()
    var run = NoiseRun()
    for piece in pieces {
        if run.completed {
            transportReceive(piece, &run)
            continue
        }
        let actions = r.receive(piece)
        checkResponderActions(actions, &run, r)
        if run.failure != nil || run.completed {
            let phase = r.phase
            require(r.receive(piece).isEmpty && r.phase == phase, "the responder took bytes after the handshake ended")
        }
        if run.failure != nil { break }
    }
    // Bytes that came with the handshake's last frame are in the transport already.
    transportReceive([], &run)
    return run
}

func fuzzAPINoise(_ data: [UInt8]) {
    var input = FuzzInput(data)
    let mode = input.u8()
    var stream: [UInt8]
    // Sealed mode: the messages the transport must yield, nil once unpredictable.
    var expected: [NoiseTransportEvent]? = nil
    if mode & 1 == 0 {
        stream = Array(data.dropFirst())
    } else {
        stream = APINoiseVector.clientHandshake
        expected = []
        var cipher = apiNoiseClientCiphers.send
        while !input.isAtEnd {
            let op = input.u8() % 3
            let bytes = input.chunk()
            var plaintext = bytes
            if op == 1 {
                let payload = Array(bytes.dropFirst(2))
                plaintext = Array(bytes.prefix(2)) + [UInt8](repeating: 0, count: 2 - min(2, bytes.count))
                    + [UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)] + payload
            }
            if op == 2 {
                stream += bytes
                expected = nil
                continue
            }
            guard let body = try? cipher.encrypt(plaintext), let frame = try? NoiseFrame.encode(body) else {
                require(false, "the client's cipher cannot encrypt \(plaintext.count) bytes")
                return
            }
            stream += frame
            // The transport decodes nothing after a failure.
            guard let sofar = expected, !sofar.contains(where: { if case .failed = $0 { true } else { false } }) else { continue }
            let length = plaintext.count < 4 ? 0 : Int(plaintext[2]) << 8 | Int(plaintext[3])
            if plaintext.count < 4 || length > plaintext.count - 4 {
                expected!.append(.failed(.badDataPacket("")))  // the text is not compared
            } else {
                expected!.append(.message(type: APIMessageType(rawValue: UInt16(plaintext[0]) << 8 | UInt16(plaintext[1])),
                                          payload: Array(plaintext[4..<4 + length])))
            }
        }
    }

    let whole = noiseRun([stream[...]])
    let pieces = noiseRun(socketPieces(stream))
    require(whole.sent == pieces.sent && whole.failure == pieces.failure && whole.completed == pieces.completed,
            "the handshake depends on how the stream was split: \(whole.failure.map { "\($0)" } ?? "-") / \(pieces.failure.map { "\($0)" } ?? "-")")
    require(whole.events == pieces.events, "the transport's events depend on how the stream was split")

    if whole.completed {
        // Only the client's real handshake completes it.
        require(stream.starts(with: APINoiseVector.clientHandshake), "a handshake other than the vectors' completed: a forged tag")
    }
    if mode & 1 == 1 {
        require(whole.completed, "the vectors' client handshake did not complete")
    }

    if let expected {
        require(whole.events.count == expected.count, "\(whole.events.count) events for \(expected.count) sealed frames: \(whole.events)")
        for (got, want) in zip(whole.events, expected) {
            switch (got, want) {
            case (.failed(.badDataPacket), .failed): break
            default: require(got == want, "a sealed frame gave \(got), not \(want)")
            }
        }
    }

    // Every message decodes as in api-message; the transport's encryption of it the client reads back.
    guard var t = whole.transport else { return }
    var clientReceive = apiNoiseClientCiphers.receive
    for e in whole.events {
        guard case let .message(type, payload) = e else { continue }
        checkAPIMessage(type, payload)
        guard let frame = try? t.encrypt(type: type, payload: payload) else {
            require(false, "the transport cannot encrypt \(type) of \(payload.count) bytes")
            return
        }
        var d = NoiseFrameDecoder()
        d.append(frame)
        guard case let .frame(body) = d.next(), d.bufferedCount == 0, let plain = try? clientReceive.decrypt(body) else {
            require(false, "the client cannot read what the transport encrypted: \(Hex.string(frame))")
            return
        }
        require(plain == [UInt8(type.rawValue >> 8), UInt8(type.rawValue & 0xFF), UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)] + payload,
                "the transport encrypted \(type) as \(Hex.string(plain))")
    }
}
