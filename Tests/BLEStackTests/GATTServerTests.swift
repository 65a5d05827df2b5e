import Testing
@testable import BLEWire
@testable import BLEHCI
@testable import BLEATT
@testable import BLEGATT
@testable import BLEGATTServer
import BLESMP

// The server-role cases of the Bluetooth SIG GATT test suite (GATT.TS) as
// byte scripts: a request in, the exact answer out, on the scripted bearer
// (handle 0x0001, ATT_MTU 23 unless a test says otherwise). Names begin
// with the case they mirror, as BlueZ's unit/test-gatt.c names its server
// cases; the rest are the specification's rules each request section gives
// (Core Vol 3 Part F 3.4).

private func u16(_ v: UInt16) -> BluetoothUUID { BluetoothUUID(uint16: v) }
private let long60 = (0..<60).map { UInt8($0) }

/// The database the tests serve:
///   0x0001 GAP service 1800: 0x0002/0x0003 Device Name "attled", 0x0004/0x0005 Appearance 0000
///   0x0006 GATT service 1801: 0x0007/0x0008 Service Changed (indicate) + 0x0009 CCCD,
///          0x000A/0x000B Client Supported Features, 0x000C/0x000D Database Hash
///   0x000E pycom LED service (128-bit): red 0x000F/0x0010, green 0x0011/0x0012, blue 0x0013/0x0014 (read, write)
///   0x0015 test service fff0: 0x0016/0x0017 fff1 read-only, 60 bytes; 0x0018/0x0019 fff2 write-only;
///          0x001A/0x001B fff3 read+notify+indicate + 0x001C CCCD; 0x001D/0x001E fff4 encrypted + 0x001F User Description "secret"
func testDatabase() throws -> GATTServerDatabase {
    try GATTServerDatabase(services: [
        StandardServices.gap(name: "attled"),
        StandardServices.gatt(),
        ServiceDefinition(uuid: service, characteristics: [red, green, blue].map {
            CharacteristicDefinition(uuid: $0, properties: [.read, .write], value: [0x11], maxLength: 1)
        }),
        ServiceDefinition(uuid: u16(0xFFF0), characteristics: [
            CharacteristicDefinition(uuid: u16(0xFFF1), properties: .read, value: long60),
            CharacteristicDefinition(uuid: u16(0xFFF2), properties: .write, value: [0x00], maxLength: 4),
            CharacteristicDefinition(uuid: u16(0xFFF3), properties: [.read, .notify, .indicate], value: [0x01]),
            CharacteristicDefinition(uuid: u16(0xFFF4), properties: [.read, .write], value: [0x42],
                                     permissions: [.read, .write, .readEncrypted, .writeEncrypted],
                                     descriptors: [DescriptorDefinition(uuid: GATTUUID.userDescription, value: Array("secret".utf8))]),
        ]),
    ])
}

/// The link's security as the server asks for it.
final class ServedLinkState { var encrypted = false, bonded = false }

/// A GATT server on the scripted bearer: `ask` feeds a request and returns the answer.
final class ServerFixture {
    /// ACL packets of 251 bytes: every answer is one fragment.
    let f = BearerFixture(aclLength: 251)
    let server: GATTServer
    let session: GATTServerSession
    let security = ServedLinkState()
    var events: [String] = []

    init(mtu: Int? = nil) throws {
        server = try GATTServer(database: try testDatabase())
        let sec = security
        session = server.attach(f.bearer, peer: DeviceAddress(BDAddress("C0:11:22:33:44:55")!, .random),
                                isEncrypted: { sec.encrypted }, hasKeys: { sec.bonded })
        server.subscribe { [unowned self] e in
            switch e {
            case let .write(_, w): self.events.append("write \(Hex.int(w.handle, width: 4)) \(Hex.string(w.value, separator: "")) \(w.op.rawValue)")
            case let .subscribed(_, c, n, i): self.events.append("cccd \(Hex.int(c.valueHandle, width: 4)) notify \(n) indicate \(i)")
            case let .confirmed(_, h): self.events.append("confirmed \(Hex.int(h, width: 4))")
            case let .securityNeeded(_, h): self.events.append("security \(Hex.int(h, width: 4))")
            }
        }
        if let mtu { _ = try ask("02 \(Hex.string([UInt8(mtu & 0xFF), UInt8(mtu >> 8)]))") }
    }

