import Testing
@testable import BLEWire
@testable import BLEATT
@testable import BLEGATT

private let service = BluetoothUUID("36353433-3231-3039-3837-363534333231")!
private let red = BluetoothUUID("36353433-3231-3039-3837-363534336261")!
private let green = BluetoothUUID("36353433-3231-3039-3837-363534336262")!
private let blue = BluetoothUUID("36353433-3231-3039-3837-363534336263")!

/// "31 32 ... 36" etc.: a UUID's ATT wire form as hex.
private func w(_ u: BluetoothUUID) -> String { Hex.string(u.attWire) }

private func client() -> (BearerFixture, GATTClient) {
    let f = BearerFixture()
    return (f, GATTClient(bearer: f.bearer))
}

@Suite("GATT client: service discovery")
struct GATTServiceDiscoveryTests {
    @Test("GATT/CL/GAD/BV-02-C discover primary service by UUID: Find By Type Value, stops at the first match")
    func byUUID() throws {
        let (f, gatt) = client()
        f.expectATT("06 01 00 ff ff 00 28 \(w(service))", reply: "07 10 00 1f 00 20 00 2f 00")
        let s = try gatt.discoverPrimaryService(uuid: service)
        #expect(s == Service(uuid: service, start: 0x10, end: 0x1F))
        #expect(f.sentATT.count == 1)
        f.verifyScriptDone()
    }

    @Test("discover primary service by 16-bit UUID sends the 2-byte value")
    func byShortUUID() throws {
        let (f, gatt) = client()
        f.expectATT("06 01 00 ff ff 00 28 0f 18", reply: "07 20 00 24 00")
        #expect(try gatt.discoverPrimaryService(uuid: BluetoothUUID(uint16: 0x180F)) == Service(uuid: BluetoothUUID(uint16: 0x180F), start: 0x20, end: 0x24))
        f.verifyScriptDone()
    }

    @Test("discover primary service by UUID: Attribute Not Found means no such service (nil)")
    func byUUIDNotFound() throws {
        let (f, gatt) = client()
        f.expectATT("06 01 00 ff ff 00 28 \(w(service))", reply: "01 06 01 00 0a")
        #expect(try gatt.discoverPrimaryService(uuid: service) == nil)
        f.verifyScriptDone()
    }

    @Test("discover primary service by UUID: other errors are thrown")
    func byUUIDOtherError() {
        let (f, gatt) = client()
        f.expectATT("06 01 00 ff ff 00 28 \(w(service))", reply: "01 06 01 00 05")
        #expect(throws: ATTError.errorResponse(request: .findByTypeValueRequest, handle: 1, code: .insufficientAuthentication)) {
            try gatt.discoverPrimaryService(uuid: service)
        }
    }

    @Test("discover primary service by UUID: a group that ends before it starts is malformed")
    func byUUIDBadGroup() {
        let (f, gatt) = client()
        f.expectATT("06 01 00 ff ff 00 28 \(w(service))", reply: "07 10 00 0f 00")
        #expect(throws: GATTError.self) { try gatt.discoverPrimaryService(uuid: service) }
    }

    @Test("GATT/CL/GAD/BV-01-C discover all primary services over several Read By Group Type responses ending in Attribute Not Found")
    func allServices() throws {
        let (f, gatt) = client()
        f.expectATT("10 01 00 ff ff 00 28", reply: "11 06 01 00 05 00 00 18 06 00 09 00 01 18")
        f.expectATT("10 0a 00 ff ff 00 28", reply: "11 14 10 00 1f 00 \(w(service))")
        f.expectATT("10 20 00 ff ff 00 28", reply: "01 10 20 00 0a")
        let all = try gatt.discoverPrimaryServices()
        #expect(all == [Service(uuid: BluetoothUUID(uint16: 0x1800), start: 1, end: 5),
                        Service(uuid: BluetoothUUID(uint16: 0x1801), start: 6, end: 9),
                        Service(uuid: service, start: 0x10, end: 0x1F)])
        f.verifyScriptDone()
    }

    @Test("discover all primary services stops without another request when a group ends at 0xFFFF")
    func allServicesEndAtFFFF() throws {
        let (f, gatt) = client()
        f.expectATT("10 01 00 ff ff 00 28", reply: "11 06 01 00 ff ff 00 18")
        #expect(try gatt.discoverPrimaryServices() == [Service(uuid: BluetoothUUID(uint16: 0x1800), start: 1, end: 0xFFFF)])
        f.verifyScriptDone()
    }

    @Test("a server repeating the same services is caught, not looped on")
    func allServicesRepeat() {
        let (f, gatt) = client()
        f.expectATT("10 01 00 ff ff 00 28", reply: "11 06 01 00 05 00 00 18")
        f.expectATT("10 06 00 ff ff 00 28", reply: "11 06 01 00 05 00 00 18")
        #expect(throws: GATTError.self) { try gatt.discoverPrimaryServices() }
        f.verifyScriptDone()
    }

    @Test("a service UUID that is neither 2 nor 16 bytes is malformed")
    func allServicesBadUUID() {
        let (f, gatt) = client()
        f.expectATT("10 01 00 ff ff 00 28", reply: "11 08 01 00 05 00 78 56 34 12")
        #expect(throws: GATTError.malformed(procedure: "primary service discovery", reason: "service UUID of 4 bytes")) {
            try gatt.discoverPrimaryServices()
        }
    }
}

