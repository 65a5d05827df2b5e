// api-frames: the input is a byte stream from a Home Assistant client (or
// anything a TCP port receives). It is fed to PlaintextFrameDecoder and to
// NoiseFrameDecoder three ways each (whole, one byte at a time, in pieces
// whose sizes come from the input); all three must find the same frames,
// stop at the same corruption and leave the same bytes unread. Frames are
// the stream's own bytes: Noise frames encode back to the consumed prefix;
// plaintext frames (whose varints may be padded) encode back no longer and
// decode back equal. A corruption names the byte or the value that caused
// it, and a corrupt decoder stays corrupt. Every plaintext frame is a
// message for APIMessages.decode; a Noise frame's body is read as the
// transport's plaintext (u16 type, u16 length, payload) and its payload
// decoded the same way.
//
// api-message: bytes 0-1 (big-endian) pick the message type: a declared type
// id picks itself; any other value v picks APIMessages.all[v % (n + 1)], or,
// for n, the undeclared type v (n = the number of declared types). The rest
// is the payload.
//
// Both check every message the same way (checkAPIMessage): a declared type
// decodes to its own message or throws; an undeclared one comes back as
// .unknown with the payload untouched. A decoded message re-encodes to
// protobuf that decodes again, to an equal message whose encoding is the
// same bytes (re-encode(decode(x)) is a fixed point), and its plaintext frame
// decodes back to its type and payload.
import BLEWire
import ESPHomeAPI

/// Whether `a` and `b` are the same message (`b` of `a`'s type and equal).
func sameAPIMessage<M: APIMessage>(_ a: M, _ b: any APIMessage) -> Bool { (b as? M) == a }

/// Decodes one message and holds it to its round trip.
func checkAPIMessage(_ type: APIMessageType, _ payload: [UInt8]) {
    let declared = APIMessages.all.contains { $0.messageType == type }
    _ = type.description
    let decoded: DecodedAPIMessage
    do { decoded = try APIMessages.decode(type: type, payload: payload) } catch {
        _ = "\(error)"
        require(declared, "undeclared \(type) did not come back as .unknown: \(error)")
        return
    }
    require(decoded.type == type, "\(type) decoded as \(decoded.type)")
    switch decoded {
    case let .unknown(t, p):
        require(!declared, "declared \(type) came back as .unknown")
        require(t == type && p == payload, "\(type) came back as .unknown(\(t)) with a different payload")
    case let .known(m):
        require(declared, "undeclared \(type) decoded as \(Swift.type(of: m))")
        let once = m.protobuf
        let again: DecodedAPIMessage
        do { again = try APIMessages.decode(type: type, payload: once) } catch {
            require(false, "\(type) payload \(Hex.string(payload)) re-encodes as \(Hex.string(once)), which is refused: \(error)")
            return
        }
        guard case let .known(m2) = again else {
            require(false, "\(type) re-encoded came back as .unknown")
            return
        }
        let twice = m2.protobuf
        require(twice == once, "\(type) payload \(Hex.string(payload)) re-encodes as \(Hex.string(once)), which re-encodes as \(Hex.string(twice))")
        require(sameAPIMessage(m, m2), "\(type) payload \(Hex.string(payload)) decodes to \(m), re-encoded \(Hex.string(once)) decodes to \(m2)")
        // Its plaintext frame reads back.
        var d = PlaintextFrameDecoder(limit: Int.max)
        d.append(PlaintextFrame(type: type, payload: once).encoded)
        require(d.next() == .frame(PlaintextFrame(type: type, payload: once)) && d.bufferedCount == 0,
                "\(type)'s plaintext frame does not decode back to it")
    }
}

/// The input cut into pieces, mostly short reads and now and then a long
/// one, as sockets deliver; the sizes come from the input.
func socketPieces(_ data: [UInt8]) -> [ArraySlice<UInt8>] {
    var rng = SplitMix(seed: data)
    var pieces: [ArraySlice<UInt8>] = []
    var i = 0
    while i < data.count {
        let n = 1 + (rng.below(4) == 0 ? rng.below(512) : rng.below(8))
        let j = min(data.count, i + n)
        pieces.append(data[i..<j])
        i = j
    }
    return pieces
}

/// What a frame decoder made of a stream.
struct FrameRun<Frame: Equatable>: Equatable {
    var frames: [Frame] = []
    var corruption: FrameCorruption?
    /// Bytes the frames took (up to the corruption, if any).
    var consumed = 0
}

/// Feeds `pieces` in order, taking every whole frame after each piece, until
/// the stream is corrupt.
func runFrameDecoder<Frame>(_ pieces: [ArraySlice<UInt8>], append: (ArraySlice<UInt8>) -> Void,
                            next: () -> FrameDecodeResult<Frame>, buffered: () -> Int) -> FrameRun<Frame> {
    var run = FrameRun<Frame>()
    var fed = 0
    outer: for piece in pieces {
        append(piece)
        fed += piece.count
        while true {
            switch next() {
            case .needMoreBytes:
                continue outer
            case let .frame(f):
                run.frames.append(f)
            case let .corrupt(why):
                run.corruption = why
                require(next() == .corrupt(why), "a corrupt decoder decoded on")
                break outer
            }
        }
    }
    run.consumed = fed - buffered()
    return run
}