    /// Feeds one PDU from the client and returns what the server sent back (nil: nothing).
    func ask(_ request: String) throws -> String? {
        let before = f.sentATT.count
        f.bearer.receive(hex(request))
        _ = try f.host.pump(until: Instant.now().adding(ms: 50)) { self.f.sentATT.count > before }
        return f.sentATT.count > before ? f.sentATT.last : nil
    }

    /// What the server sent on its own (notifications, indications) since `mark`.
    func sent(since mark: Int) throws -> [String] {
        _ = try f.host.pump(until: Instant.now().adding(ms: 50)) { self.f.sentATT.count > mark }
        return Array(f.sentATT.dropFirst(mark))
    }
}

/// "0a 03 00"-style hex of a little-endian handle.
private func le(_ v: UInt16) -> String { Hex.string([UInt8(v & 0xFF), UInt8(v >> 8)]) }

@Suite("GATT server: the database")
struct GATTServerDatabaseTests {
    @Test("the layout: declarations, values and CCCDs at consecutive handles; groups end at their last attribute")
    func layout() throws {
        let db = try testDatabase()
        #expect(db.attributes.map(\.handle) == Array(1...0x1F))
        #expect(db.groups.map { [$0.start, $0.end] } == [[1, 5], [6, 0x0D], [0x0E, 0x14], [0x15, 0x1F]])
        #expect(db[0x0002]?.value == hex("02 03 00 00 2a"))
        #expect(db[0x0009]?.type == GATTUUID.clientCharacteristicConfiguration && db[0x0009]?.perClient == true)
        #expect(db[0x001C]?.type == GATTUUID.clientCharacteristicConfiguration)
        #expect(db[0x000F]?.value == [0x0A, 0x10, 0x00] + red.attWire)
        #expect(db.characteristic(value: 0x001B)?.cccdHandle == 0x001C)
    }

    @Test("given handles are kept (a clone), gaps allowed; handles that go back, or a group end before its last attribute, are refused")
    func explicitHandles() throws {
        let db = try GATTServerDatabase(services: [
            ServiceDefinition(uuid: u16(0x180F), characteristics: [
                CharacteristicDefinition(uuid: u16(0x2A19), properties: [.read, .notify], value: [99],
                                         descriptors: [DescriptorDefinition(uuid: GATTUUID.clientCharacteristicConfiguration, handle: 0x25)],
                                         declarationHandle: 0x20, valueHandle: 0x22),
            ], handle: 0x10, end: 0x2F),
        ])
        #expect(db.attributes.map(\.handle) == [0x10, 0x20, 0x22, 0x25])
        #expect(db.groups.first?.end == 0x2F)
        #expect(db[0x20]?.value == hex("12 22 00 19 2a"))
        #expect(throws: GATTDatabaseError.self) {
            try GATTServerDatabase(services: [ServiceDefinition(uuid: u16(0x180F), characteristics: [
                CharacteristicDefinition(uuid: u16(0x2A19), properties: .read, declarationHandle: 5, valueHandle: 4)])])
        }
        #expect(throws: GATTDatabaseError.self) {
            try GATTServerDatabase(services: [ServiceDefinition(uuid: u16(0x180F), characteristics: [
                CharacteristicDefinition(uuid: u16(0x2A19), properties: .read)], handle: 1, end: 2)])
        }
    }

    @Test("Database Hash (Core Vol 3 Part G 7.3): the hashed octets are exactly the declarations with values and the listed descriptors by handle and type; the value is AES-CMAC(0, them), least significant octet first")
    func databaseHash() throws {
        let db = try testDatabase()
        let m = db.hashInput
        // GAP service declaration first: handle 0001, type 2800, value 1800.
        #expect(Array(m.prefix(6)) == hex("01 00 00 28 00 18"))
        // The CCCD at 0x0009 enters as handle and type only, followed by the next declaration (0x000A, 2803).
        let cccd = hex("09 00 02 29 0a 00 03 28")
        #expect((0...(m.count - cccd.count)).contains { Array(m[$0..<($0 + cccd.count)]) == cccd })
        // Values (the characteristic values, 0x2A00 "attled") are not hashed.
        #expect(!(0...(m.count - 6)).contains { Array(m[$0..<($0 + 6)]) == Array("attled".utf8) })
        let server = try GATTServer(database: db)
        let h = try #require(server.databaseHash)
        #expect(h.count == 16 && server.database[0x000D]?.value == h)
        let cmac = Array(try SMPCrypto.aesCMAC(key: [UInt8](repeating: 0, count: 16), message: m).reversed())
        #expect(h == cmac)
    }
}

