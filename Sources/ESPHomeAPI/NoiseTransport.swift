import BLEWire

/// Why an encrypted connection cannot go on (ESPHome closes it without a word).
public enum NoiseTransportFailure: Error, Equatable, Sendable, CustomStringConvertible {
    /// The byte stream lost its framing (a wrong indicator, a frame over 32768 bytes).
    case corruptFrame(FrameCorruption)
    /// A frame failed its tag (ESPHome's CIPHERSTATE_DECRYPT_FAILED).
    case decryptFailed(NoiseError)
    /// A decrypted frame shorter than its 4-byte header, or whose length
    /// field says more than it holds (ESPHome's BAD_DATA_PACKET).
    case badDataPacket(String)

    public var description: String {
        switch self {
        case let .corruptFrame(c): return "corrupt frame: \(c)"
        case let .decryptFailed(e): return "cannot decrypt a frame: \(e)"
        case let .badDataPacket(why): return "bad data packet: \(why)"
        }
    }
}

/// What the transport found in the client's bytes.
public enum NoiseTransportEvent: Equatable, Sendable {
    /// One message: its type and protobuf payload (`APIMessages.decode` reads it).
    case message(type: APIMessageType, payload: [UInt8])
    /// The connection must close.
    case failed(NoiseTransportFailure)
}

/// The encrypted connection after the Noise handshake: the two cipher
/// states (ours to send, the client's to receive) and the frame decoder,
/// sans I/O. Each frame's body is ChaCha20-Poly1305 with no associated data
/// and the nonce counting up from 0; its plaintext is the message type (u16
/// big-endian), the payload's length (u16 big-endian) and the payload
/// (ESPHome tolerates, and we drop, padding after it).
public struct NoiseTransport: Sendable {
    /// The largest payload one frame carries: 65535 less the 4-byte header and the tag.
    public static let maxPayload = NoiseFrame.maxBody - 4 - NoiseCrypto.tagLength

    public private(set) var sendCipher: NoiseCipherState
    public private(set) var receiveCipher: NoiseCipherState
    private var decoder: NoiseFrameDecoder
    private var failure: NoiseTransportFailure?
    /// The handshake hash both sides share (Noise 5.2 GetHandshakeHash), for
    /// channel binding and for tests.
    public let handshakeHash: [UInt8]

    init(send: NoiseCipherState, receive: NoiseCipherState, decoder: NoiseFrameDecoder, handshakeHash: [UInt8]) {
        sendCipher = send
        receiveCipher = receive
        self.decoder = decoder
        self.handshakeHash = handshakeHash
    }

    /// Feeds bytes from the client; returns the messages they complete, or a
    /// failure (after which nothing more is decoded).
    public mutating func receive<C: Collection>(_ bytes: C) -> [NoiseTransportEvent] where C.Element == UInt8 {
        if let failure { return [.failed(failure)] }
        decoder.append(bytes)
        var events: [NoiseTransportEvent] = []
        while true {
            switch decoder.next() {
            case .needMoreBytes:
                return events
            case let .corrupt(why):
                return events + [fail(.corruptFrame(why))]
            case let .frame(body):
                switch decrypt(body) {
                case let .success(message): events.append(message)
                case let .failure(why): return events + [fail(why)]
                }
            }
        }
    }

    private mutating func decrypt(_ body: [UInt8]) -> Result<NoiseTransportEvent, NoiseTransportFailure> {
        let plaintext: [UInt8]
        do throws(NoiseError) {
            plaintext = try receiveCipher.decrypt(body)
        } catch {
            return .failure(.decryptFailed(error))
        }
        var r = ByteReader(plaintext)
        guard let t = try? r.bytes(2), let n = try? r.bytes(2) else {
            return .failure(.badDataPacket("\(plaintext.count) bytes, shorter than the 4-byte header"))
        }
        let type = UInt16(t[0]) << 8 | UInt16(t[1]), length = Int(n[0]) << 8 | Int(n[1])
        guard let payload = try? r.bytes(length) else {
            return .failure(.badDataPacket("length \(length) over the \(r.remaining) bytes that follow"))
        }
        return .success(.message(type: APIMessageType(rawValue: type), payload: payload))
    }

    private mutating func fail(_ why: NoiseTransportFailure) -> NoiseTransportEvent {
        failure = why
        return .failed(why)
    }

    /// One message as a whole encrypted frame, ready to write.
    /// - Throws: `FrameEncodingError.bodyTooLarge` for a payload over
    ///   `maxPayload`; `NoiseError` when encryption fails.
    public mutating func encrypt(type: APIMessageType, payload: [UInt8]) throws -> [UInt8] {
        guard payload.count <= Self.maxPayload else {
            throw FrameEncodingError.bodyTooLarge(count: payload.count, limit: Self.maxPayload)
        }
        let header = [UInt8(type.rawValue >> 8), UInt8(type.rawValue & 0xFF), UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)]
        return try NoiseFrame.encode(try sendCipher.encrypt(header + payload))
    }

    /// A message as a whole encrypted frame.
    public mutating func encrypt(_ message: some APIMessage) throws -> [UInt8] {
        let (type, payload) = APIMessages.encode(message)
        return try encrypt(type: type, payload: payload)
    }
}
