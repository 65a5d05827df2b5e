/// Why the Noise handshake failed, as ESPHome's APINoiseFrameHelper tells
/// the client (api_frame_helper_noise.cpp): most failures answer one last
/// frame whose body is 0x01 and the reason's text, and the connection closes.
public enum NoiseHandshakeFailure: Error, Equatable, Sendable, CustomStringConvertible {
    /// A frame did not start with 0x01; a plaintext client's first byte is 0x00.
    case badIndicator(UInt8)
    /// A handshake frame over 128 bytes.
    case packetTooLong(Int)
    /// The handshake frame had no body.
    case emptyHandshakeMessage
    /// The handshake frame's first byte was not 0x00 (the client's "ok").
    case badHandshakeErrorByte(UInt8)
    /// The client's message failed its tag: the client's key is not ours.
    case macFailure
    /// The client's message was malformed in another way (too short).
    case handshakeError(NoiseError)
    /// Our own side failed (libcrypto missing, no randomness): nothing is sent.
    case localFailure(NoiseError)

    /// The text ESPHome sends after the 0x01 byte, or nil when it sends nothing.
    public var rejectReason: String? {
        switch self {
        case .badIndicator: return "Bad indicator byte"
        case .packetTooLong: return "Bad handshake packet len"
        case .emptyHandshakeMessage: return "Empty handshake message"
        case .badHandshakeErrorByte: return "Bad handshake error byte"
        case .macFailure: return "Handshake MAC failure"
        case .handshakeError: return "Handshake error"
        case .localFailure: return nil
        }
    }

    public var description: String {
        switch self {
        case let .badIndicator(b): return "bad indicator byte 0x\(String(b, radix: 16)) (a plaintext client?)"
        case let .packetTooLong(n): return "handshake frame of \(n) bytes"
        case .emptyHandshakeMessage: return "empty handshake message"
        case let .badHandshakeErrorByte(b): return "handshake error byte \(b)"
        case .macFailure: return "handshake MAC failure (the client's encryption key differs)"
        case let .handshakeError(e): return "handshake error: \(e)"
        case let .localFailure(e): return "handshake failed here: \(e)"
        }
    }
}

/// What the responder asks its owner to do.
public enum NoiseResponderAction: Sendable {
    /// Write these bytes (whole frames) to the client.
    case send([UInt8])
    /// The handshake is done: from now on the transport owns the connection's
    /// bytes (any the client sent past the handshake are already in it).
    case handshakeComplete(NoiseTransport)
    /// The handshake failed: close the connection (after writing any `send` before it).
    case failed(NoiseHandshakeFailure)
}

/// The server's side of the ESPHome API's Noise handshake
/// (Noise_NNpsk0_25519_ChaChaPoly_SHA256, ESPHome's api_frame_helper_noise.cpp,
/// aioesphomeapi's _frame_helper/noise.py as the client), sans I/O: feed it
/// the bytes the client sends (`receive`), carry out the actions it returns.
///
/// 1. The client's first frame is its hello (an empty body today). The
///    prologue is "NoiseAPIInit", the hello's length (u16 big-endian) and
///    the hello; we answer with the server hello frame: 0x01 (the chosen
///    protocol), the node name, 0x00, the MAC as 12 lowercase hex digits, 0x00.
/// 2. The client's handshake frame: 0x00, then `-> psk, e` (its ephemeral key
///    and the tag of an empty payload). We answer 0x00, then `<- e, ee`.
/// 3. Done: `.handshakeComplete` hands over a `NoiseTransport`.
///
/// A failure answers ESPHome's reject frame (0x01 and the reason) where
/// ESPHome does, then `.failed`; the frames before the handshake completes
/// are limited to 128 bytes, as ESPHome's are.
public struct NoiseResponder {
    /// Where the handshake stands, as the owner sees it.
    public enum Phase: Hashable, Sendable {
        case awaitingClientHello, awaitingHandshake, complete, failed
    }

    /// The prologue's constant start (ESPHome's PROLOGUE_INIT).
    public static let prologuePrefix = Array("NoiseAPIInit".utf8)

    /// Where the handshake stands; the Noise state lives in the state that has one.
    private enum State {
        case awaitingClientHello
        case awaitingHandshake(NoiseNNpsk0Responder)
        case complete
        case failed
    }

    private var state = State.awaitingClientHello
    private let psk: NoisePSK
    private let serverHello: [UInt8]
    private let ephemeralPrivateKey: [UInt8]?
    private var decoder = NoiseFrameDecoder(limit: NoiseFrameDecoder.handshakeLimit)

    public var phase: Phase {
        switch state {
        case .awaitingClientHello: return .awaitingClientHello
        case .awaitingHandshake: return .awaitingHandshake
        case .complete: return .complete
        case .failed: return .failed
        }
    }