@Suite("GATT.TS server: discovery (GAD)")
struct GATTServerDiscoveryTests {
    @Test("GATT/SR/GAD/BV-01-C discover all primary services: Read By Group Type 2800, 16-bit groups then the 128-bit one, ending in Attribute Not Found")
    func allPrimary() throws {
        let s = try ServerFixture()
        #expect(try s.ask("10 01 00 ff ff 00 28") == "11 06 01 00 05 00 00 18 06 00 0d 00 01 18")
        #expect(try s.ask("10 0e 00 ff ff 00 28") == "11 14 0e 00 14 00 \(w(service))")
        #expect(try s.ask("10 15 00 ff ff 00 28") == "11 06 15 00 1f 00 f0 ff")
        #expect(try s.ask("10 20 00 ff ff 00 28") == "01 10 20 00 0a")
    }

    @Test("GATT/SR/GAD/BV-02-C discover primary services by UUID: Find By Type Value, found and group end; a missing UUID is Attribute Not Found")
    func byUUID() throws {
        let s = try ServerFixture()
        #expect(try s.ask("06 01 00 ff ff 00 28 01 18") == "07 06 00 0d 00")
        #expect(try s.ask("06 01 00 ff ff 00 28 \(w(service))") == "07 0e 00 14 00")
        #expect(try s.ask("06 01 00 ff ff 00 28 0f 18") == "01 06 01 00 0a")
    }

    @Test("GATT/SR/GAD/BV-04-C discover all characteristics: Read By Type 2803, one value length per response, continued after the last declaration")
    func characteristics() throws {
        let s = try ServerFixture()
        #expect(try s.ask("08 01 00 05 00 03 28") == "09 07 02 00 02 03 00 00 2a 04 00 02 05 00 01 2a")
        // 128-bit declarations are 19 bytes: one per response at MTU 23.
        #expect(try s.ask("08 0e 00 14 00 03 28") == "09 15 0f 00 0a 10 00 \(w(red))")
        #expect(try s.ask("08 13 00 14 00 03 28") == "09 15 13 00 0a 14 00 \(w(blue))")
        #expect(try s.ask("08 14 00 14 00 03 28") == "01 08 14 00 0a")
    }

    @Test("GATT/SR/GAD/BV-06-C discover all descriptors: Find Information, format 1 (16-bit) pairs up to the MTU")
    func descriptors() throws {
        let s = try ServerFixture()
        #expect(try s.ask("04 1c 00 1c 00") == "05 01 1c 00 02 29")
        #expect(try s.ask("04 1e 00 1f 00") == "05 01 1e 00 f4 ff 1f 00 01 29")
        // A 128-bit type first: format 2, one pair.
        #expect(try s.ask("04 10 00 10 00") == "05 02 10 00 \(w(red))")
        #expect(try s.ask("04 20 00 ff ff") == "01 04 20 00 0a")
    }

    @Test("handle ranges: a start of 0 or after the end is Invalid Handle, with the start handle (Find Information, Read By Type GAR/SR/BI-08-C, Read By Group Type)")
    func invalidRanges() throws {
        let s = try ServerFixture()
        #expect(try s.ask("04 00 00 ff ff") == "01 04 00 00 01")
        #expect(try s.ask("08 02 00 01 00 00 28") == "01 08 02 00 01")
        #expect(try s.ask("10 05 00 01 00 00 28") == "01 10 05 00 01")
        #expect(try s.ask("06 09 00 08 00 00 28 00 18") == "01 06 09 00 01")
    }

    @Test("Read By Group Type of a type that is not a grouping type is Unsupported Group Type")
    func unsupportedGroupType() throws {
        let s = try ServerFixture()
        #expect(try s.ask("10 01 00 ff ff 03 28") == "01 10 01 00 10")
    }
}

@Suite("GATT.TS server: reads (GAR)")
struct GATTServerReadTests {
    @Test("GATT/SR/GAR/BV-01-C read a characteristic value; GATT/SR/GAR/BI-02-C an invalid handle is Invalid Handle")
    func read() throws {
        let s = try ServerFixture()
        #expect(try s.ask("0a 03 00") == "0b 61 74 74 6c 65 64")
        #expect(try s.ask("0a 00 00") == "01 0a 00 00 01")
        #expect(try s.ask("0a 0f f0") == "01 0a 0f f0 01")
    }