@Suite("GATT client: characteristic discovery")
struct GATTCharacteristicDiscoveryTests {
    static let svc = Service(uuid: service, start: 0x10, end: 0x1F)

    /// One 128-bit declaration per response (21-byte entries fill the default MTU).
    static func script(_ f: BearerFixture, steps: Int = 4) {
        // Each request starts after the last declaration seen (4.6.1), i.e. at its value handle.
        let rows = [("10", "11 00 0a 12 00 \(w(red))"), ("12", "13 00 0a 14 00 \(w(green))"), ("14", "15 00 0a 16 00 \(w(blue))")]
        for (start, entry) in rows.prefix(steps) { f.expectATT("08 \(start) 00 1f 00 03 28", reply: "09 15 \(entry)") }
        if steps > 3 { f.expectATT("08 16 00 1f 00 03 28", reply: "01 08 16 00 0a") }
    }

    @Test("GATT/CL/GAD/BV-04-C discover characteristics across several Read By Type responses")
    func all() throws {
        let (f, gatt) = client()
        Self.script(f)
        let chars = try gatt.discoverCharacteristics(of: Self.svc)
        #expect(chars.map(\.uuid) == [red, green, blue])
        #expect(chars.map(\.declarationHandle) == [0x11, 0x13, 0x15])
        #expect(chars.map(\.valueHandle) == [0x12, 0x14, 0x16])
        #expect(chars.map(\.end) == [0x12, 0x14, 0x1F])
        #expect(chars.allSatisfy { $0.properties == [.read, .write] })
        f.verifyScriptDone()
    }

    @Test("discovery stops early when `until` is satisfied: no further request is sent")
    func earlyStop() throws {
        let (f, gatt) = client()
        Self.script(f, steps: 2)
        var calls = 0
        let chars = try gatt.discoverCharacteristics(of: Self.svc) { found in
            calls += 1
            return found.contains { $0.uuid == green }
        }
        #expect(chars.map(\.uuid) == [red, green])
        #expect(calls == 2)
        #expect(f.sentATT.count == 2)
        f.verifyScriptDone()
    }

    @Test("16-bit declarations, several per response; the last value handle at the service end stops discovery")
    func severalPerResponse() throws {
        let (f, gatt) = client()
        f.expectATT("08 01 00 05 00 03 28", reply: "09 07 02 00 02 03 00 00 2a 04 00 02 05 00 01 2a")
        let chars = try gatt.discoverCharacteristics(of: Service(uuid: BluetoothUUID(uint16: 0x1800), start: 1, end: 5))
        #expect(chars == [Characteristic(declarationHandle: 2, properties: .read, valueHandle: 3, uuid: BluetoothUUID(uint16: 0x2A00), end: 3),
                          Characteristic(declarationHandle: 4, properties: .read, valueHandle: 5, uuid: BluetoothUUID(uint16: 0x2A01), end: 5)])
        f.verifyScriptDone()
    }

    @Test("a server whose responses do not advance is caught")
    func notAdvancing() {
        let (f, gatt) = client()
        f.expectATT("08 01 00 10 00 03 28", reply: "09 07 02 00 0a 03 00 00 2a")
        f.expectATT("08 03 00 10 00 03 28", reply: "09 07 02 00 0a 03 00 00 2a")
        #expect(throws: GATTError.malformed(procedure: "characteristic discovery", reason: "declaration handle 0x0002 outside 0x0003-0x0010")) {
            try gatt.discoverCharacteristics(of: Service(uuid: service, start: 1, end: 0x10))
        }
        f.verifyScriptDone()
    }

    @Test("a declaration whose value handle is not after it is malformed")
    func badDeclaration() {
        let (f, gatt) = client()
        f.expectATT("08 01 00 10 00 03 28", reply: "09 07 03 00 0a 03 00 00 2a")
        #expect(throws: GATTError.self) { try gatt.discoverCharacteristics(of: Service(uuid: service, start: 1, end: 0x10)) }
    }

    @Test("characteristic declarations decode, and refuse bad UUID widths and value handles")
    func declarations() throws {
        let c = try Characteristic.decodeDeclaration(handle: 0x11, value: hex("1a 12 00 \(w(red))"))
        #expect(c.properties == [.read, .write, .notify])
        #expect(c.properties.description == "read,write,notify")
        #expect(c.valueHandle == 0x12 && c.uuid == red)
        #expect(throws: WireError.invalid(field: "Characteristic UUID", reason: "4 bytes (must be 2 or 16)")) {
            try Characteristic.decodeDeclaration(handle: 0x11, value: hex("02 12 00 78 56 34 12"))
        }
        #expect(throws: WireError.self) { try Characteristic.decodeDeclaration(handle: 0x11, value: hex("02 11 00 00 2a")) }
        for p in prefixes(hex("02 12 00 00 2a")) {
            #expect(throws: WireError.self) { try Characteristic.decodeDeclaration(handle: 0x11, value: p) }
        }
    }
}

