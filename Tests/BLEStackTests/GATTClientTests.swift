import Testing
@testable import BLEWire
@testable import BLEATT
@testable import BLEGATT




@Suite("GATT client: service discovery")
struct GATTServiceDiscoveryTests {
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
