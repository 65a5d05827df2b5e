import BLEWire

// The ESPHome native API's two framings over TCP (ESPHome's
// api_frame_helper_plaintext.cpp and api_frame_helper_noise.cpp;
// aioesphomeapi's _frame_helper/plain_text.py and noise.py):
//   plaintext: 0x00, varint payload length, varint message type, payload
//   Noise:     0x01, u16 big-endian body length, body
// The decoders are incremental: fed any chunks, each call of `next()` says
// "need more bytes", hands over one frame, or says why the stream is corrupt.

/// Why a frame decoder gave up. Once corrupt, a decoder stays corrupt: the
/// stream has lost its framing and the connection must close.
public enum FrameCorruption: Error, Equatable, Sendable, CustomStringConvertible {
    /// The first byte of a frame was not the format's indicator (0x00
    /// plaintext, 0x01 Noise): the peer speaks the other format, or garbage.
    case wrongIndicator(UInt8, expected: UInt8)
    /// A header varint ran past 10 bytes or past 64 bits.
    case overlongVarint(field: String)
    /// The frame says it is longer than the decoder's limit.
    case tooLarge(length: UInt64, limit: Int)
    /// A plaintext message type above 65535 (ESPHome refuses it too).
    case typeOutOfRange(UInt64)

    public var description: String {
        switch self {
        case let .wrongIndicator(b, expected):
            return "indicator byte 0x\(Hex.int(b, width: 2)), expected 0x\(Hex.int(expected, width: 2))"
        case let .overlongVarint(field): return "\(field) varint longer than 10 bytes or over 64 bits"
        case let .tooLarge(length, limit): return "frame of \(length) bytes over the limit of \(limit)"
        case let .typeOutOfRange(t): return "message type \(t) over 65535"
        }
    }
}

/// What an incremental decoder found.
public enum FrameDecodeResult<Frame: Equatable & Sendable>: Equatable, Sendable {
    /// The bytes so far end inside a frame (or there are none).
    case needMoreBytes
    case frame(Frame)
    case corrupt(FrameCorruption)
}

/// An encoder was given more than its format can carry.
public enum FrameEncodingError: Error, Equatable, Sendable, CustomStringConvertible {
    case bodyTooLarge(count: Int, limit: Int)
    public var description: String {
        switch self {
        case let .bodyTooLarge(count, limit): return "\(count) bytes do not fit a frame (at most \(limit))"
        }
    }
}

/// The bytes a decoder has been fed and not yet handed out.
struct FrameBuffer: Sendable {
    private(set) var bytes: [UInt8] = []
    private var start = 0

    var count: Int { bytes.count - start }
    subscript(i: Int) -> UInt8? { start + i < bytes.count ? bytes[start + i] : nil }

    mutating func append<C: Collection>(_ more: C) where C.Element == UInt8 { bytes.append(contentsOf: more) }

    /// Hands out `range` (relative to the unread bytes) and drops everything before its end.
    mutating func take(_ range: Range<Int>) -> [UInt8] {
        let out = Array(bytes[start + range.lowerBound..<start + range.upperBound])
        start += range.upperBound
        if start == bytes.count {
            bytes.removeAll(keepingCapacity: true)
            start = 0
        } else if start >= 4096 && start * 2 >= bytes.count {
            bytes.removeFirst(start)
            start = 0
        }
        return out
    }

    enum Varint { case incomplete, overlong, value(UInt64, end: Int) }

    /// The varint starting at `offset`, without consuming it.
    func varint(at offset: Int) -> Varint {
        var value: UInt64 = 0
        for i in 0..<ProtoWire.maxVarintBytes {
            guard let b = self[offset + i] else { return .incomplete }
            if i == ProtoWire.maxVarintBytes - 1 && b > 1 { return .overlong }
            value |= UInt64(b & 0x7F) << (7 * UInt64(i))
            if b & 0x80 == 0 { return .value(value, end: offset + i + 1) }
        }
        return .overlong
    }
}

/// One plaintext frame: a message type and its protobuf payload.
public struct PlaintextFrame: Equatable, Sendable {
    public var type: APIMessageType
    public var payload: [UInt8]
    /// A frame of `payload` (protobuf bytes) as message `type`.
    public init(type: APIMessageType, payload: [UInt8]) {
        self.type = type
        self.payload = payload
    }

    /// `0x00, varint length, varint type, payload`.
    public var encoded: [UInt8] {
        [0x00] + ProtoWire.varint(UInt64(payload.count)) + ProtoWire.varint(UInt64(type.rawValue)) + payload
    }

    /// A message's frame.
    public static func encode(_ message: some APIMessage) -> [UInt8] {
        let (type, payload) = APIMessages.encode(message)
        return PlaintextFrame(type: type, payload: payload).encoded
    }

    /// What ESPHome's plaintext server writes, unframed, to a client whose
    /// first byte is not 0x00 (a Noise client) before it closes: 0x00 and
    /// "Bad indicator byte", which a Noise client reads as a plaintext server.
    public static let badIndicatorReply: [UInt8] = [0x00] + Array("Bad indicator byte".utf8)
}