    @Test("a value without read permission is Read Not Permitted (Read, Read By Type GAR/SR/BI-06-C, Read Blob GAR/SR/BI-12-C, Read Multiple GAR/SR/BI-18-C)")
    func readNotPermitted() throws {
        let s = try ServerFixture()
        #expect(try s.ask("0a 19 00") == "01 0a 19 00 02")
        #expect(try s.ask("08 01 00 ff ff f2 ff") == "01 08 19 00 02")
        #expect(try s.ask("0c 19 00 00 00") == "01 0c 19 00 02")
        #expect(try s.ask("0e 10 00 19 00") == "01 0e 19 00 02")
        #expect(try s.ask("0a 08 00") == "01 0a 08 00 02", "Service Changed is indicate-only")
    }

    @Test("an encrypted value on a plain link: Insufficient Authentication without a bond, Insufficient Encryption with one; read once encrypted")
    func readSecurity() throws {
        let s = try ServerFixture()
        #expect(try s.ask("0a 1e 00") == "01 0a 1e 00 05")
        #expect(try s.ask("12 1e 00 01") == "01 12 1e 00 05")
        #expect(s.events == ["security 001e"], "the owner is told once")
        s.security.bonded = true
        #expect(try s.ask("0a 1e 00") == "01 0a 1e 00 0f")
        s.security.encrypted = true
        #expect(try s.ask("0a 1e 00") == "0b 42")
        // Its User Description has no security of its own.
        #expect(try s.ask("0a 1f 00") == "0b 73 65 63 72 65 74")
    }

    @Test("GATT/SR/GAR/BV-03-C read using a characteristic UUID (Read By Type), the value cut to ATT_MTU - 4; GATT/SR/GAR/BI-07-C none is Attribute Not Found")
    func readByType() throws {
        let s = try ServerFixture()
        #expect(try s.ask("08 01 00 ff ff f1 ff") == "09 15 17 00 " + Hex.string(Array(long60.prefix(19))))
        #expect(try s.ask("08 01 00 ff ff f0 0f") == "01 08 01 00 0a")
    }

    @Test("GATT/SR/GAR/BV-04-C read long (Read Blob) to the end, an offset at the end reads empty; GATT/SR/GAR/BI-13-C past it is Invalid Offset; GATT/SR/GAR/BI-14-C an invalid handle")
    func readLong() throws {
        let s = try ServerFixture()
        #expect(try s.ask("0a 17 00") == "0b " + Hex.string(Array(long60.prefix(22))))
        #expect(try s.ask("0c 17 00 16 00") == "0d " + Hex.string(Array(long60[22..<44])))
        #expect(try s.ask("0c 17 00 2c 00") == "0d " + Hex.string(Array(long60[44...])))
        #expect(try s.ask("0c 17 00 3c 00") == "0d")
        #expect(try s.ask("0c 17 00 3d 00") == "01 0c 17 00 07")
        #expect(try s.ask("0c f0 0f 00 00") == "01 0c f0 0f 01")
    }

    @Test("GATT/SR/GAR/BV-05-C Read Multiple concatenates, cut at ATT_MTU - 1; GATT/SR/GAR/BI-19-C an invalid handle answers for all, with its handle")
    func readMultiple() throws {
        let s = try ServerFixture()
        #expect(try s.ask("0e 10 00 12 00 03 00") == "0f 11 11 61 74 74 6c 65 64")
        #expect(try s.ask("0e 10 00 f0 0f") == "01 0e f0 0f 01")
        #expect(try s.ask("0e 03 00 17 00") == "0f 61 74 74 6c 65 64 " + Hex.string(Array(long60.prefix(16))))
    }

    @Test("Read Multiple Variable Length: each value with its length, the last cut at ATT_MTU - 1 with its whole length given")
    func readMultipleVariable() throws {
        let s = try ServerFixture()
        #expect(try s.ask("20 10 00 03 00") == "21 01 00 11 06 00 61 74 74 6c 65 64")
        #expect(try s.ask("20 10 00 17 00") == "21 01 00 11 3c 00 " + Hex.string(Array(long60.prefix(17))))
        #expect(try s.ask("20 10 00 1e 00") == "01 20 1e 00 05")
    }

