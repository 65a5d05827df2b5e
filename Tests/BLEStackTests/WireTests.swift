import Testing
@testable import BLEWire

@Suite("BLEWire: byte reader and writer")
struct ByteReaderTests {
    @Test("every little-endian read returns the right value and advances")
    func littleEndianReads() throws {
        var r = ByteReader(hex("01 fe 02 03 04 05 06 07 08 09 0a 0b 0c 0d 0e 0f 10 11 12 13 14 15 16 17 18"))
        #expect(try r.u8() == 0x01)
        #expect(try r.i8() == -2)
        #expect(try r.u16() == 0x0302)
        #expect(try r.u24() == 0x06_0504)
        #expect(try r.u32() == 0x0A09_0807)
        #expect(try r.u64() == 0x1211_100F_0E0D_0C0B)
        #expect(r.offset == 19)
        #expect(r.remaining == 6)
        #expect(try r.bytes(2) == hex("13 14"))
        try r.skip(1)
        #expect(r.rest() == hex("16 17 18"))
        #expect(r.isAtEnd)
        #expect(r.rest() == [])
    }

    @Test("big-endian reads (btsnoop) read most significant byte first")
    func bigEndianReads() throws {
        var r = ByteReader(hex("00 00 03 ea 00 dc dd b3 0f 2f 80 00"))
        #expect(try r.u32be() == 1002)
        #expect(try r.u64be() == 0x00DC_DDB3_0F2F_8000)
        #expect(r.isAtEnd)
    }

    @Test("a read past the end throws truncated naming the field, need and what was left, and consumes nothing",
          arguments: [
            ("u8", 1), ("i8", 1), ("u16", 2), ("u24", 3), ("u32", 4), ("u64", 8), ("u32be", 4), ("u64be", 8), ("bytes", 5), ("skip", 5),
          ])
    func truncatedReads(kind: String, width: Int) {
        let input = Array(hex("aa bb cc dd ee ff 11 22").prefix(width - 1))
        var r = ByteReader(input)
        let e = expectWireError(kind) { () throws -> Int in
            switch kind {
            case "u8": return Int(try r.u8("F"))
            case "i8": return Int(try r.i8("F"))
            case "u16": return Int(try r.u16("F"))
            case "u24": return Int(try r.u24("F"))
            case "u32": return Int(try r.u32("F"))
            case "u64": return Int(truncatingIfNeeded: try r.u64("F"))
            case "u32be": return Int(try r.u32be("F"))
            case "u64be": return Int(truncatingIfNeeded: try r.u64be("F"))
            case "bytes": return try r.bytes(5, "F").count
            default: try r.skip(5, "F"); return 0
            }
        }
        #expect(e == .truncated(field: "F", needed: width, available: width - 1))
        #expect(r.offset == 0)
    }

    @Test("a negative byte count is refused, not trapped on")
    func negativeCount() {
        var r = ByteReader(hex("01 02"))
        let e = expectWireError { try r.bytes(-1, "Data") }
        #expect(e == .truncated(field: "Data", needed: -1, available: 2))
    }

    @Test("reading from the middle: truncation reports what remains, not the whole size")
    func truncationAfterProgress() throws {
        var r = ByteReader(hex("01 02 03"))
        _ = try r.u16()
        #expect(expectWireError { try r.u16("Handle") } == .truncated(field: "Handle", needed: 2, available: 1))
        #expect(try r.u8() == 0x03)
    }

    @Test("expectEnd throws trailingBytes with the count left over")
    func expectEnd() throws {
        var r = ByteReader(hex("01 02 03"))
        _ = try r.u8()
        #expect(expectWireError { try r.expectEnd("thing") } == .trailingBytes(context: "thing", count: 2))
        _ = try r.u16()
        try r.expectEnd("thing")
    }

    @Test("reader over an ArraySlice starts at the slice, not at the parent's index")
    func sliceReader() throws {
        let whole = hex("00 11 22 33")
        var r = ByteReader(whole[2...])
        #expect(try r.u16() == 0x3322)
        #expect(r.isAtEnd)
    }

