import Testing
@testable import BLEWire
@testable import BLEATT
@testable import BLEGATT
@testable import BLEGATTServer
@testable import AttledJSON
@testable import AttledServe
@testable import LEDProfile
@testable import Attled
#if canImport(Glibc)
import Glibc
#endif

@Suite("attled serve: boards as data, GATT JSON, the LED")
struct ServeTests {
    @Test("each board's layout is the documented one: GAP, GATT, the LED service at 0x000E with its values at 0x0010, 0x0012 (0x0014)")
    func boards() throws {
        for (p, values, cccd) in [(LEDProfile.pycom, [0x10, 0x12, 0x14], UInt16?.none), (.particle, [0x10, 0x12, 0x14], nil), (.harness, [0x10, 0x12], 0x13)] {
            let db = try Boards.database(p, name: "CassarTech")
            #expect(db.groups.map(\.start) == [0x01, 0x06, 0x0E], "\(p.name)")
            #expect(db.groups[2].type == p.service)
            let led = db.characteristics.filter { $0.valueHandle > 0x0E }
            #expect(led.map(\.valueHandle) == values.map { UInt16($0) }, "\(p.name)")
            #expect(led.last?.cccdHandle == cccd)
            #expect(db[0x0003]?.value == Array("CassarTech".utf8))
        }
        let particle = try Boards.database(.particle, name: "x")
        #expect(particle.characteristics.last?.properties == [.read, .writeWithoutResponse])
        let secure = try Boards.database(.pycom, name: "x", secure: true)
        #expect(secure[0x0010]?.permissions.contains(.encrypted) == true && secure[0x0003]?.permissions == .read)
    }

