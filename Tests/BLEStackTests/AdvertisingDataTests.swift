import Testing
@testable import BLEWire
@testable import BLETransport
@testable import BLEHCI
@testable import BLEGAP

private let pycomService = BluetoothUUID("36353433-3231-3039-3837-363534333231")!

/// A real-looking advertisement: Flags, Complete Local Name "CassarTech",
/// 16-bit UUIDs, manufacturer data, TX power.
private let advertisement = hex("02 01 06 0b 09 43 61 73 73 61 72 54 65 63 68 05 03 0d 18 0f 18 05 ff 59 00 01 02 02 0a f4")

@Suite("Advertising data: AD types")
struct ADTypeTests {
    /// One AD structure per row: bytes and the field it decodes to.
    static let fields: [(String, ADField)] = [
        ("02 01 06", .flags(0x06)),
        ("05 02 0d 18 0f 18", .serviceUUIDs([BluetoothUUID(uint16: 0x180D), BluetoothUUID(uint16: 0x180F)], complete: false)),
        ("03 03 0d 18", .serviceUUIDs([BluetoothUUID(uint16: 0x180D)], complete: true)),
        ("05 04 78 56 34 12", .serviceUUIDs([BluetoothUUID(uint32: 0x1234_5678)], complete: false)),
        ("09 05 78 56 34 12 0d 18 00 00", .serviceUUIDs([BluetoothUUID(uint32: 0x1234_5678), BluetoothUUID(uint16: 0x180D)], complete: true)),
        ("11 06 31 32 33 34 35 36 37 38 39 30 31 32 33 34 35 36", .serviceUUIDs([pycomService], complete: false)),
        ("11 07 31 32 33 34 35 36 37 38 39 30 31 32 33 34 35 36", .serviceUUIDs([pycomService], complete: true)),
        ("05 08 43 61 73 73", .localName("Cass", complete: false)),
        ("0b 09 43 61 73 73 61 72 54 65 63 68", .localName("CassarTech", complete: true)),
        ("02 0a f4", .txPower(-12)),
        ("04 0d 0c 02 5a", .classOfDevice(0x5A020C)),
        ("05 12 06 00 10 00", .connectionIntervalRange(min: 6, max: 16)),
        ("05 14 0d 18 0f 18", .solicitationUUIDs([BluetoothUUID(uint16: 0x180D), BluetoothUUID(uint16: 0x180F)])),
        ("11 15 31 32 33 34 35 36 37 38 39 30 31 32 33 34 35 36", .solicitationUUIDs([pycomService])),
        ("05 16 0f 18 64 01", .serviceData(uuid: BluetoothUUID(uint16: 0x180F), data: hex("64 01"))),
        ("07 17 55 44 33 22 11 c0", .targetAddresses([BDAddress("C0:11:22:33:44:55")!], random: false)),
        ("0d 18 55 44 33 22 11 c0 66 55 44 33 22 c1", .targetAddresses([BDAddress("C0:11:22:33:44:55")!, BDAddress("C1:22:33:44:55:66")!], random: true)),
        ("03 19 c1 03", .appearance(0x03C1)),
        ("03 1a 20 00", .advertisingInterval(0x0020)),
        ("04 1a 00 00 01", .advertisingInterval(0x010000)),
        ("08 1b 55 44 33 22 11 c0 01", .leAddress(BDAddress("C0:11:22:33:44:55")!, random: true)),
        ("08 1b 55 44 33 22 11 c0 00", .leAddress(BDAddress("C0:11:22:33:44:55")!, random: false)),
        ("02 1c 02", .leRole(0x02)),
        ("05 1f 78 56 34 12", .solicitationUUIDs([BluetoothUUID(uint32: 0x1234_5678)])),
        ("07 20 78 56 34 12 aa bb", .serviceData(uuid: BluetoothUUID(uint32: 0x1234_5678), data: hex("aa bb"))),
        ("12 21 31 32 33 34 35 36 37 38 39 30 31 32 33 34 35 36 07", .serviceData(uuid: pycomService, data: [0x07])),
        ("0e 24 17 2f 2f 65 78 61 6d 70 6c 65 2e 63 6f", .uri("https://example.co")),
        ("05 24 01 61 62 63", .uri("abc")),
        ("03 24 99 78", .uri("scheme(0x99)x")),
        ("06 ff 59 00 01 02 03", .manufacturerData(company: 0x0059, data: hex("01 02 03"))),
        ("03 ff 4c 00", .manufacturerData(company: 0x004C, data: [])),
        ("03 2a aa bb", .raw(hex("aa bb"))),
    ]