func plaintextRun(_ pieces: [ArraySlice<UInt8>]) -> FrameRun<PlaintextFrame> {
    var d = PlaintextFrameDecoder()
    return runFrameDecoder(pieces, append: { d.append($0) }, next: { d.next() }, buffered: { d.bufferedCount })
}

func noiseFrameRun(_ pieces: [ArraySlice<UInt8>]) -> FrameRun<[UInt8]> {
    var d = NoiseFrameDecoder()
    return runFrameDecoder(pieces, append: { d.append($0) }, next: { d.next() }, buffered: { d.bufferedCount })
}

func fuzzAPIFrames(_ data: [UInt8]) {
    let splits = [[data[...]], data.indices.map { data[$0..<$0 + 1] }, socketPieces(data)]

    // Plaintext.
    let plain = plaintextRun(splits[0])
    for s in splits.dropFirst() {
        let other = plaintextRun(s)
        require(other == plain, "plaintext frames depend on how the stream was split: \(plain) / \(other)")
    }
    let plainEncoded = plain.frames.flatMap(\.encoded)
    require(plainEncoded.count <= plain.consumed, "plaintext frames re-encode longer than the \(plain.consumed) bytes they came from")
    let plainAgain = plaintextRun([plainEncoded[...]])
    require(plainAgain.frames == plain.frames && plainAgain.corruption == nil && plainAgain.consumed == plainEncoded.count,
            "re-encoded plaintext frames do not decode back to themselves")
    if let why = plain.corruption {
        _ = why.description
        require(plain.consumed < data.count, "plaintext corruption \(why) with no byte left")
        switch why {
        case let .wrongIndicator(b, expected):
            require(expected == 0x00 && b != 0x00 && b == data[plain.consumed], "plaintext \(why) at a byte \(data[plain.consumed])")
        case let .tooLarge(length, limit):
            require(limit == PlaintextFrameDecoder.defaultLimit && length > UInt64(limit), "plaintext \(why)")
        case let .typeOutOfRange(t):
            require(t > UInt64(UInt16.max), "plaintext \(why)")
        case .overlongVarint:
            require(data.count - plain.consumed > ProtoWire.maxVarintBytes, "plaintext \(why) with only \(data.count - plain.consumed) bytes left")
        }
    }
    for f in plain.frames { checkAPIMessage(f.type, f.payload) }

    // Noise.
    let noise = noiseFrameRun(splits[0])
    for s in splits.dropFirst() {
        let other = noiseFrameRun(s)
        require(other == noise, "Noise frames depend on how the stream was split")
    }
    var noiseEncoded: [UInt8] = []
    for body in noise.frames {
        guard let f = try? NoiseFrame.encode(body) else {
            require(false, "a decoded Noise body of \(body.count) bytes does not encode")
            return
        }
        noiseEncoded += f
    }
    require(noise.consumed == noiseEncoded.count && noiseEncoded[...] == data[0..<noise.consumed],
            "Noise frames do not encode back to the bytes they came from")
    if let why = noise.corruption {
        _ = why.description
        switch why {
        case let .wrongIndicator(b, expected):
            require(expected == 0x01 && b != 0x01 && noise.consumed < data.count && b == data[noise.consumed], "Noise \(why)")
        case let .tooLarge(length, limit):
            let at = noise.consumed
            require(limit == NoiseFrameDecoder.dataLimit && length > UInt64(limit) && at + 2 < data.count
                    && length == UInt64(data[at + 1]) << 8 | UInt64(data[at + 2]), "Noise \(why)")
        default:
            require(false, "Noise frames have no varints, yet \(why)")
        }
    }
    for body in noise.frames where body.count >= 4 {
        let type = UInt16(body[0]) << 8 | UInt16(body[1])
        let length = Int(body[2]) << 8 | Int(body[3])
        if length <= body.count - 4 { checkAPIMessage(APIMessageType(rawValue: type), Array(body[4..<4 + length])) }
    }
}

func fuzzAPIMessage(_ data: [UInt8]) {
    guard data.count >= 2 else { return }
    let v = UInt16(data[0]) << 8 | UInt16(data[1])
    let all = APIMessages.all
    let type: APIMessageType
    if all.contains(where: { $0.messageType.rawValue == v }) {
        type = APIMessageType(rawValue: v)
    } else {
        let i = Int(v) % (all.count + 1)
        type = i < all.count ? all[i].messageType : APIMessageType(rawValue: v)
    }
    checkAPIMessage(type, Array(data[2...]))
}