    /// A responder for one connection.
    /// - Parameters:
    ///   - psk: the API encryption key.
    ///   - name: the node's name, sent in the server hello (the client may
    ///     check it against the name it expects); NUL bytes are dropped.
    ///   - macAddress: the node's MAC, 6 bytes in printed order, sent as 12
    ///     lowercase hex digits (the client may check it).
    ///   - ephemeralPrivateKey: our X25519 key for this handshake; nil for a
    ///     fresh random one (tests inject a fixed one).
    public init(psk: NoisePSK, name: String, macAddress: [UInt8], ephemeralPrivateKey: [UInt8]? = nil) {
        self.psk = psk
        self.ephemeralPrivateKey = ephemeralPrivateKey
        let digits = Array("0123456789abcdef".utf8)
        let mac = macAddress.flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 0x0F)]] }
        serverHello = [0x01] + Array(name.utf8).filter { $0 != 0 } + [0x00] + mac + [0x00]
    }

    /// Feeds bytes from the client; returns what to do, in order. After
    /// `.handshakeComplete` or `.failed` it takes no more bytes.
    public mutating func receive<C: Collection>(_ bytes: C) -> [NoiseResponderAction] where C.Element == UInt8 {
        if case .complete = state { return [] }
        if case .failed = state { return [] }
        var actions: [NoiseResponderAction] = []
        decoder.append(bytes)
        while true {
            let noise: NoiseNNpsk0Responder?
            switch state {
            case .awaitingClientHello: noise = nil
            case let .awaitingHandshake(n): noise = n
            case .complete, .failed: return actions
            }
            switch decoder.next() {
            case .needMoreBytes:
                return actions
            case let .corrupt(.wrongIndicator(b, _)):
                return actions + fail(.badIndicator(b))
            case let .corrupt(why):
                // A Noise frame has no varints: the other corruption is a length over the limit.
                guard case let .tooLarge(length, _) = why else { return actions + fail(.packetTooLong(0)) }
                return actions + fail(.packetTooLong(Int(length)))
            case let .frame(body):
                if let noise { actions += handshakeMessage(body, noise) } else { actions += clientHello(body) }
            }
        }
    }

    /// The client hello: build the prologue, answer the server hello, start Noise.
    private mutating func clientHello(_ body: [UInt8]) -> [NoiseResponderAction] {
        let prologue = Self.prologuePrefix + [UInt8(body.count >> 8), UInt8(body.count & 0xFF)] + body
        do throws(NoiseError) {
            let key = if let ephemeralPrivateKey { ephemeralPrivateKey } else { try NoiseCrypto.random(NoiseCrypto.dhLength) }
            state = .awaitingHandshake(try NoiseNNpsk0Responder(prologue: prologue, psk: psk.bytes, ephemeralPrivateKey: key))
        } catch {
            return fail(.localFailure(error))
        }
        return [.send(Self.frame(serverHello))]
    }

    /// The client's `-> psk, e`: check it, answer `<- e, ee`, hand over the transport.
    private mutating func handshakeMessage(_ body: [UInt8], _ handshake: NoiseNNpsk0Responder) -> [NoiseResponderAction] {
        guard let first = body.first else { return fail(.emptyHandshakeMessage) }
        guard first == 0x00 else { return fail(.badHandshakeErrorByte(first)) }
        var noise = handshake
        do throws(NoiseError) {
            _ = try noise.readFirstMessage(Array(body.dropFirst()))  // the payload is empty today, and unused
        } catch .macFailure {
            return fail(.macFailure)
        } catch {
            return fail(.handshakeError(error))
        }
        let reply: (message: [UInt8], send: NoiseCipherState, receive: NoiseCipherState)
        do throws(NoiseError) {
            reply = try noise.writeSecondMessage()
        } catch .invalidPublicKey {
            // The client's `e` is a low-order point (ee would be all zeros): its
            // fault, answered as ESPHome answers a bad handshake.
            return fail(.handshakeError(.invalidPublicKey))
        } catch {
            return fail(.localFailure(error))
        }
        state = .complete
        decoder.limit = NoiseFrameDecoder.dataLimit
        let transport = NoiseTransport(send: reply.send, receive: reply.receive, decoder: decoder,
                                       handshakeHash: noise.handshakeHash)
        decoder = NoiseFrameDecoder()
        return [.send(Self.frame([0x00] + reply.message)), .handshakeComplete(transport)]
    }

    private mutating func fail(_ why: NoiseHandshakeFailure) -> [NoiseResponderAction] {
        state = .failed
        guard let reason = why.rejectReason else { return [.failed(why)] }
        return [.send(Self.rejectFrame(reason)), .failed(why)]
    }

    /// ESPHome's explicit reject: a frame whose body is 0x01 and `reason`.
    public static func rejectFrame(_ reason: String) -> [UInt8] {
        frame([0x01] + Array(reason.utf8))
    }

    /// A handshake frame (its bodies are far below the u16 limit).
    static func frame(_ body: [UInt8]) -> [UInt8] {
        [0x01, UInt8(truncatingIfNeeded: body.count >> 8), UInt8(truncatingIfNeeded: body.count)] + body
    }
}