    @Test("each AD type decodes from bytes", arguments: fields.indices)
    func decodes(i: Int) {
        let (wire, field) = Self.fields[i]
        let bytes = hex(wire)
        let ad = AdvertisingData(bytes)
        #expect(ad.problems == [])
        #expect(ad.structures.count == 1)
        #expect(ad.structures.first?.field == field, "\(wire)")
        #expect(ad.structures.first?.type.rawValue == bytes[1])
        #expect(ad.structures.first?.data == Array(bytes[2...]))
    }

    @Test("every AD type constant is covered by a decoding vector")
    func everyTypeCovered() {
        let covered = Set(Self.fields.map { hex($0.0)[1] })
        let declared: [ADType] = [.flags, .incomplete16, .complete16, .incomplete32, .complete32, .incomplete128, .complete128,
                                  .shortenedName, .completeName, .txPower, .classOfDevice, .peripheralConnectionIntervalRange,
                                  .solicitation16, .solicitation128, .serviceData16, .publicTargetAddress, .randomTargetAddress,
                                  .appearance, .advertisingInterval, .leBluetoothDeviceAddress, .leRole, .solicitation32,
                                  .serviceData32, .serviceData128, .uri, .manufacturerData]
        for t in declared { #expect(covered.contains(t.rawValue), "\(t)") }
    }

    @Test("a whole advertisement decodes with its convenience views")
    func wholeAdvertisement() {
        let ad = AdvertisingData(advertisement)
        #expect(ad.problems == [])
        #expect(ad.structures.map(\.type.rawValue) == [0x01, 0x09, 0x03, 0xFF, 0x0A])
        #expect(ad.flags == 0x06)
        #expect(ad.localName == "CassarTech")
        #expect(ad.isNameComplete)
        #expect(ad.serviceUUIDs == [BluetoothUUID(uint16: 0x180D), BluetoothUUID(uint16: 0x180F)])
        #expect(ad.manufacturerData.count == 1)
        #expect(ad.manufacturerData.first?.company == 0x0059)
        #expect(ad.manufacturerData.first?.data == hex("01 02"))
        #expect(ad.txPower == -12)
        #expect(ad.appearance == nil)
        #expect(ad.serviceData.isEmpty)
        #expect(AdvertisingData.flagNames(0x06) == ["LE General Discoverable", "BR/EDR Not Supported"])
        #expect(AdvertisingData.flagNames(0x81) == ["LE Limited Discoverable", "bit 7"])
    }

    @Test("the complete name wins over the shortened one, whatever the order")
    func completeVersusShortened() {
        let both = AdvertisingData(hex("05 08 43 61 73 73 0b 09 43 61 73 73 61 72 54 65 63 68"))
        #expect(both.localName == "CassarTech")
        #expect(both.isNameComplete)
        let shortOnly = AdvertisingData(hex("05 08 43 61 73 73"))
        #expect(shortOnly.localName == "Cass")
        #expect(!shortOnly.isNameComplete)
        #expect(AdvertisingData(hex("02 01 06")).localName == nil)
    }

    @Test("trailing NULs of a name are dropped; invalid UTF-8 is replaced, not trapped on")
    func nameBytes() {
        #expect(AdvertisingData(hex("05 09 41 42 00 00")).localName == "AB")
        #expect(AdvertisingData(hex("03 09 ff fe")).localName == "\u{FFFD}\u{FFFD}")
    }

    @Test("service UUIDs are listed once, from every list")
    func serviceUUIDsMerged() {
        let ad = AdvertisingData(hex("03 02 0d 18 05 03 0d 18 0f 18 11 07 31 32 33 34 35 36 37 38 39 30 31 32 33 34 35 36"))
        #expect(ad.serviceUUIDs == [BluetoothUUID(uint16: 0x180D), BluetoothUUID(uint16: 0x180F), pycomService])
    }

    @Test("encode builds length-type-value structures that decode back")
    func encode() {
        let bytes = AdvertisingData.encode([(.flags, [0x06]), (.completeName, Array("LED".utf8))])
        #expect(bytes == hex("02 01 06 04 09 4c 45 44"))
        #expect(AdvertisingData(bytes).localName == "LED")
    }

    @Test("AD types print their names")
    func names() {
        #expect(ADType.completeName.description == "Complete Local Name (0x09)")
        #expect(ADType(rawValue: 0x99).description == "Unknown AD type (0x99)")
    }
}

@Suite("Advertising data: malformed input")
struct MalformedADTests {
    @Test("a length past the end is reported; earlier structures are kept")
    func lengthPastEnd() {
        let ad = AdvertisingData(hex("02 01 06 0b 09 43 61 73"))
        #expect(ad.structures.count == 1)
        #expect(ad.flags == 0x06)
        #expect(ad.problems == ["AD structure at offset 3 claims 11 byte(s) but only 4 remain"])
    }