    @Test("GATT/SR/GAR/BV-06-C read a descriptor; a larger MTU carries the whole value")
    func readDescriptorAndMTU() throws {
        let s = try ServerFixture(mtu: 100)
        #expect(s.f.sentATT.first == "03 05 02", "Exchange MTU answered with ours")
        #expect(try s.ask("0a 1f 00") == "0b 73 65 63 72 65 74")
        #expect(try s.ask("0a 17 00") == "0b " + Hex.string(long60))
    }
}

@Suite("GATT.TS server: writes (GAW)")
struct GATTServerWriteTests {
    @Test("GATT/SR/GAW/BV-03-C Write Request, read back; GATT/SR/GAW/BI-02-C an invalid handle; GATT/SR/GAW/BI-03-C no write permission; a value too long is Invalid Attribute Value Length")
    func writeRequest() throws {
        let s = try ServerFixture()
        #expect(try s.ask("12 10 00 22") == "13")
        #expect(try s.ask("0a 10 00") == "0b 22")
        #expect(try s.ask("12 00 00 01") == "01 12 00 00 01")
        #expect(try s.ask("12 17 00 01") == "01 12 17 00 03")
        #expect(try s.ask("12 10 00 01 02") == "01 12 10 00 0d")
        #expect(s.events == ["write 0010 22 request"])
    }

    @Test("Write Command: applied without an answer; a bad one is dropped silently; Signed Write Command is ignored")
    func writeCommand() throws {
        let s = try ServerFixture()
        #expect(try s.ask("52 12 00 33") == nil)
        #expect(try s.ask("52 17 00 33") == nil)
        #expect(try s.ask("d2 12 00 44 " + Hex.string([UInt8](repeating: 0, count: 12))) == nil)
        #expect(try s.ask("0a 12 00") == "0b 33")
        #expect(s.events == ["write 0012 33 command"])
    }

    @Test("an encrypted value refuses writes on a plain link (Insufficient Authentication) and takes them once encrypted")
    func writeSecurity() throws {
        let s = try ServerFixture()
        #expect(try s.ask("12 1e 00 07") == "01 12 1e 00 05")
        s.security.encrypted = true
        #expect(try s.ask("12 1e 00 07") == "13")
    }

    @Test("GATT/SR/GAW/BV-05-C long write: Prepare Write parts echoed, Execute Write applies them in order at once")
    func longWrite() throws {
        let s = try ServerFixture()
        #expect(try s.ask("16 19 00 00 00 01 02") == "17 19 00 00 00 01 02")
        #expect(try s.ask("16 19 00 02 00 03 04") == "17 19 00 02 00 03 04")
        #expect(s.events.isEmpty, "nothing written before Execute Write")
        #expect(try s.ask("18 01") == "19")
        #expect(s.events == ["write 0019 01020304 prepared"])
    }

    @Test("a request longer than ATT_MTU (23 before an exchange, the agreed one after) is answered Invalid PDU and not served: a Prepare Write echoed in full would exceed it (the gatt-server fuzz harness found one sent)")
    func requestOverMTU() throws {
        let s = try ServerFixture()
        let value = String(repeating: " 00", count: 19)
        #expect(try s.ask("16 10 00 00 00" + value) == "01 16 00 00 04", "24 octets at ATT_MTU 23")
        #expect(try s.ask("18 01") == "19")
        #expect(s.events.isEmpty, "nothing was queued")
        #expect(try s.ask("16 10 00 00 00" + String(repeating: " 00", count: 18)) == "17 10 00 00 00" + String(repeating: " 00", count: 18))
        let agreed = try ServerFixture(mtu: 64)
        #expect(try agreed.ask("12 10 00" + String(repeating: " 01", count: 62)) == "01 12 00 00 04", "65 octets at ATT_MTU 64")
    }

    @Test("GATT/SR/GAW/BV-07-C Execute Write 00 cancels the queue: nothing is written; GATT/SR/GAW/BI-07-C and BI-08-C Prepare Write to an invalid handle or a value without write permission")
    func cancelAndPrepareErrors() throws {
        let s = try ServerFixture()
        #expect(try s.ask("16 10 00 00 00 55") == "17 10 00 00 00 55")
        #expect(try s.ask("18 00") == "19")
        #expect(try s.ask("0a 10 00") == "0b 11")
        #expect(try s.ask("16 00 00 00 00 01") == "01 16 00 00 01")
        #expect(try s.ask("16 17 00 00 00 01") == "01 16 17 00 03")
        #expect(try s.ask("18 01") == "19", "an empty queue executes to nothing")
        #expect(s.events.isEmpty)
    }

