import Testing
@testable import BLEWire
@testable import ESPHomeAPI

/// A small deterministic generator (SplitMix64) so the random-input tests repeat.
struct ESPHomeTestRandom: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
    mutating func bytes(_ count: Int) -> [UInt8] { (0..<count).map { _ in UInt8.random(in: 0...255, using: &self) } }
}

/// A message with one field of each kind the walker knows, for the wire
/// format's corner cases (not an API message).
private struct Everything: ProtoMessage {
    var u32: UInt32 = 0
    var u64: UInt64 = 0
    var i32: Int32 = 0
    var s32: Int32 = 0
    var s64: Int64 = 0
    var flag = false
    var f32: UInt32 = 0
    var f64: UInt64 = 0
    var real: Float = 0
    var text = ""
    var blob: [UInt8] = []
    var inner: BluetoothGATTDescriptor?
    var list: [UInt64] = []
    var fixedList: [UInt32] = []

    mutating func fields(_ f: inout some ProtoFieldWalker) throws {
        try f.scalar(1, "u32", &u32, .uint32)
        try f.scalar(2, "u64", &u64, .uint64)
        try f.scalar(3, "i32", &i32, .int32)
        try f.scalar(4, "s32", &s32, .sint32)
        try f.scalar(5, "s64", &s64, .sint64)
        try f.scalar(6, "flag", &flag, .bool)
        try f.scalar(7, "f32", &f32, .fixed32)
        try f.scalar(8, "f64", &f64, .fixed64)
        try f.scalar(9, "real", &real, .float)
        try f.string(10, "text", &text)
        try f.bytes(11, "blob", &blob)
        try f.message(12, "inner", &inner)
        try f.repeated(13, "list", &list, .uint64)
        try f.repeated(14, "fixed_list", &fixedList, .fixed32)
    }
}

@Suite("ESPHome API: protobuf wire format")
struct ESPHomeAPIProtobufTests {
    @Test("varints: the encoding guide's examples, 7 bits a byte, least significant first")
    func varints() throws {
        // 150 = 0b1_0010110: 0x96 (0x16 | continuation), then 0x01.
        let cases: [(UInt64, String)] = [(0, "00"), (1, "01"), (127, "7f"), (128, "80 01"), (150, "96 01"), (300, "ac 02"),
                                         (UInt64(UInt32.max), "ff ff ff ff 0f"),
                                         (UInt64.max, "ff ff ff ff ff ff ff ff ff 01")]
        for (value, bytes) in cases {
            #expect(ProtoWire.varint(value) == hex(bytes))
            var r = ProtoReader(hex(bytes))
            #expect(try r.varint() == value)
            #expect(r.isAtEnd)
        }
        // A non-minimal varint (0 in two bytes) is still 0.
        var r = ProtoReader(hex("80 00"))
        #expect(try r.varint() == 0)
    }

    @Test("a varint past 10 bytes, or whose tenth byte carries more than bit 63, is refused")
    func varintLimits() {
        var long = ProtoReader(hex("ff ff ff ff ff ff ff ff ff 81 01"))
        #expect(expectWireError { try long.varint("v") } == .invalid(field: "v", reason: "varint longer than 10 bytes"))
        var overflow = ProtoReader(hex("ff ff ff ff ff ff ff ff ff 02"))
        #expect(expectWireError { try overflow.varint("v") } == .invalid(field: "v", reason: "varint overflows 64 bits"))
        var cut = ProtoReader(hex("ff ff"))
        #expect(expectWireError { try cut.varint("v") } == .truncated(field: "v", needed: 1, available: 0))
    }

    @Test("ZigZag: 0, -1, 1, -2, the extremes")
    func zigzag() {
        let cases32: [(Int32, UInt32)] = [(0, 0), (-1, 1), (1, 2), (-2, 3), (-60, 119), (Int32.max, 0xFFFF_FFFE), (Int32.min, 0xFFFF_FFFF)]
        for (v, z) in cases32 {
            #expect(ProtoWire.zigzag(v) == z)
            #expect(ProtoWire.unzigzag(z) == v)
        }
        let cases64: [(Int64, UInt64)] = [(0, 0), (-1, 1), (1, 2), (Int64.max, UInt64.max - 1), (Int64.min, UInt64.max)]
        for (v, z) in cases64 {
            #expect(ProtoWire.zigzag(v) == z)
            #expect(ProtoWire.unzigzag(z) == v)
        }
    }

    @Test("every kind of field encodes as the encoding guide says, and decodes back")
    func everyKind() throws {
        var m = Everything()
        m.u32 = 300; m.u64 = 1 << 40; m.i32 = -1; m.s32 = -2; m.s64 = -3; m.flag = true
        m.f32 = 0x0102_0304; m.f64 = 0x0102_0304_0506_0708; m.real = 1.5; m.text = "hé"; m.blob = [0, 0xFF]
        m.inner = BluetoothGATTDescriptor(uuid: BluetoothGATTUUID(shortUUID: 0x2902), handle: 4)
        m.list = [0, 1]; m.fixedList = [7]
        let expected = hex("""
            08 ac 02 \
            10 80 80 80 80 80 20 \
            18 ff ff ff ff ff ff ff ff ff 01 \
            20 03 \
            28 05 \
            30 01 \
            3d 04 03 02 01 \
            41 08 07 06 05 04 03 02 01 \
            4d 00 00 c0 3f \
            52 03 68 c3 a9 \
            5a 02 00 ff \
            62 05 10 04 18 82 52 \
            68 00 68 01 \
            75 07 00 00 00
            """)
        // 1: 300 = ac 02. 2: 2^40 in 7-bit groups (five 0x80, then 0x20). 3: int32 -1 sign-extended
        // to 10 bytes. 4: sint32 -2 = 3. 5: sint64 -3 = 5. 7, 8: little-endian. 9: 1.5f = 0x3fc00000.
        // 10: "hé" in UTF-8. 12: handle 4, short_uuid 0x2902 = 82 52. 13: unpacked, the zero too.
        // 14: fixed32 unpacked, tag (14 << 3) | 5 = 0x75.
        #expect(m.protobuf == expected)
        #expect(try Everything(protobuf: expected) == m)
    }