@Suite("GATT client: descriptors, reads, writes, subscriptions")
struct GATTProcedureTests {
    static let char = Characteristic(declarationHandle: 0x11, properties: [.read, .notify], valueHandle: 0x12, uuid: red, end: 0x1F)

    @Test("GATT/CL/GAD/BV-06-C descriptors via Find Information stop at the next characteristic declaration (0x2803)")
    func descriptorsStopAtDeclaration() throws {
        let (f, gatt) = client()
        f.expectATT("04 13 00 1f 00", reply: "05 01 13 00 02 29 14 00 03 28")
        let ds = try gatt.discoverDescriptors(of: Self.char)
        #expect(ds == [Descriptor(handle: 0x13, uuid: GATTUUID.clientCharacteristicConfiguration)])
        f.verifyScriptDone()
    }

    @Test("descriptors across several responses, ending in Attribute Not Found")
    func descriptorsSeveral() throws {
        let (f, gatt) = client()
        f.expectATT("04 13 00 1f 00", reply: "05 01 13 00 02 29")
        f.expectATT("04 14 00 1f 00", reply: "05 01 14 00 01 29")
        f.expectATT("04 15 00 1f 00", reply: "01 04 15 00 0a")
        let ds = try gatt.discoverDescriptors(of: Self.char)
        #expect(ds.map(\.handle) == [0x13, 0x14])
        #expect(ds.map(\.uuid) == [GATTUUID.clientCharacteristicConfiguration, GATTUUID.userDescription])
        f.verifyScriptDone()
    }

    @Test("a characteristic whose value is its last handle has no descriptors: no request")
    func noDescriptorRange() throws {
        let (f, gatt) = client()
        let c = Characteristic(declarationHandle: 0x11, properties: .read, valueHandle: 0x12, uuid: red, end: 0x12)
        #expect(try gatt.discoverDescriptors(of: c) == [])
        #expect(f.ctl.sent.isEmpty)
    }