    @Test("writer encodes every width little-endian, and big-endian where asked")
    func writer() {
        var w = ByteWriter()
        w.u8(0x01); w.i8(-1); w.u16(0x0302); w.u24(0x06_0504); w.u32(0x0A09_0807); w.u64(0x1211_100F_0E0D_0C0B)
        w.u32be(0x0000_03EA); w.u64be(0x00DC_DDB3_0F2F_8000); w.append([0xAB, 0xCD])
        #expect(w.bytes == hex("01 ff 02 03 04 05 06 07 08 09 0a 0b 0c 0d 0e 0f 10 11 12  00 00 03 ea  00 dc dd b3 0f 2f 80 00  ab cd"))
    }

    @Test("writer output reads back through the reader")
    func writerReaderRoundTrip() throws {
        var w = ByteWriter()
        w.u16(0xBEEF); w.u24(0xABCDEF); w.u32(0xDEAD_BEEF); w.u64(.max); w.i8(-128)
        var r = ByteReader(w.bytes)
        #expect(try r.u16() == 0xBEEF)
        #expect(try r.u24() == 0xABCDEF)
        #expect(try r.u32() == 0xDEAD_BEEF)
        #expect(try r.u64() == .max)
        #expect(try r.i8() == -128)
        try r.expectEnd("round trip")
    }

    @Test("WireError descriptions say what happened")
    func wireErrorDescriptions() {
        #expect(WireError.truncated(field: "Handle", needed: 2, available: 1).description == "truncated: Handle needs 2 byte(s), 1 left")
        #expect(WireError.trailingBytes(context: "ACL packet", count: 3).description == "3 unexpected trailing byte(s) after ACL packet")
        #expect(WireError.invalid(field: "Format", reason: "bad").description == "invalid Format: bad")
    }
}

@Suite("BLEWire: hex")
struct HexTests {
    @Test("parse accepts spaces, colons, dashes, underscores, a 0x prefix and either case",
          arguments: ["0a1b2c", "0a 1b 2c", "0a:1b:2c", "0a-1b-2c", "0a_1b_2c", "0x0a1b2c", "0X0A1B2C", "0A 1b 2C"])
    func parseForms(text: String) {
        #expect(Hex.parse(text) == [0x0A, 0x1B, 0x2C])
    }

    @Test("parse refuses odd digit counts and non-hex characters", arguments: ["0a1", "zz", "0a 1b 2", "0g", "12 34 5x", "0x1"])
    func parseRejects(text: String) {
        #expect(Hex.parse(text) == nil)
    }

    @Test("parse of empty text is empty bytes")
    func parseEmpty() {
        #expect(Hex.parse("") == [])
        #expect(Hex.parse("0x") == [])
    }

    @Test("string formats lower case with a separator")
    func string() {
        #expect(Hex.string([0x01, 0xAB, 0xFF]) == "01 ab ff")
        #expect(Hex.string([0x01, 0xAB, 0xFF], separator: "") == "01abff")
        #expect(Hex.string([0x01, 0xAB], separator: ":") == "01:ab")
        #expect(Hex.string([UInt8]()) == "")
        #expect(Hex.string(hex("00 11 22 33")[1...2]) == "11 22")
    }

    @Test("int pads to the width")
    func int() {
        #expect(Hex.int(0x0C03 as UInt16, width: 4) == "0c03")
        #expect(Hex.int(0x5 as UInt8, width: 2) == "05")
        #expect(Hex.int(0x12345 as UInt32, width: 4) == "12345")
    }

    @Test("string and parse are inverse for every byte value")
    func roundTrip() {
        let all = (0...255).map { UInt8($0) }
        #expect(Hex.parse(Hex.string(all)) == all)
    }
}

@Suite("BLEWire: device addresses")
struct AddressTests {
    @Test("parse C0:11:22:33:44:55 stores wire order (least significant byte first)")
    func parseWireOrder() throws {
        let a = try #require(BDAddress("C0:11:22:33:44:55"))
        #expect(a.bytes == hex("55 44 33 22 11 c0"))
        #expect(a.description == "C0:11:22:33:44:55")
    }

    @Test("parse accepts lower case and dashes")
    func parseForms() {
        #expect(BDAddress("c0-11-22-33-44-55") == BDAddress("C0:11:22:33:44:55"))
    }

    @Test("parse refuses malformed addresses",
          arguments: ["C0:11:22:33:44", "C0:11:22:33:44:55:66", "C0:11:22:33:44:5G", "C0:11:22:33:44:555", "C0:11:22:33:44:5", "", "C01122334455"])
    func parseRejects(text: String) {
        #expect(BDAddress(text) == nil)
    }