    @Test("a zero length followed by data is reported; zero padding is not")
    func zeroLength() {
        let ad = AdvertisingData(hex("02 01 06 00 05 09 41 42"))
        #expect(ad.structures.count == 1)
        #expect(ad.problems == ["zero-length AD structure at offset 3; 4 byte(s) after it ignored"])
        let padded = AdvertisingData(hex("02 01 06 00 00 00 00"))
        #expect(padded.structures.count == 1)
        #expect(padded.problems == [])
    }

    @Test("UUID lists that are not a multiple of the width are reported and kept raw",
          arguments: [("04 03 0d 18 0f", 2), ("06 05 78 56 34 12 01", 4), ("10 07 31 32 33 34 35 36 37 38 39 30 31 32 33 34 35", 16),
                      ("04 14 0d 18 0f", 2), ("04 1f 01 02 03", 4), ("03 15 01 02", 16)])
    func uuidListWidth(wire: String, width: Int) throws {
        let bytes = hex(wire)
        let ad = AdvertisingData(bytes)
        let s = try #require(ad.structures.first)
        #expect(s.field == .raw(Array(bytes[2...])))
        let n = bytes.count - 2
        #expect(s.problem == "\(n) bytes is not a multiple of \(width)")
        #expect(ad.problems == ["\(s.type.name) at offset 0: \(n) bytes is not a multiple of \(width)"])
        #expect(ad.serviceUUIDs.isEmpty)
    }

    @Test("manufacturer data shorter than the 2-byte company identifier is reported",
          arguments: ["01 ff", "02 ff 59"])
    func shortManufacturerData(wire: String) {
        let ad = AdvertisingData(hex(wire))
        #expect(ad.structures.first?.problem == "shorter than the 2-byte company identifier")
        #expect(ad.problems.count == 1)
        #expect(ad.manufacturerData.isEmpty)
    }

    @Test("fixed-size AD types with the wrong size are reported", arguments: [
        ("01 01", "empty"), ("03 0a 01 02", "expected 1 byte"), ("02 19 01", "expected 2 bytes"),
        ("04 12 06 00 10", "expected 4 bytes"), ("03 0d 01 02", "expected 3 bytes"), ("07 1b 01 02 03 04 05 06", "expected 7 bytes"),
        ("03 1c 01 02", "expected 1 byte"), ("02 1a 01", "expected 2 to 4 bytes"), ("06 1a 01 02 03 04 05", "expected 2 to 4 bytes"),
        ("06 17 01 02 03 04 05", "not a multiple of 6 bytes"), ("01 18", "not a multiple of 6 bytes"),
        ("02 16 0f", "shorter than its 2-byte UUID"), ("04 20 01 02 03", "shorter than its 4-byte UUID"),
        ("03 21 01 02", "shorter than its 16-byte UUID"), ("01 24", "empty"),
    ])
    func wrongSizes(wire: String, problem: String) {
        let bytes = hex(wire)
        let ad = AdvertisingData(bytes)
        #expect(ad.structures.first?.problem == problem)
        #expect(ad.structures.first?.field == .raw(Array(bytes[2...])))
        #expect(ad.problems.count == 1)
    }