/// The incremental plaintext decoder.
public struct PlaintextFrameDecoder: Sendable {
    /// The largest payload accepted: 32768 bytes, ESPHome's MAX_MESSAGE_SIZE on
    /// an ESP32 (api_frame_helper.h). A proxy's largest messages, GATT
    /// service lists and advertisement batches, stay well below it, and the
    /// limit keeps a peer from making us buffer without end.
    public static let defaultLimit = 32768

    public let limit: Int
    private var buffer = FrameBuffer()
    private var failure: FrameCorruption?

    /// An empty decoder refusing payloads over `limit` bytes.
    public init(limit: Int = PlaintextFrameDecoder.defaultLimit) { self.limit = limit }

    /// Bytes received and not yet handed out as a frame.
    public var bufferedCount: Int { buffer.count }

    /// Adds received bytes (any chunk: a byte, a frame, several).
    public mutating func append<C: Collection>(_ bytes: C) where C.Element == UInt8 { buffer.append(bytes) }

    /// The next frame, if the buffered bytes complete one.
    public mutating func next() -> FrameDecodeResult<PlaintextFrame> {
        if let failure { return .corrupt(failure) }
        guard let indicator = buffer[0] else { return .needMoreBytes }
        guard indicator == 0x00 else { return fail(.wrongIndicator(indicator, expected: 0x00)) }
        let length: UInt64, afterLength: Int
        switch buffer.varint(at: 1) {
        case .incomplete: return .needMoreBytes
        case .overlong: return fail(.overlongVarint(field: "length"))
        case let .value(v, end): (length, afterLength) = (v, end)
        }
        guard length <= UInt64(limit) else { return fail(.tooLarge(length: length, limit: limit)) }
        let type: UInt64, headerEnd: Int
        switch buffer.varint(at: afterLength) {
        case .incomplete: return .needMoreBytes
        case .overlong: return fail(.overlongVarint(field: "type"))
        case let .value(v, end): (type, headerEnd) = (v, end)
        }
        guard type <= UInt64(UInt16.max) else { return fail(.typeOutOfRange(type)) }
        let end = headerEnd + Int(length)
        guard buffer.count >= end else { return .needMoreBytes }
        let payload = buffer.take(headerEnd..<end)
        return .frame(PlaintextFrame(type: APIMessageType(rawValue: UInt16(type)), payload: payload))
    }

    private mutating func fail(_ why: FrameCorruption) -> FrameDecodeResult<PlaintextFrame> {
        failure = why
        return .corrupt(why)
    }
}

/// The Noise framing: `0x01, u16 big-endian length, body`. The body is a
/// handshake message, or once the handshake is done a ChaCha20-Poly1305
/// ciphertext (see `NoiseTransport`).
public enum NoiseFrame {
    /// The most a frame's u16 length can say.
    public static let maxBody = 0xFFFF

    /// The frame around `body`.
    /// - Throws: `FrameEncodingError.bodyTooLarge` over 65535 bytes.
    public static func encode(_ body: [UInt8]) throws(FrameEncodingError) -> [UInt8] {
        guard body.count <= maxBody else { throw .bodyTooLarge(count: body.count, limit: maxBody) }
        return [0x01, UInt8(body.count >> 8), UInt8(body.count & 0xFF)] + body
    }
}

/// The incremental Noise frame decoder.
public struct NoiseFrameDecoder: Sendable {
    /// The largest body during the handshake: ESPHome's MAX_HANDSHAKE_SIZE
    /// (128); its messages are 1 + 32 + 16 bytes.
    public static let handshakeLimit = 128
    /// The largest body afterwards: ESPHome's MAX_MESSAGE_SIZE on an ESP32
    /// (32768), as for plaintext.
    public static let dataLimit = 32768

    /// The largest body accepted now (the responder raises it after the handshake).
    public var limit: Int
    private var buffer = FrameBuffer()
    private var failure: FrameCorruption?

    /// An empty decoder refusing bodies over `limit` bytes.
    public init(limit: Int = NoiseFrameDecoder.dataLimit) { self.limit = limit }

    public var bufferedCount: Int { buffer.count }

    /// Adds received bytes (any chunk).
    public mutating func append<C: Collection>(_ bytes: C) where C.Element == UInt8 { buffer.append(bytes) }

    /// The next frame's body, if the buffered bytes complete one. A wrong
    /// indicator is reported as soon as the first byte is in.
    public mutating func next() -> FrameDecodeResult<[UInt8]> {
        if let failure { return .corrupt(failure) }
        guard let indicator = buffer[0] else { return .needMoreBytes }
        guard indicator == 0x01 else { return fail(.wrongIndicator(indicator, expected: 0x01)) }
        guard let high = buffer[1], let low = buffer[2] else { return .needMoreBytes }
        let length = Int(high) << 8 | Int(low)
        guard length <= limit else { return fail(.tooLarge(length: UInt64(length), limit: limit)) }
        guard buffer.count >= 3 + length else { return .needMoreBytes }
        return .frame(buffer.take(3..<3 + length))
    }

    private mutating func fail(_ why: FrameCorruption) -> FrameDecodeResult<[UInt8]> {
        failure = why
        return .corrupt(why)
    }
}
