import Testing
@testable import BLEWire
@testable import ESPHomeAPI

/// Feeds `bytes` to a decoder in the chunk sizes `sizes` gives, collecting
/// frames until the bytes run out or the stream is corrupt.
private func decodeAll<Frame>(_ bytes: [UInt8], chunks sizes: () -> Int,
                              append: (ArraySlice<UInt8>) -> Void, next: () -> FrameDecodeResult<Frame>) -> ([Frame], FrameCorruption?) {
    var frames: [Frame] = []
    var offset = 0
    while offset < bytes.count {
        let end = min(bytes.count, offset + max(1, sizes()))
        append(bytes[offset..<end])
        offset = end
        while true {
            switch next() {
            case .needMoreBytes: break
            case let .frame(f): frames.append(f); continue
            case let .corrupt(why): return (frames, why)
            }
            break
        }
    }
    return (frames, nil)
}

private let plaintextFrames = [
    PlaintextFrame(type: PingRequest.messageType, payload: []),
    PlaintextFrame(type: HelloRequest.messageType, payload: NoiseVector.clientPayload1),
    PlaintextFrame(type: APIMessageType(rawValue: 150), payload: [UInt8](repeating: 0x5A, count: 300)),
]

@Suite("ESPHome API: plaintext and Noise frames")
struct ESPHomeAPIFrameTests {
    @Test("plaintext encoding: 00, varint length, varint type, payload")
    func plaintextEncoding() {
        // PingRequest: no payload, type 7.
        #expect(PlaintextFrame.encode(PingRequest()) == hex("00 00 07"))
        // HelloRequest: 19 bytes (0x13), type 1.
        #expect(PlaintextFrame.encode(HelloRequest(clientInfo: "aioesphomeapi", apiVersionMajor: 1, apiVersionMinor: 10))
                == hex("00 13 01") + NoiseVector.clientPayload1)
        // 300 bytes is the varint ac 02; type 150 is 96 01.
        #expect(Array(plaintextFrames[2].encoded.prefix(5)) == hex("00 ac 02 96 01"))
    }

    @Test("the plaintext decoder gives the same frames whole, byte by byte and in random chunks")
    func plaintextChunks() {
        let stream = plaintextFrames.flatMap(\.encoded)
        var g = ESPHomeTestRandom(state: 7)
        for mode in 0..<3 {
            for _ in 0..<(mode == 2 ? 50 : 1) {
                var d = PlaintextFrameDecoder()
                let (frames, failure) = decodeAll(stream, chunks: { mode == 0 ? stream.count : mode == 1 ? 1 : Int.random(in: 1...40, using: &g) },
                                                  append: { d.append($0) }, next: { d.next() })
                #expect(frames == plaintextFrames)
                #expect(failure == nil)
                #expect(d.bufferedCount == 0)
            }
        }
    }

    @Test("plaintext corruption: the indicator, an over-long varint, the size limit, a type over 16 bits; it sticks")
    func plaintextCorruption() {
        func first(_ bytes: String) -> FrameDecodeResult<PlaintextFrame> {
            var d = PlaintextFrameDecoder()
            d.append(hex(bytes))
            return d.next()
        }
        // A Noise client's hello.
        #expect(first("01 00 00") == .corrupt(.wrongIndicator(0x01, expected: 0x00)))
        #expect(first("00 ff ff ff ff ff ff ff ff ff 7f") == .corrupt(.overlongVarint(field: "length")))
        #expect(first("00 00 ff ff ff ff ff ff ff ff ff 02") == .corrupt(.overlongVarint(field: "type")))
        #expect(first("00 00 ff ff ff ff ff ff ff ff ff 01") == .corrupt(.typeOutOfRange(UInt64.max)))
        // 32769 = 81 80 02.
        #expect(first("00 81 80 02") == .corrupt(.tooLarge(length: 32769, limit: 32768)))
        #expect(first("00 80 80 02") == .needMoreBytes)  // exactly 32768: waits for the payload
        // 65536 = 80 80 04.
        #expect(first("00 00 80 80 04") == .corrupt(.typeOutOfRange(65536)))
        var d = PlaintextFrameDecoder()
        d.append(hex("02"))
        #expect(d.next() == .corrupt(.wrongIndicator(0x02, expected: 0x00)))
        d.append(PlaintextFrame.encode(PingRequest()))
        #expect(d.next() == .corrupt(.wrongIndicator(0x02, expected: 0x00)))
        #expect(PlaintextFrame.badIndicatorReply == hex("00") + Array("Bad indicator byte".utf8))
    }

    @Test("Noise frames: 01, u16 big-endian length, body; decoded whole, byte by byte, in random chunks")
    func noiseFrames() throws {
        #expect(try NoiseFrame.encode([]) == hex("01 00 00"))
        #expect(try NoiseFrame.encode([UInt8](repeating: 7, count: 300)).prefix(3) == [0x01, 0x01, 0x2C])
        #expect(throws: FrameEncodingError.bodyTooLarge(count: 65536, limit: 65535)) { try NoiseFrame.encode([UInt8](repeating: 0, count: 65536)) }
        let bodies: [[UInt8]] = [[], [0x00] + [UInt8](repeating: 1, count: 48), [UInt8](repeating: 9, count: 1000)]
        let stream = try bodies.flatMap { try NoiseFrame.encode($0) }
        var g = ESPHomeTestRandom(state: 8)
        for mode in 0..<3 {
            for _ in 0..<(mode == 2 ? 50 : 1) {
                var d = NoiseFrameDecoder()
                let (frames, failure) = decodeAll(stream, chunks: { mode == 0 ? stream.count : mode == 1 ? 1 : Int.random(in: 1...64, using: &g) },
                                                  append: { d.append($0) }, next: { d.next() })
                #expect(frames == bodies)
                #expect(failure == nil)
            }
        }
    }

    @Test("Noise corruption: a plaintext indicator at once, a frame over the limit")
    func noiseCorruption() {
        var d = NoiseFrameDecoder(limit: NoiseFrameDecoder.handshakeLimit)
        d.append(hex("01 00"))
        #expect(d.next() == .needMoreBytes)
        d.append(hex("81"))
        #expect(d.next() == .corrupt(.tooLarge(length: 129, limit: 128)))
        var p = NoiseFrameDecoder()
        p.append(hex("00"))
        #expect(p.next() == .corrupt(.wrongIndicator(0x00, expected: 0x01)))
        var big = NoiseFrameDecoder()
        big.append(hex("01 80 01"))
        #expect(big.next() == .corrupt(.tooLarge(length: 32769, limit: 32768)))
    }

    @Test("random bytes never trap either decoder")
    func randomBytes() {
        var g = ESPHomeTestRandom(state: 9)
        for _ in 0..<5_000 {
            let bytes = g.bytes(Int.random(in: 0...32, using: &g))
            var p = PlaintextFrameDecoder(limit: 16)
            var n = NoiseFrameDecoder(limit: 16)
            _ = decodeAll(bytes, chunks: { Int.random(in: 1...8, using: &g) }, append: { p.append($0) }, next: { p.next() })
            _ = decodeAll(bytes, chunks: { Int.random(in: 1...8, using: &g) }, append: { n.append($0) }, next: { n.next() })
        }
    }
}