    @Test("every prefix and every single-byte mutation of a real advertisement never traps")
    func fuzz() {
        var decoded = 0
        for p in prefixes(advertisement) {
            let ad = AdvertisingData(p)
            decoded += ad.structures.count
            _ = (ad.localName, ad.serviceUUIDs, ad.flags, ad.txPower, ad.manufacturerData, ad.serviceData)
        }
        for i in advertisement.indices {
            for v in [UInt8(0x00), 0x01, 0x02, 0x03, 0x07, 0x1f, 0x20, 0x7f, 0x80, 0xfe, 0xff] + (0...0x30).map({ UInt8($0) }) {
                var m = advertisement
                m[i] = v
                let ad = AdvertisingData(m)
                // Whatever decoded must lie within the input.
                let consumed = ad.structures.reduce(0) { $0 + 2 + $1.data.count }
                #expect(consumed <= m.count)
                _ = (ad.localName, ad.serviceUUIDs, ad.flags, ad.txPower, ad.manufacturerData, ad.serviceData, ad.appearance)
            }
        }
        #expect(decoded > 0)
    }

    @Test("random byte strings never trap")
    func randomBytes() {
        var g = SystemRandomNumberGenerator()
        for _ in 0..<2000 {
            let n = Int.random(in: 0...40, using: &g)
            let b = (0..<n).map { _ in UInt8.random(in: 0...255, using: &g) }
            let ad = AdvertisingData(b)
            #expect(ad.structures.reduce(0) { $0 + 2 + $1.data.count } <= b.count)
        }
    }
}

// MARK: - Central scan merge

/// A Central over a scripted controller that answers the scan commands.
private func scanningCentral(extended: Bool = false) throws -> (ScriptedController, HCIHost, Central) {
    let ctl = ScriptedController()
    for op in [LEScanParameters.opcode, HCI.LESetScanEnable.opcode, HCI.LESetExtendedScanParameters.opcode, HCI.LESetExtendedScanEnable.opcode] {
        ctl.when(command: op, reply: [Ev.complete(op)])
    }
    let host = HCIHost(transport: ctl)
    host.interruptible = false
    var info = ControllerInfo()
    info.ownAddress = DeviceAddress(BDAddress("C1:02:03:04:05:06")!, .random)
    let central = Central(host: host, info: info)
    central.useExtendedCommands = extended
    try central.startScan()
    return (ctl, host, central)
}

/// LE Advertising Report event (legacy), one report.
private func legacyReport(type: UInt8, address: String, data: [UInt8], rssi: Int8 = -60) -> HCIPacket {
    var w = ByteWriter()
    w.u8(0x02); w.u8(1); w.u8(type); w.u8(0x01)
    BDAddress(address)!.write(&w)
    w.u8(UInt8(data.count)); w.append(data); w.i8(rssi)
    return HCIPacket(.event, [0x3E, UInt8(w.bytes.count)] + w.bytes)
}

/// LE Extended Advertising Report event, one report.
private func extendedReport(type: UInt16, address: String, data: [UInt8], rssi: Int8 = -60) -> HCIPacket {
    var w = ByteWriter()
    w.u8(0x0D); w.u8(1); w.u16(type); w.u8(0x01)
    BDAddress(address)!.write(&w)
    w.u8(1); w.u8(0); w.u8(0xFF); w.i8(127); w.i8(rssi); w.u16(0); w.u8(0); w.append([UInt8](repeating: 0, count: 6))
    w.u8(UInt8(data.count)); w.append(data)
    return HCIPacket(.event, [0x3E, UInt8(w.bytes.count)] + w.bytes)
}

@Suite("Central: scanning")
struct CentralScanTests {
    @Test("startScan sends LE Set Scan Parameters (own address random) then LE Set Scan Enable")
    func startScanLegacy() throws {
        let (ctl, _, central) = try scanningCentral()
        #expect(ctl.sentHex() == ["01 0b 20 07 01 10 00 10 00 01 00", "01 0c 20 02 01 00"])
        #expect(central.isScanning)
        try central.stopScan()
        #expect(ctl.sentHex().last == "01 0c 20 02 00 00")
        #expect(!central.isScanning)
    }