    @Test("a `gatt --json --values` document is served handle for handle: declarations, values, descriptors, includes; errors read from the device become permissions")
    func cloneDocument() throws {
        let doc = try JSONValue.parse(#"""
        {"ok": true, "services": [
          {"uuid": "180f", "start": 16, "end": 40, "primary": true, "includes": [{"handle": 17, "uuid": "1234", "start": 48, "end": 50}],
           "characteristics": [
             {"uuid": "2a19", "declaration_handle": 20, "value_handle": 21, "properties": ["read", "notify"], "value": "63",
              "descriptors": [{"uuid": "2902", "handle": 22, "value": "0000"}, {"uuid": "2901", "handle": 23, "value": "6261"}]},
             {"uuid": "2a1a", "declaration_handle": 24, "value_handle": 25, "properties": ["read", "write"], "error": "Insufficient Encryption", "descriptors": []},
             {"uuid": "2a1b", "declaration_handle": 26, "value_handle": 27, "properties": ["write"], "error": "Read Not Permitted", "descriptors": []}]},
          {"uuid": "1234", "start": 48, "end": 50, "primary": false, "includes": [], "characteristics": []}]}
        """#)
        let db = try GATTJSON.database(doc)
        #expect(db.attributes.map(\.handle) == [16, 17, 20, 21, 22, 23, 24, 25, 26, 27, 48])
        #expect(db[17]?.value == hex("30 00 32 00 34 12"))
        #expect(db[20]?.value == hex("12 15 00 19 2a"))
        #expect(db[21]?.value == [0x63] && db[22]?.perClient == true && db[23]?.value == hex("62 61"))
        #expect(db[25]?.permissions == [.read, .write, .readEncrypted, .writeEncrypted])
        #expect(db[27]?.permissions == [.write])
        #expect(db.groups.map { [$0.start, $0.end] } == [[16, 40], [48, 50]])
        #expect(db[48]?.type == GATTUUID.secondaryService)
    }

    @Test("a clone made secure: its characteristic values and CCCDs need encryption, the GAP and GATT services do not")
    func secureClone() throws {
        let db = try testDatabase().requiringEncryption()
        #expect(db[0x0003]?.permissions == .read && db[0x0009]?.permissions.contains(.readEncrypted) == false)
        #expect(db[0x0010]?.permissions.contains(.encrypted) == true && db[0x001B]?.permissions.contains(.encrypted) == true)
        #expect(db[0x001C]?.permissions.contains(.encrypted) == true, "the CCCD too")
        #expect(db[0x000F]?.permissions == .read, "declarations stay readable")
    }

    @Test("a malformed document says where: the path and what is wrong")
    func documentErrors() throws {
        func error(_ text: String) -> String? {
            do { _ = try GATTJSON.services(try JSONValue.parse(text)); return nil } catch { return "\(error)" }
        }
        #expect(error(#"{"x": 1}"#) == #"document: neither a "services" array nor an object with one"#)
        #expect(error(#"[{"uuid": "zz"}]"#) == #"services[0].uuid: "zz" is not a UUID"#)
        #expect(error(#"[{"uuid": "180f", "characteristics": [{"uuid": "2a19", "properties": ["fly"]}]}]"#)?.hasPrefix("services[0].characteristics[0].properties[0]: not one of") == true)
        #expect(error(#"[{"uuid": "180f", "characteristics": [{"uuid": "2a19", "properties": [], "value": "zz"}]}]"#) == "services[0].characteristics[0].value: not hex")
        #expect(error(#"[{"uuid": "180f", "start": 0, "characteristics": []}]"#) == "services[0].start: not a handle 1...65535")
        #expect(throws: GATTDatabaseError.self) {
            try GATTJSON.database(try JSONValue.parse(#"[{"uuid": "180f", "start": 9, "characteristics": []}, {"uuid": "180a", "start": 5, "characteristics": []}]"#))
        }
    }
}

@Suite("attled serve: the LED played")
struct ServedLEDTests {
    final class Board {
        let f = BearerFixture(aclLength: 251)
        let server: GATTServer
        let led: ServedLED
        var changes: [ServedLED.State] = []
        init(_ p: LEDProfile) throws {
            server = try GATTServer(database: try Boards.database(p, name: "CassarTech"))
            _ = server.attach(f.bearer, peer: DeviceAddress(BDAddress("C0:11:22:33:44:55")!, .random))
            led = try #require(ServedLED(server: server))
            led.onChange = { [unowned self] s, _ in self.changes.append(s) }
        }
        func ask(_ request: String) throws -> String? {
            let before = f.sentATT.count
            f.bearer.receive(hex(request))
            _ = try f.host.pump(until: Instant.now().adding(ms: 50)) { self.f.sentATT.count > before }
            return f.sentATT.count > before ? f.sentATT.last : nil
        }
    }

    @Test("pycom: three Write Requests make the colour, one change each; the values read back")
    func pycom() throws {
        let b = try Board(.pycom)
        #expect(b.led.state == .colour(RGB(0, 0, 0)))
        #expect(try b.ask("12 10 00 ff") == "13")
        #expect(try b.ask("12 12 00 00") == "13")
        #expect(try b.ask("12 14 00 80") == "13")
        #expect(b.changes == [.colour(RGB(255, 0, 0)), .colour(RGB(255, 0, 128))], "writing the value it has changes nothing")
        #expect(try b.ask("0a 14 00") == "0b 80")
        #expect(try b.ask("12 10 00 01 02") == "01 12 10 00 0d", "one byte, as the firmware takes")
    }

    @Test("particle: Write Commands make the colour")
    func particle() throws {
        let b = try Board(.particle)
        #expect(try b.ask("52 10 00 10") == nil)
        #expect(try b.ask("52 12 00 20") == nil)
        #expect(b.changes == [.colour(RGB(16, 0, 0)), .colour(RGB(16, 32, 0))])
    }

    @Test("harness: a command written is notified on the button characteristic to a subscribed client, and presses or releases a button")
    func harness() throws {
        let b = try Board(.harness)
        #expect(try b.ask("12 10 00 01") == "13", "not subscribed: no notification")
        #expect(try b.ask("12 13 00 01 00") == "13")
        let mark = b.f.sentATT.count
        _ = try b.ask("12 10 00 03")
        #expect(Array(b.f.sentATT.dropFirst(mark)) == ["1b 12 00 03", "13"])
        _ = try b.ask("12 10 00 00")
        #expect(b.changes == [.buttons([true, false]), .buttons([true, true]), .buttons([false, true])])
    }

    @Test("a database without a known LED service has no LED")
    func noLED() throws {
        let server = try GATTServer(database: try GATTServerDatabase(services: [StandardServices.gap(name: "x")]))
        #expect(ServedLED(server: server) == nil)
    }
}

@Suite("attled serve: what is kept of a bonded client")
struct ServedClientStoreTests {
    @Test("a client's record (Database Hash, subscriptions) is saved 0600 beside the bonds and read back; a damaged one is none")
    func roundTrip() throws {
        let dir = try GATTCacheTests.tempDirectory()
        defer { GATTCacheTests.removeAll(dir) }
        let store = ServedClientStore(bonds: BondStore(directory: dir))
        let id = DeviceAddress(BDAddress("F0:00:00:00:00:01")!, .random)
        #expect(store.load(id) == nil)
        let r = ServedClientStore.Record(hash: Array(0..<16), subscriptions: [0x0012: 1, 0x0008: 2])
        try store.save(id, r)
        #expect(store.load(id) == r)
        var st = stat()
        #expect(stat(dir + "/served-F0-00-00-00-00-01-random", &st) == 0 && st.st_mode & 0o777 == 0o600)
        try BondStore(directory: dir).writeRecord(named: "served-F0-00-00-00-00-01-random", Array("attled-served 1\ncccd zz 1\n".utf8))
        #expect(store.load(id) == nil)
    }
}
