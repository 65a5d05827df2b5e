import Testing
@testable import BLEWire
@testable import BLEGATT
@testable import BLEGATTServer

@Suite("Random address kinds as an enum")
struct RandomAddressKindTests {
    @Test("the kind comes from the two most significant bits and prints as traces show it")
    func kinds() {
        let cases: [(String, RandomAddressKind, String)] = [("C0:11:22:33:44:55", .static, "static"), ("40:11:22:33:44:55", .resolvable, "resolvable"),
                                                           ("00:11:22:33:44:55", .nonResolvable, "non-resolvable"), ("80:11:22:33:44:55", .reserved, "reserved")]
        for (text, kind, printed) in cases {
            let a = BDAddress(text)!
            #expect(a.randomAddressKind == kind, "\(text)")
            #expect(a.randomAddressKind.description == printed, "\(text)")
        }
    }
}

@Suite("Service Changed value (Core Vol 3 Part G 7.1)")
struct ServiceChangedValueTests {
    /// The value read from `bytes`, nil when refused.
    private func parse(_ bytes: [UInt8]) -> ServiceChangedValue? { try? ServiceChangedValue(bytes: bytes) }

    @Test("the whole database is 01 00 ff ff, and reads back")
    func wholeDatabase() {
        #expect(ServiceChangedValue.wholeDatabase.bytes == hex("01 00 ff ff"))
        #expect(parse(hex("01 00 ff ff")) == .wholeDatabase)
        #expect(ServiceChangedValue(0x000E...0x0014).bytes == hex("0e 00 14 00"))
        #expect(ServiceChangedValue.wholeDatabase.description == "0x0001-0xffff")
    }

    @Test("every truncated prefix, a trailing byte and a start after the end are refused")
    func malformed() {
        let whole = hex("0e 00 14 00")
        for n in 0..<whole.count {
            #expect(parse(Array(whole.prefix(n))) == nil, "\(n) bytes")
        }
        #expect(parse(whole + [0x00]) == nil)
        #expect(parse(hex("14 00 0e 00")) == nil)
    }

    @Test("the GATT service's Service Changed characteristic holds the whole range")
    func standardService() throws {
        let db = try testDatabase()
        #expect(db[0x0008]?.value == ServiceChangedValue.wholeDatabase.bytes)
    }
}