    @Test("startScan with extended commands sends the extended pair")
    func startScanExtended() throws {
        let (ctl, _, central) = try scanningCentral(extended: true)
        #expect(ctl.sentHex() == ["01 41 20 08 01 00 01 01 10 00 10 00", "01 42 20 06 01 00 00 00 00 00"])
        try central.stopScan()
        #expect(ctl.sentHex().last == "01 42 20 06 00 00 00 00 00 00")
    }

    @Test("legacy ADV_IND then SCAN_RSP adding the name: merged per address; updates for new and changed, not for a repeat")
    func legacyMerge() throws {
        let (_, host, central) = try scanningCentral()
        var updates: [(String?, Bool)] = []
        central.onDeviceUpdate { d, isNew in updates.append((d.name, isNew)) }
        let adv = hex("02 01 06 03 03 0d 18")
        let rsp = hex("0b 09 43 61 73 73 61 72 54 65 63 68")
        host.handle(legacyReport(type: 0x00, address: "C0:11:22:33:44:55", data: adv))
        host.handle(legacyReport(type: 0x04, address: "C0:11:22:33:44:55", data: rsp, rssi: -50))
        host.handle(legacyReport(type: 0x00, address: "C0:11:22:33:44:55", data: adv))
        host.handle(legacyReport(type: 0x04, address: "C0:11:22:33:44:55", data: rsp))
        #expect(updates.count == 2)
        #expect(updates.first?.0 == nil && updates.first?.1 == true)
        #expect(updates.last?.0 == "CassarTech" && updates.last?.1 == false)
        let key = DeviceAddress(BDAddress("C0:11:22:33:44:55")!, .random)
        let d = try #require(central.devices[key])
        #expect(central.devices.count == 1)
        #expect(central.order == [key])
        #expect(d.name == "CassarTech")
        #expect(d.serviceUUIDs == [BluetoothUUID(uint16: 0x180D)])
        #expect(d.connectable)
        #expect(d.reports == 4)
        #expect(d.rssi == -60)
        #expect(d.advertisement.structures.count == 2)
        #expect(d.scanResponse?.localName == "CassarTech")
    }

    @Test("onDeviceSeen gets every report, the repeats onDeviceUpdate skips, after the update when there is one")
    func seenEveryReport() throws {
        let (_, host, central) = try scanningCentral()
        var calls: [String] = []
        central.onDeviceUpdate { _, isNew in calls.append(isNew ? "new" : "changed") }
        central.onDeviceSeen { d in calls.append("seen \(d.reports)") }
        let data = hex("0b 09 43 61 73 73 61 72 54 65 63 68")
        host.handle(legacyReport(type: 0x00, address: "C0:11:22:33:44:55", data: data))
        host.handle(legacyReport(type: 0x00, address: "C0:11:22:33:44:55", data: data))
        host.handle(legacyReport(type: 0x00, address: "C0:11:22:33:44:55", data: data + hex("02 0a 04")))
        #expect(calls == ["new", "seen 1", "seen 2", "changed", "seen 3"])
    }