    @Test("wire bytes print most significant first")
    func printFromWire() {
        #expect(BDAddress(wire: hex("55 44 33 22 11 c0")).description == "C0:11:22:33:44:55")
    }

    @Test("init(wire:) pads short input and ignores extra bytes")
    func wireLengths() {
        #expect(BDAddress(wire: hex("01 02")).bytes == hex("01 02 00 00 00 00"))
        #expect(BDAddress(wire: hex("01 02 03 04 05 06 07")).bytes == hex("01 02 03 04 05 06"))
    }

    @Test("read and write use wire order; a short read throws")
    func readWrite() throws {
        var r = ByteReader(hex("55 44 33 22 11 c0 ff"))
        let a = try BDAddress.read(&r, "Peer_Address")
        #expect(a.description == "C0:11:22:33:44:55")
        #expect(r.remaining == 1)
        var w = ByteWriter()
        a.write(&w)
        #expect(w.bytes == hex("55 44 33 22 11 c0"))
        var short = ByteReader(hex("55 44 33"))
        #expect(expectWireError { try BDAddress.read(&short, "Peer_Address") } == .truncated(field: "Peer_Address", needed: 6, available: 3))
    }

    @Test("zero address")
    func zero() {
        #expect(BDAddress.zero.isZero)
        #expect(BDAddress.zero.description == "00:00:00:00:00:00")
        #expect(!(BDAddress("00:00:00:00:00:01")!.isZero))
    }

    @Test("random address kind comes from the two most significant bits",
          arguments: [("C0:11:22:33:44:55", "static"), ("40:11:22:33:44:55", "resolvable"),
                      ("00:11:22:33:44:55", "non-resolvable"), ("80:11:22:33:44:55", "reserved")])
    func randomKind(text: String, kind: String) {
        #expect(BDAddress(text)?.randomAddressKind.description == kind)
    }

    @Test("address types print and fold identity types")
    func addressTypes() {
        #expect(AddressType.public.description == "public")
        #expect(AddressType.random.description == "random")
        #expect(AddressType.publicIdentity.description == "public-id")
        #expect(AddressType.randomIdentity.description == "random-id")
        #expect(AddressType.anonymous.description == "anonymous")
        #expect(AddressType(rawValue: 0x07).description == "type 0x07")
        #expect(AddressType.random.isRandom && AddressType.randomIdentity.isRandom)
        #expect(!AddressType.public.isRandom && !AddressType.publicIdentity.isRandom)
        #expect(DeviceAddress(BDAddress("C0:11:22:33:44:55")!, .random).description == "C0:11:22:33:44:55 (random)")
    }
}

@Suite("BLEWire: Bluetooth UUIDs")
struct UUIDTests {
    static let base128 = "0000180d-0000-1000-8000-00805f9b34fb"

    @Test("16-bit: text forms, wire, attWire")
    func sixteen() throws {
        let u = try #require(BluetoothUUID("2a00"))
        #expect(u == BluetoothUUID(uint16: 0x2A00))
        #expect(BluetoothUUID("0x2A00") == u)
        #expect(u.width == 2)
        #expect(u.uint16 == 0x2A00)
        #expect(u.wire == hex("00 2a"))
        #expect(u.attWire == hex("00 2a"))
        #expect(u.description == "2a00")
        #expect(u.long == "00002a00-0000-1000-8000-00805f9b34fb")
        #expect(u.isBased)
    }

    @Test("32-bit: text form, wire, description; attWire uses 128 bits unless it is a 16-bit alias")
    func thirtyTwo() throws {
        let u = try #require(BluetoothUUID("12345678"))
        #expect(u == BluetoothUUID(uint32: 0x1234_5678))
        #expect(u.width == 4)
        #expect(u.wire == hex("78 56 34 12"))
        #expect(u.uint16 == nil)
        #expect(u.description == "12345678")
        #expect(u.attWire == hex("fb 34 9b 5f 80 00 00 80 00 10 00 00 78 56 34 12"))
        #expect(u.long == "12345678-0000-1000-8000-00805f9b34fb")
        // A 32-bit form of a 16-bit value is the same UUID and goes on ATT as 2 bytes.
        let alias = BluetoothUUID(uint32: 0x0000_180D)
        #expect(alias == BluetoothUUID(uint16: 0x180D))
        #expect(alias.attWire == hex("0d 18"))
        #expect(alias.wire == hex("0d 18 00 00"))
    }