    @Test("Execute Write: a part past the value so far is Invalid Offset, a result too long Invalid Attribute Value Length; nothing is written and the queue is emptied")
    func executeErrors() throws {
        let s = try ServerFixture()
        #expect(try s.ask("16 19 00 05 00 01") != nil)
        #expect(try s.ask("18 01") == "01 18 19 00 07")
        #expect(try s.ask("16 19 00 00 00 01 02 03 04 05") != nil)
        #expect(try s.ask("18 01") == "01 18 19 00 0d")
        #expect(try s.ask("18 01") == "19", "the failed queue was dropped")
        #expect(s.events.isEmpty)
    }

    @Test("the queue of prepared writes holds prepareQueueLimit parts; one more is Prepare Queue Full")
    func queueFull() throws {
        let s = try ServerFixture()
        s.server.prepareQueueLimit = 3
        for i in 0..<3 { #expect(try s.ask("16 19 00 0\(i) 00 01") != nil) }
        #expect(try s.ask("16 19 00 03 00 01") == "01 16 19 00 09")
    }

    @Test("an Execute Write with flags other than 0 or 1 is Invalid PDU; an unknown request is Request Not Supported, an unknown command is ignored")
    func robustness() throws {
        let s = try ServerFixture()
        #expect(try s.ask("18 02") == "01 18 00 00 04")
        #expect(try s.ask("bf 00") == "01 bf 00 00 06")
        #expect(try s.ask("ff 00") == nil)
    }

    @Test("Client Supported Features is each client's own, and a bit once set cannot be cleared (Value Not Allowed)")
    func clientFeatures() throws {
        let s = try ServerFixture()
        #expect(try s.ask("12 0b 00 01") == "13")
        #expect(try s.ask("0a 0b 00") == "0b 01")
        #expect(try s.ask("12 0b 00 00") == "01 12 0b 00 13")
        #expect(s.server.database[0x000B]?.value == [0x00], "not the shared value")
    }
}

@Suite("GATT.TS server: notifications and indications (GAN, GAI)")
struct GATTServerNotifyTests {
    @Test("GATT/SR/GAN/BV-01-C the CCCD written 01 00, a change is notified; a CCCD of the wrong length is refused")
    func notify() throws {
        let s = try ServerFixture()
        #expect(try s.ask("12 1c 00 01 00") == "13")
        #expect(s.events == ["cccd 001b notify true indicate false"])
        let mark = s.f.sentATT.count
        s.server.update(0x1B, [1, 2, 3])
        #expect(try s.sent(since: mark) == ["1b 1b 00 01 02 03"])
        #expect(try s.ask("0a 1b 00") == "0b 01 02 03")
        #expect(try s.ask("12 1c 00 01") == "01 12 1c 00 0d")
        #expect(s.session.subscriptions == [0x1B: 1])
    }

    @Test("GATT/SR/GAI/BV-01-C the CCCD written 02 00: one indication at a time, the next after the confirmation")
    func indicate() throws {
        let s = try ServerFixture()
        #expect(try s.ask("12 1c 00 02 00") == "13")
        let mark = s.f.sentATT.count
        s.server.update(0x1B, [4])
        s.server.update(0x1B, [5])
        #expect(try s.sent(since: mark) == ["1d 1b 00 04"])
        #expect(s.session.pendingIndications.queued == 1)
        #expect(try s.ask("1e") == "1d 1b 00 05")
        #expect(try s.ask("1e") == nil)
        #expect(s.events.suffix(2) == ["confirmed 001b", "confirmed 001b"])
    }