    @Test("any number of subscribers get each event in order; a cancelled one no longer does")
    func subscribers() throws {
        let (_, host, central) = try scanningCentral()
        var a: [String] = [], b: [String] = []
        let ta = central.onDeviceUpdate { d, _ in a.append(d.name ?? "?") }
        central.subscribe { e in if case let .deviceSeen(d) = e { b.append("seen \(d.reports)") } }
        let data = hex("0b 09 43 61 73 73 61 72 54 65 63 68")
        host.handle(legacyReport(type: 0x00, address: "C0:11:22:33:44:55", data: data))
        central.cancel(ta)
        host.handle(legacyReport(type: 0x00, address: "C0:11:22:33:44:56", data: data))
        #expect(a == ["CassarTech"])
        #expect(b == ["seen 1", "seen 1"])
        #expect(central.subscriptionCount == 1)
    }

    @Test("extended report 0x0001 then 0x0008 repeating the same data: one device, one update")
    func extendedRepeat() throws {
        let (_, host, central) = try scanningCentral()
        var updates: [Bool] = []
        central.onDeviceUpdate { _, isNew in updates.append(isNew) }
        let data = hex("0b 09 43 61 73 73 61 72 54 65 63 68")
        host.handle(extendedReport(type: 0x0001, address: "C0:11:22:33:44:55", data: data))
        host.handle(extendedReport(type: 0x0008, address: "C0:11:22:33:44:55", data: data))
        host.handle(extendedReport(type: 0x0001, address: "C0:11:22:33:44:55", data: data))
        #expect(updates == [true])
        #expect(central.devices.count == 1)
        let d = try #require(central.devices.values.first)
        #expect(d.name == "CassarTech")
        #expect(d.reports == 3)
        // A change in the data is news again.
        host.handle(extendedReport(type: 0x0001, address: "C0:11:22:33:44:55", data: data + hex("02 0a 04")))
        #expect(updates == [true, false])
    }

    @Test("different addresses are different devices, in the order first heard")
    func perAddress() throws {
        let (_, host, central) = try scanningCentral()
        var newCount = 0
        central.onDeviceUpdate { _, isNew in if isNew { newCount += 1 } }
        host.handle(legacyReport(type: 0x00, address: "C0:11:22:33:44:55", data: hex("02 01 06")))
        host.handle(legacyReport(type: 0x00, address: "C0:11:22:33:44:66", data: hex("02 01 06")))
        #expect(newCount == 2)
        #expect(central.order.map(\.address.description) == ["C0:11:22:33:44:55", "C0:11:22:33:44:66"])
    }

    @Test("extended data in pieces (status 'more to come') is joined before decoding")
    func fragmentedExtended() throws {
        let (_, host, central) = try scanningCentral()
        var updates = 0
        central.onDeviceUpdate { _, _ in updates += 1 }
        host.handle(extendedReport(type: 0x0021, address: "C0:11:22:33:44:55", data: hex("0b 09 43 61 73 73")))
        #expect(updates == 0)
        host.handle(extendedReport(type: 0x0001, address: "C0:11:22:33:44:55", data: hex("61 72 54 65 63 68")))
        #expect(updates == 1)
        #expect(central.devices.values.first?.name == "CassarTech")
    }

    @Test("malformed advertising data is reported through onMalformedAdvertisement")
    func malformedReported() throws {
        let (_, host, central) = try scanningCentral()
        var problems: [String] = []
        central.onMalformedAdvertisement { _, p in problems += p }
        host.handle(legacyReport(type: 0x00, address: "C0:11:22:33:44:55", data: hex("05 09 41")))
        #expect(problems == ["AD structure at offset 0 claims 5 byte(s) but only 2 remain"])
        #expect(central.devices.count == 1)
    }

    @Test("reports are ignored when not scanning")
    func notScanning() throws {
        let (_, host, central) = try scanningCentral()
        try central.stopScan()
        host.handle(legacyReport(type: 0x00, address: "C0:11:22:33:44:55", data: hex("02 01 06")))
        #expect(central.devices.isEmpty)
    }