    @Test("repeated scalars decode packed and unpacked, mixed, in order")
    func packedRepeated() throws {
        // 6a 03 02 03 04: field 13 as LEN, three varints; 68 05: field 13 once more, unpacked.
        // 72 08 ...: field 14 packed, two fixed32.
        let m = try Everything(protobuf: hex("6a 03 02 03 04 68 05 72 08 01 00 00 00 02 00 00 00"))
        #expect(m.list == [2, 3, 4, 5])
        #expect(m.fixedList == [1, 2])
        // A packed run cut inside a value is a truncation.
        #expect(expectWireError { try Everything(protobuf: hex("72 03 01 00 00")) } == .truncated(field: "fixed_list", needed: 4, available: 3))
    }

    @Test("unknown fields of every wire type are skipped; groups and wire types 6, 7 are refused")
    func unknownFields() throws {
        // Field 99 as varint, I64, LEN, I32, around a known u32 (field 1).
        let bytes = hex("98 06 96 01  99 06 01 02 03 04 05 06 07 08  9a 06 02 aa bb  08 07  9d 06 01 02 03 04")
        let m = try Everything(protobuf: bytes)
        #expect(m.u32 == 7)
        #expect(m.protobuf == hex("08 07"))
        #expect(expectWireError { try Everything(protobuf: hex("9b 06")) } == .invalid(field: "field 99", reason: "SGROUP is not skippable"))
        #expect(expectWireError { try Everything(protobuf: hex("9e 06")) } == .invalid(field: "field 99", reason: "wire type 6 is not skippable"))
        var r = ProtoReader(hex("96 01  01 02 03 04 05 06 07 08  02 aa bb  01 02 03 04"))
        try r.skip(.varint)
        #expect(r.offset == 2)
        try r.skip(.i64)
        #expect(r.offset == 10)
        try r.skip(.len)
        #expect(r.offset == 13)
        try r.skip(.i32)
        #expect(r.isAtEnd)
    }

    @Test("field number 0 and a declared field of the wrong wire type are errors")
    func badTags() {
        #expect(expectWireError { try Everything(protobuf: hex("00 01")) } == .invalid(field: "field tag", reason: "field number 0 out of range"))
        // Field 1 (uint32) sent as LEN.
        #expect(expectWireError { try Everything(protobuf: hex("0a 01 00")) } == .invalid(field: "u32", reason: "sent as LEN, declared VARINT"))
        // Field 10 (string) sent as a varint.
        #expect(expectWireError { try Everything(protobuf: hex("50 01")) } == .invalid(field: "text", reason: "sent as VARINT, declared LEN"))
    }

    @Test("the last occurrence of a scalar wins; embedded messages merge")
    func lastWinsAndMerge() throws {
        // u32 = 1 then 2; inner {handle 4} then inner {short_uuid 0x2902}.
        let m = try Everything(protobuf: hex("08 01 08 02 62 02 10 04 62 03 18 82 52"))
        #expect(m.u32 == 2)
        #expect(m.inner == BluetoothGATTDescriptor(uuid: BluetoothGATTUUID(shortUUID: 0x2902), handle: 4))
    }

    @Test("a length past the end, and a nested message cut short, are truncations")
    func lengthTruncation() {
        #expect(expectWireError { try Everything(protobuf: hex("52 05 61 62")) } == .truncated(field: "field 10", needed: 5, available: 2))
        // The inner message's own field is cut: its length covers only a tag.
        #expect(expectWireError { try Everything(protobuf: hex("62 01 10")) } == .truncated(field: "field 2", needed: 1, available: 0))
        // A length of 2^64 - 1 does not trap.
        #expect(expectWireError { try Everything(protobuf: hex("52 ff ff ff ff ff ff ff ff ff 01")) }
                == .truncated(field: "field 10", needed: Int.max, available: 0))
    }

    @Test("invalid UTF-8 in a string is repaired, not refused")
    func invalidUTF8() throws {
        let m = try Everything(protobuf: hex("52 02 ff 61"))
        #expect(m.text == "\u{FFFD}a")
    }

    @Test("random bytes never trap, and what decodes re-encodes to what decodes")
    func randomBytes() {
        var g = ESPHomeTestRandom(state: 0xE5_0403)
        for _ in 0..<20_000 {
            let bytes = g.bytes(Int.random(in: 0...40, using: &g))
            guard let m = try? Everything(protobuf: bytes) else { continue }
            #expect((try? Everything(protobuf: m.protobuf)).map { $0.protobuf == m.protobuf } == true, "\(Hex.string(bytes))")
        }
    }
}