    @Test("descriptor discovery that stops advancing throws discoveryStalled")
    func descriptorsStalled() {
        let (f, gatt) = client()
        f.expectATT("04 13 00 1f 00", reply: "05 01 13 00 01 29")
        f.expectATT("04 14 00 1f 00", reply: "05 01 13 00 01 29")
        #expect(throws: GATTError.discoveryStalled(procedure: "descriptor discovery", handle: 0x14)) {
            try gatt.discoverDescriptors(of: Self.char)
        }
        f.verifyScriptDone()
    }

    @Test("GATT/CL/GAR/BV-01-C read characteristic value")
    func read() throws {
        let (f, gatt) = client()
        f.expectATT("0a 12 00", reply: "0b ff")
        #expect(try gatt.read(0x12) == [0xFF])
        f.verifyScriptDone()
    }

    @Test("GATT/CL/GAR/BV-03-C read using characteristic UUID; Attribute Not Found is nil")
    func readByUUID() throws {
        let (f, gatt) = client()
        f.expectATT("08 01 00 ff ff 00 2a", reply: "09 05 03 00 4c 45 44")
        f.expectATT("08 01 00 ff ff 01 2a", reply: "01 08 01 00 0a")
        #expect(try gatt.read(type: GATTUUID.deviceName) == HandleValue(handle: 3, value: hex("4c 45 44")))
        #expect(try gatt.read(type: GATTUUID.appearance) == nil)
        f.verifyScriptDone()
    }

    @Test("GATT/CL/GAR/BV-04-C read long: Read, then Read Blob at each offset until a short part")
    func readLong() throws {
        let (f, gatt) = client()
        let value = (0..<49).map { UInt8($0) }
        f.expectATT("0a 12 00", reply: "0b " + Hex.string(value[0..<22]))
        f.expectATT("0c 12 00 16 00", reply: "0d " + Hex.string(value[22..<44]))
        f.expectATT("0c 12 00 2c 00", reply: "0d " + Hex.string(value[44...]))
        #expect(try gatt.readLong(0x12) == value)
        f.verifyScriptDone()
    }

    @Test("read long: Attribute Not Long on the first blob ends the read with what was read")
    func readLongNotLong() throws {
        let (f, gatt) = client()
        let value = [UInt8](repeating: 0x41, count: 22)
        f.expectATT("0a 12 00", reply: "0b " + Hex.string(value))
        f.expectATT("0c 12 00 16 00", reply: "01 0c 12 00 0b")
        #expect(try gatt.readLong(0x12) == value)
        f.verifyScriptDone()
    }

    @Test("read long: a short first read needs no Read Blob")
    func readLongShort() throws {
        let (f, gatt) = client()
        f.expectATT("0a 12 00", reply: "0b 01 02 03")
        #expect(try gatt.readLong(0x12) == hex("01 02 03"))
        f.verifyScriptDone()
    }

    @Test("a read that is not permitted throws errorResponse naming handle and code")
    func readNotPermitted() {
        let (f, gatt) = client()
        f.expectATT("0a 12 00", reply: "01 0a 12 00 02")
        #expect(throws: ATTError.errorResponse(request: .readRequest, handle: 0x12, code: .readNotPermitted)) { try gatt.read(0x12) }
    }

    @Test("GATT/CL/GAW/BV-03-C write characteristic value with a Write Request")
    func writeRequest() throws {
        let (f, gatt) = client()
        f.expectATT("12 12 00 ff", reply: "13")
        try gatt.write(0x12, value: [0xFF], withResponse: true)
        f.verifyScriptDone()
    }

    @Test("GATT/CL/GAW/BV-01-C write without response sends a Write Command and waits for nothing")
    func writeWithoutResponse() throws {
        let (f, gatt) = client()
        f.expectATT("52 12 00 ff")
        try gatt.write(0x12, value: [0xFF], withResponse: false)
        #expect(f.bearer.commandsSent == 1)
        f.verifyScriptDone()
    }

    @Test("Write Not Permitted surfaces as ATTError.errorResponse naming the handle and code")
    func writeNotPermitted() {
        let (f, gatt) = client()
        f.expectATT("12 12 00 ff", reply: "01 12 12 00 03")
        #expect(throws: ATTError.errorResponse(request: .writeRequest, handle: 0x12, code: .writeNotPermitted)) {
            try gatt.write(0x12, value: [0xFF], withResponse: true)
        }
        f.verifyScriptDone()
    }

    @Test("subscribe finds the CCCD and writes 01 00 to it")
    func subscribe() throws {
        let (f, gatt) = client()
        f.expectATT("04 13 00 1f 00", reply: "05 01 13 00 02 29 14 00 03 28")
        f.expectATT("12 13 00 01 00", reply: "13")
        try gatt.subscribe(Self.char)
        f.verifyScriptDone()
    }

    @Test("subscribe to indications writes 02 00; unsubscribe writes 00 00 (known descriptors: no discovery)")
    func indicationsAndUnsubscribe() throws {
        let (f, gatt) = client()
        let ds = [Descriptor(handle: 0x13, uuid: GATTUUID.clientCharacteristicConfiguration)]
        f.expectATT("12 13 00 02 00", reply: "13")
        f.expectATT("12 13 00 00 00", reply: "13")
        try gatt.subscribe(Self.char, indications: true, descriptors: ds)
        try gatt.unsubscribe(Self.char, descriptors: ds)
        f.verifyScriptDone()
    }

    @Test("subscribe without a CCCD throws noClientConfiguration")
    func subscribeNoCCCD() {
        let (f, gatt) = client()
        f.expectATT("04 13 00 1f 00", reply: "05 01 13 00 01 29 14 00 03 28")
        #expect(throws: GATTError.noClientConfiguration(red)) { try gatt.subscribe(Self.char) }
        f.verifyScriptDone()
    }

    @Test("GATT names and errors print")
    func names() {
        #expect(GATTUUID.name(BluetoothUUID(uint16: 0x2902)) == "Client Characteristic Configuration")
        #expect(GATTUUID.name(red) == nil)
        #expect(GATTError.discoveryStalled(procedure: "descriptor discovery", handle: 0x14).description
                == "descriptor discovery stopped advancing at handle 0x0014 (server bug); discovery abandoned")
        #expect(GATTError.notPermitted(red, operation: "write", properties: []).description.hasSuffix("(its properties: none)"))
    }
}