    @Test("waitForDevice pumps until a device matches, then returns it")
    func waitForDevice() throws {
        let (ctl, _, central) = try scanningCentral()
        ctl.deliver(legacyReport(type: 0x00, address: "C0:11:22:33:44:66", data: hex("05 09 4f 74 68 72")),
                    legacyReport(type: 0x00, address: "C0:11:22:33:44:55", data: hex("02 01 06")),
                    legacyReport(type: 0x04, address: "C0:11:22:33:44:55", data: hex("04 09 4c 45 44")))
        let d = try central.waitForDevice(until: Instant.now().adding(ms: 500)) { $0.name == "LED" }
        #expect(d?.address.address.description == "C0:11:22:33:44:55")
        let none = try central.waitForDevice(until: Instant.now().adding(ms: 20)) { $0.name == "nothing" }
        #expect(none == nil)
    }

    @Test("scan interval in 0.625 ms units is clamped to the allowed range")
    func units() {
        #expect(Central.units625(10) == 16)
        #expect(Central.units625(0) == 4)
        #expect(Central.units625(100_000) == 16384)
    }
}

@Suite("Central: connecting")
struct CentralConnectTests {
    @Test("connect sends LE Create Connection asking for 7.5-15 ms (one-shot) and returns the connection from LE Connection Complete")
    func connect() throws {
        let ctl = ScriptedController()
        ctl.when(h4("01 0d 20 19 10 00 10 00 00 01 55 44 33 22 11 c0 01 06 00 0c 00 00 00 c8 00 00 00 00 00"),
                 reply: [h4("04 0f 04 00 01 0d 20"), h4("04 3e 13 01 00 01 00 00 01 55 44 33 22 11 c0 18 00 00 00 f4 01 00")])
        ctl.when(h4("01 06 04 03 01 00 13"), reply: [h4("04 0f 04 00 01 06 04"), h4("04 05 04 00 01 00 16")])
        let host = HCIHost(transport: ctl)
        host.interruptible = false
        var info = ControllerInfo()
        info.ownAddress = DeviceAddress(BDAddress("C1:02:03:04:05:06")!, .random)
        let central = Central(host: host, info: info)
        let c = try central.connect(to: DeviceAddress(BDAddress("C0:11:22:33:44:55")!, .random), timeoutMs: 500)
        #expect(c.handle == 1)
        #expect(c.interval == 0x18 && c.supervisionTimeout == 0x1F4)
        #expect(c.intervalMicroseconds == 30_000)
        #expect(c.isConnected)
        try central.disconnect(c)
        #expect(!c.isConnected)
        #expect(c.disconnectReason == .localHostTerminated)
        #expect(ctl.unexpected.isEmpty)
    }

    @Test("a failed LE Connection Complete throws connectFailed with the status")
    func connectFailed() {
        let ctl = ScriptedController()
        ctl.when(command: LECreateConnection.opcode, reply: [h4("04 0f 04 00 01 0d 20"), h4("04 3e 13 01 3e 00 00 00 01 55 44 33 22 11 c0 00 00 00 00 00 00 00")])
        let host = HCIHost(transport: ctl)
        host.interruptible = false
        let central = Central(host: host, info: ControllerInfo())
        let peer = DeviceAddress(BDAddress("C0:11:22:33:44:55")!, .random)
        #expect(throws: GAPError.connectFailed(peer, .connectionFailedToEstablish)) { try central.connect(to: peer, timeoutMs: 500) }
    }

    @Test("connect timeout sends LE Create Connection Cancel and throws connectTimeout")
    func connectTimeout() {
        let ctl = ScriptedController()
        ctl.when(command: LECreateConnection.opcode, reply: [h4("04 0f 04 00 01 0d 20")])
        ctl.when(h4("01 0e 20 00"), reply: [Ev.complete(HCI.LECreateConnectionCancel.opcode), h4("04 3e 13 01 02 00 00 00 01 55 44 33 22 11 c0 00 00 00 00 00 00 00")])
        let host = HCIHost(transport: ctl)
        host.interruptible = false
        let central = Central(host: host, info: ControllerInfo())
        let peer = DeviceAddress(BDAddress("C0:11:22:33:44:55")!, .random)
        #expect(throws: GAPError.connectTimeout(peer, ms: 30)) { try central.connect(to: peer, timeoutMs: 30) }
        #expect(ctl.sentOpcodes == [0x200D, 0x200E])
    }
}