    @Test("128-bit: the 36-character form and 32 bare digits; wire order is reversed")
    func oneTwentyEight() throws {
        let text = "36353433-3231-3039-3837-363534333231"
        let u = try #require(BluetoothUUID(text))
        #expect(u.width == 16)
        #expect(u.wire == hex("31 32 33 34 35 36 37 38 39 30 31 32 33 34 35 36"))
        #expect(u.attWire == u.wire)
        #expect(u.long == text)
        #expect(u.description == text)
        #expect(!u.isBased)
        #expect(u.uint16 == nil)
        #expect(BluetoothUUID("36353433323130393837363534333231") == u)
        #expect(BluetoothUUID("19B10010-E8F2-537E-4F6C-D104768A1214")?.long == "19b10010-e8f2-537e-4f6c-d104768a1214")
    }

    @Test("from wire: 2, 4 and 16 bytes; other lengths are refused")
    func fromWire() {
        #expect(BluetoothUUID(wire: hex("02 29")) == BluetoothUUID(uint16: 0x2902))
        #expect(BluetoothUUID(wire: hex("78 56 34 12")) == BluetoothUUID(uint32: 0x1234_5678))
        #expect(BluetoothUUID(wire: hex("31 32 33 34 35 36 37 38 39 30 31 32 33 34 35 36")) == BluetoothUUID("36353433-3231-3039-3837-363534333231"))
        for n in [0, 1, 3, 5, 15, 17] {
            #expect(BluetoothUUID(wire: [UInt8](repeating: 0x11, count: n)) == nil, "width \(n)")
        }
    }

    @Test("a 16-bit alias equals its 128-bit form, hashes the same, and prints short")
    func aliasEquality() throws {
        let long = try #require(BluetoothUUID(Self.base128))
        let short = BluetoothUUID(uint16: 0x180D)
        #expect(long == short)
        #expect(Set([long, short]).count == 1)
        #expect(long.width == 16 && short.width == 2)
        #expect(long.uint16 == 0x180D)
        #expect(long.description == "180d")
        #expect(long.attWire == hex("0d 18"))
        #expect(long.wire.count == 16)
        #expect(BluetoothUUID(uint16: 0x180D) != BluetoothUUID(uint16: 0x180E))
    }

    @Test("malformed UUID text is refused",
          arguments: ["2a0", "2a000", "xyz1", "12-34", "1234-5678", "0x", "",
                      "3635343-33231-3039-3837-363534333231", "36353433-3231-3039-3837-36353433323", "36353433-3231-3039-3837-36353433323g",
                      "36353433-3231-3039-38373635-34333231"])
    func rejects(text: String) {
        #expect(BluetoothUUID(text) == nil)
    }
}

@Suite("BLEWire: time formatting")
struct TimeTests {
    @Test("formatMs rounds microseconds to the given decimals",
          arguments: [(UInt64(1234), 1, "1.2"), (1250, 3, "1.250"), (7_500, 3, "7.500"), (0, 1, "0.0"), (50, 1, "0.1"),
                      (49, 1, "0.0"), (999_999, 0, "1000"), (1_500, 0, "2"), (30_000_000, 0, "30000"), (12_345, 2, "12.35"),
                      (100_001, 1, "100.0")])
    func formatMsCases(us: UInt64, decimals: Int, expected: String) {
        #expect(formatMs(us: us, decimals: decimals) == expected)
    }

    @Test("Instant arithmetic: adding, msUntil rounds up, past deadlines are 0")
    func instants() {
        let t = Instant(ns: 1_000_000_000)
        #expect(t.adding(ms: 5).ns == 1_005_000_000)
        #expect(t.adding(ms: -5) == t)
        #expect(t.msUntil(Instant(ns: 1_000_000_001)) == 1)
        #expect(t.msUntil(t.adding(ms: 50)) == 50)
        #expect(t.adding(ms: 50).msUntil(t) == 0)
        #expect(t.adding(ms: 2).usSince(t) == 2000)
        #expect(t.usSince(t.adding(ms: 2)) == 0)
        #expect(Instant.now() < Instant.distantFuture)
    }
}