    @Test("no CCCD written, nothing sent; a bonded client's subscriptions restored on a new session are honoured")
    func restore() throws {
        let s = try ServerFixture()
        let mark = s.f.sentATT.count
        s.server.update(0x1B, [9])
        #expect(try s.sent(since: mark).isEmpty)
        s.session.restore([0x1B: 1])
        s.server.update(0x1B, [8])
        #expect(try s.sent(since: mark) == ["1b 1b 00 08"])
    }
}

/// A bonded client's state kept in memory, as a server's owner keeps it on disk.
final class MemoryBondedClients: BondedClientStore {
    var states: [DeviceAddress: BondedClientState] = [:]
    func load(_ identity: DeviceAddress) -> BondedClientState? { states[identity] }
    func save(_ identity: DeviceAddress, _ state: BondedClientState) throws { states[identity] = state }
}

@Suite("GATT server: a bonded client's CCCDs persist across connections (Core Vol 3 Part G 3.3.3.3, 7.1)")
struct GATTServerBondedClientTests {
    let identity = DeviceAddress(BDAddress("C0:11:22:33:44:55")!, .random)

    /// A server with a store, and a fixture's bearer attached as a client whose bond is `bond`.
    private func serve(_ store: MemoryBondedClients, bond: DeviceAddress?) throws -> (BearerFixture, GATTServer, GATTServerSession) {
        let f = BearerFixture(aclLength: 251)
        let server = try GATTServer(database: try testDatabase())
        server.bondedClients = store
        let session = server.attach(f.bearer, peer: identity, bondIdentity: { bond })
        return (f, server, session)
    }

    private func sent(_ f: BearerFixture, since mark: Int) throws -> [String] {
        _ = try f.host.pump(until: Instant.now().adding(ms: 50)) { f.sentATT.count > mark }
        return Array(f.sentATT.dropFirst(mark))
    }

    @Test("a bonded client's CCCD write is kept with the Database Hash; on its next connection the server restores it and notifies again")
    func keptAndRestored() throws {
        let store = MemoryBondedClients()
        let (f, server, session) = try serve(store, bond: identity)
        f.bearer.receive(hex("12 1c 00 01 00"))
        _ = try sent(f, since: 0)
        let hash = try #require(server.databaseHash)
        #expect(store.states[identity] == BondedClientState(hash: hash, subscriptions: [0x1B: 1]))
        server.detach(session)

        // The next connection (a new session on the bearer).
        let again = server.attach(f.bearer, peer: identity, bondIdentity: { self.identity })
        let mark = f.sentATT.count
        server.update(0x1B, [7])
        let early = try sent(f, since: mark)
        #expect(early.isEmpty, "not restored before the link is encrypted with the bond")
        let r = again.restoreBond()
        #expect(r == GATTServerSession.Restored(subscriptions: 1, databaseChanged: false, serviceChangedSent: false))
        server.update(0x1B, [8])
        let notified = try sent(f, since: mark)
        #expect(notified == ["1b 1b 00 08"])
    }

    @Test("a client that last saw another database, subscribed to Service Changed, is indicated the whole handle range")
    func serviceChangedAfterAChange() throws {
        let store = MemoryBondedClients()
        store.states[identity] = BondedClientState(hash: [UInt8](repeating: 0xAA, count: 16), subscriptions: [0x08: 2, 0x1B: 1])
        let (f, server, session) = try serve(store, bond: identity)
        let mark = f.sentATT.count
        let r = session.restoreBond()
        #expect(r == GATTServerSession.Restored(subscriptions: 2, databaseChanged: true, serviceChangedSent: true))
        let indicated = try sent(f, since: mark)
        #expect(indicated == ["1d 08 00 01 00 ff ff"])
        let hash = try #require(server.databaseHash)
        #expect(store.states[identity]?.hash == hash, "the hash it has now seen is kept")
    }

    @Test("a changed database and no Service Changed subscription: nothing is sent, and it is said so")
    func changedButNotSubscribed() throws {
        let store = MemoryBondedClients()
        store.states[identity] = BondedClientState(hash: [], subscriptions: [0x1B: 1])
        let (f, server, session) = try serve(store, bond: identity)
        let mark = f.sentATT.count
        #expect(session.restoreBond() == GATTServerSession.Restored(subscriptions: 1, databaseChanged: true, serviceChangedSent: false))
        let nothing = try sent(f, since: mark)
        #expect(nothing.isEmpty)
        withExtendedLifetime(server) {}  // sessions hold their server unowned
    }

    @Test("a client without a bond: nothing is kept, nothing restored")
    func notBonded() throws {
        let store = MemoryBondedClients()
        let (f, server, session) = try serve(store, bond: nil)
        f.bearer.receive(hex("12 1c 00 01 00"))
        _ = try sent(f, since: 0)
        server.detach(session)
        #expect(store.states.isEmpty)
        #expect(session.restoreBond() == nil)
    }
}
