import Testing
@testable import BLEWire
@testable import BLEATT
@testable import BLEGATT

// The client-role cases of the Bluetooth SIG GATT test suite (GATT.TS) that
// apply to attled's GATT client, as byte scripts: the server side is scripted
// PDU by PDU, and each test checks both the exact PDUs attled sends and what
// its API returns or throws. Test names begin with the case they mirror, the
// way BlueZ's unit/test-gatt.c names its cases. The table in PROTOCOL.md
// ("GATT client conformance") lists every case, including the ones that do
// not apply to an LE-only client and why.
//
// ATT_MTU is the default 23 throughout unless a test says otherwise, so a
// Read Response carries 22 value bytes, a Read By Type entry 19, and a
// Prepare Write part 18.

private let pts128 = BluetoothUUID("0000a00c-0000-0000-0123-456789abcdef")!
private let pts128b = BluetoothUUID("0000a00d-0000-0000-0123-456789abcdef")!

// Error codes attled does not name (ATTErrorCode is open: any byte passes through).
private let insufficientAuthorization = ATTErrorCode(rawValue: 0x08)
private let prepareQueueFull = ATTErrorCode(rawValue: 0x09)
private let encryptionKeySizeTooShort = ATTErrorCode(rawValue: 0x0C)
private let applicationError = ATTErrorCode(rawValue: 0x80)


/// 16-bit UUID shorthand.
private func u16(_ v: UInt16) -> BluetoothUUID { BluetoothUUID(uint16: v) }

/// `count` bytes counting up from `from` (wrapping), so every part of a long value differs.
private func pattern(_ count: Int, from: Int = 0) -> [UInt8] { (0..<count).map { UInt8(truncatingIfNeeded: from + $0) } }

/// A little-endian u16 as hex ("12 00").
private func le(_ v: UInt16) -> String { Hex.string([UInt8(v & 0xFF), UInt8(v >> 8)]) }


// MARK: - Discovery (GATT.TS 4.5)

@Suite("GATT.TS client: discovery (GAD)")
struct GATTConformanceDiscoveryTests {
    @Test("GATT/CL/GAD/BV-01-C discover all primary services: 16-bit groups, then 128-bit in a separate response, ending in Attribute Not Found")
    func allPrimaryServices() throws {
        let (f, gatt) = client()
        f.expectATT("10 01 00 ff ff 00 28", reply: "11 06 01 00 05 00 00 18 06 00 09 00 01 18")
        f.expectATT("10 0a 00 ff ff 00 28", reply: "11 14 10 00 1f 00 \(w(service))")
        f.expectATT("10 20 00 ff ff 00 28", reply: "01 10 20 00 0a")
        let all = try gatt.discoverPrimaryServices()
        #expect(all == [Service(uuid: u16(0x1800), start: 1, end: 5),
                        Service(uuid: u16(0x1801), start: 6, end: 9),
                        Service(uuid: service, start: 0x10, end: 0x1F)])
        f.verifyScriptDone()
    }

    @Test("GATT/CL/GAD/BV-01-C the last service ends at 0xFFFF: discovery stops without a request past 0xFFFF")
    func allPrimaryServicesEndAtFFFF() throws {
        let (f, gatt) = client()
        f.expectATT("10 01 00 ff ff 00 28", reply: "11 06 01 00 05 00 00 18")
        f.expectATT("10 06 00 ff ff 00 28", reply: "11 14 06 00 ff ff \(w(pts128))")
        #expect(try gatt.discoverPrimaryServices() == [Service(uuid: u16(0x1800), start: 1, end: 5),
                                                        Service(uuid: pts128, start: 6, end: 0xFFFF)])
        #expect(f.sentATT.count == 2)
        f.verifyScriptDone()
    }

    @Test("GATT/CL/GAD/BV-01-C one service spanning the whole range ends discovery after one request")
    func allPrimaryServicesOneGroup() throws {
        let (f, gatt) = client()
        f.expectATT("10 01 00 ff ff 00 28", reply: "11 06 01 00 ff ff 00 18")
        #expect(try gatt.discoverPrimaryServices() == [Service(uuid: u16(0x1800), start: 1, end: 0xFFFF)])
        f.verifyScriptDone()
    }

    @Test("GATT/CL/GAD/BV-02-C discover primary service by UUID: Find By Type Value, stops at the first match")
    func primaryServiceByUUIDFirst() throws {
        let (f, gatt) = client()
        f.expectATT("06 01 00 ff ff 00 28 \(w(service))", reply: "07 10 00 1f 00 20 00 2f 00")
        let s = try gatt.discoverPrimaryService(uuid: service)
        #expect(s == Service(uuid: service, start: 0x10, end: 0x1F))
        #expect(f.sentATT.count == 1)
        f.verifyScriptDone()
    }

    @Test("GATT/CL/GAD/BV-02-C every instance of a 16-bit service UUID: Find By Type Value after each group until Attribute Not Found")
    func primaryServicesBy16BitUUID() throws {
        let (f, gatt) = client()
        f.expectATT("06 01 00 ff ff 00 28 0d 18", reply: "07 01 00 07 00")
        f.expectATT("06 08 00 ff ff 00 28 0d 18", reply: "07 20 00 27 00 30 00 3f 00")
        f.expectATT("06 40 00 ff ff 00 28 0d 18", reply: "01 06 40 00 0a")
        #expect(try gatt.discoverPrimaryServices(uuid: u16(0x180D)) == [
            Service(uuid: u16(0x180D), start: 0x01, end: 0x07),
            Service(uuid: u16(0x180D), start: 0x20, end: 0x27),
            Service(uuid: u16(0x180D), start: 0x30, end: 0x3F),
        ])
        f.verifyScriptDone()
    }

    @Test("GATT/CL/GAD/BV-02-C every instance of a 128-bit service UUID; a group ending at 0xFFFF ends the search")
    func primaryServicesBy128BitUUID() throws {
        let (f, gatt) = client()
        f.expectATT("06 01 00 ff ff 00 28 \(w(pts128))", reply: "07 10 00 17 00")
        f.expectATT("06 18 00 ff ff 00 28 \(w(pts128))", reply: "07 f0 ff ff ff")
        #expect(try gatt.discoverPrimaryServices(uuid: pts128) == [Service(uuid: pts128, start: 0x10, end: 0x17),
                                                                   Service(uuid: pts128, start: 0xFFF0, end: 0xFFFF)])
        f.verifyScriptDone()
    }

    @Test("GATT/CL/GAD/BV-02-C no instance: Attribute Not Found on the first request is an empty result, not an error")
    func primaryServicesByUUIDNone() throws {
        let (f, gatt) = client()
        f.expectATT("06 01 00 ff ff 00 28 0d 18", reply: "01 06 01 00 0a")
        #expect(try gatt.discoverPrimaryServices(uuid: u16(0x180D)) == [])
        f.verifyScriptDone()
    }

    @Test("GATT/CL/GAD/BV-03-C find included services: a 16-bit include, then 128-bit includes whose UUIDs are read from the included declarations")
    func includedServices() throws {
        let (f, gatt) = client()
        let svc = Service(uuid: u16(0x180F), start: 0x01, end: 0x0F)
        f.expectATT("08 01 00 0f 00 02 28", reply: "09 08 02 00 10 00 1f 00 0f 18")
        f.expectATT("08 03 00 0f 00 02 28", reply: "09 06 03 00 20 00 2f 00 04 00 30 00 3f 00")
        f.expectATT("0a 20 00", reply: "0b \(w(pts128))")
        f.expectATT("0a 30 00", reply: "0b \(w(pts128b))")
        f.expectATT("08 05 00 0f 00 02 28", reply: "01 08 05 00 0a")
        #expect(try gatt.findIncludedServices(of: svc) == [
            IncludedService(handle: 0x02, uuid: u16(0x180F), start: 0x10, end: 0x1F),
            IncludedService(handle: 0x03, uuid: pts128, start: 0x20, end: 0x2F),
            IncludedService(handle: 0x04, uuid: pts128b, start: 0x30, end: 0x3F),
        ])
        f.verifyScriptDone()
    }

    @Test("GATT/CL/GAD/BV-03-C a service without includes: one Read By Type, Attribute Not Found, no includes")
    func includedServicesNone() throws {
        let (f, gatt) = client()
        f.expectATT("08 10 00 1f 00 02 28", reply: "01 08 10 00 0a")
        #expect(try gatt.findIncludedServices(of: Service(uuid: service, start: 0x10, end: 0x1F)) == [])
        f.verifyScriptDone()
    }

    @Test("GATT/CL/GAD/BV-04-C discover all characteristics: a 16-bit and a 128-bit declaration in separate responses, each next request after the last declaration")
    func allCharacteristicsMixed() throws {
        let (f, gatt) = client()
        f.expectATT("08 10 00 20 00 03 28", reply: "09 07 11 00 02 12 00 25 2a")
        f.expectATT("08 12 00 20 00 03 28", reply: "09 15 13 00 02 14 00 \(w(pts128))")
        f.expectATT("08 14 00 20 00 03 28", reply: "01 08 14 00 0a")
        let chars = try gatt.discoverCharacteristics(of: Service(uuid: service, start: 0x10, end: 0x20))
        #expect(chars == [Characteristic(declarationHandle: 0x11, properties: .read, valueHandle: 0x12, uuid: u16(0x2A25), end: 0x12),
                          Characteristic(declarationHandle: 0x13, properties: .read, valueHandle: 0x14, uuid: pts128, end: 0x20)])
        f.verifyScriptDone()
    }

    @Test("GATT/CL/GAD/BV-04-C discover all characteristics across several Read By Type responses")
    func allCharacteristicsSeveral() throws {
        let (f, gatt) = client()
        // One 128-bit declaration per response (21-byte entries fill the default MTU).
        f.expectATT("08 10 00 1f 00 03 28", reply: "09 15 11 00 0a 12 00 \(w(red))")
        f.expectATT("08 12 00 1f 00 03 28", reply: "09 15 13 00 0a 14 00 \(w(green))")
        f.expectATT("08 14 00 1f 00 03 28", reply: "09 15 15 00 0a 16 00 \(w(blue))")
        f.expectATT("08 16 00 1f 00 03 28", reply: "01 08 16 00 0a")
        let chars = try gatt.discoverCharacteristics(of: Service(uuid: service, start: 0x10, end: 0x1F))
        #expect(chars.map(\.uuid) == [red, green, blue])
        #expect(chars.map(\.declarationHandle) == [0x11, 0x13, 0x15])
        #expect(chars.map(\.valueHandle) == [0x12, 0x14, 0x16])
        #expect(chars.map(\.end) == [0x12, 0x14, 0x1F])
        #expect(chars.allSatisfy { $0.properties == [.read, .write] })
        f.verifyScriptDone()
    }

    @Test("GATT/CL/GAD/BV-05-C discover characteristics by UUID: every declaration of the service is read, the matches returned")
    func characteristicsByUUID() throws {
        let (f, gatt) = client()
        f.expectATT("08 10 00 20 00 03 28", reply: "09 07 11 00 02 12 00 25 2a 13 00 08 14 00 00 2a")
        f.expectATT("08 14 00 20 00 03 28", reply: "09 15 15 00 02 16 00 \(w(pts128))")
        f.expectATT("08 16 00 20 00 03 28", reply: "09 07 17 00 0a 18 00 25 2a")
        f.expectATT("08 18 00 20 00 03 28", reply: "01 08 18 00 0a")
        let svc = Service(uuid: service, start: 0x10, end: 0x20)
        let found = try gatt.host.wait(gatt.startDiscoverCharacteristics(of: svc, uuid: u16(0x2A25)))
        #expect(found.map(\.valueHandle) == [0x12, 0x18])
        #expect(found.map(\.properties) == [.read, [.read, .write]])
        f.verifyScriptDone()
    }

    @Test("GATT/CL/GAD/BV-05-C discover characteristics by 128-bit UUID; none found is an empty result")
    func characteristicsBy128BitUUID() throws {
        let (f, gatt) = client()
        f.expectATT("08 10 00 20 00 03 28", reply: "09 15 13 00 02 14 00 \(w(pts128))")
        f.expectATT("08 14 00 20 00 03 28", reply: "01 08 14 00 0a")
        f.expectATT("08 10 00 20 00 03 28", reply: "09 15 13 00 02 14 00 \(w(pts128))")
        f.expectATT("08 14 00 20 00 03 28", reply: "01 08 14 00 0a")
        let svc = Service(uuid: service, start: 0x10, end: 0x20)
        #expect(try gatt.host.wait(gatt.startDiscoverCharacteristics(of: svc, uuid: pts128)).map(\.valueHandle) == [0x14])
        #expect(try gatt.host.wait(gatt.startDiscoverCharacteristics(of: svc, uuid: pts128b)) == [])
        f.verifyScriptDone()
    }

    @Test("GATT/CL/GAD/BV-06-C discover all descriptors: Find Information up to the characteristic's end and no further")
    func allDescriptors() throws {
        let (f, gatt) = client()
        let c = Characteristic(declarationHandle: 0x11, properties: [.read, .notify], valueHandle: 0x12, uuid: red, end: 0x16)
        f.expectATT("04 13 00 16 00", reply: "05 01 13 00 02 29 14 00 03 29")
        f.expectATT("04 15 00 16 00", reply: "05 01 15 00 04 29 16 00 05 29")
        let ds = try gatt.discoverDescriptors(of: c)
        #expect(ds == [Descriptor(handle: 0x13, uuid: u16(0x2902)), Descriptor(handle: 0x14, uuid: u16(0x2903)),
                       Descriptor(handle: 0x15, uuid: u16(0x2904)), Descriptor(handle: 0x16, uuid: u16(0x2905))])
        f.verifyScriptDone()
    }

    @Test("GATT/CL/GAD/BV-06-C descriptors via Find Information stop at the next characteristic declaration (0x2803)")
    func descriptorsStopAtDeclaration() throws {
        let (f, gatt) = client()
        let c = Characteristic(declarationHandle: 0x11, properties: [.read, .notify], valueHandle: 0x12, uuid: red, end: 0x1F)
        f.expectATT("04 13 00 1f 00", reply: "05 01 13 00 02 29 14 00 03 28")
        #expect(try gatt.discoverDescriptors(of: c) == [Descriptor(handle: 0x13, uuid: GATTUUID.clientCharacteristicConfiguration)])
        f.verifyScriptDone()
    }

    @Test("GATT/CL/GAD/BV-06-C a 128-bit descriptor (Find Information format 2) in its own response")
    func descriptors128() throws {
        let (f, gatt) = client()
        let c = Characteristic(declarationHandle: 0x11, properties: .read, valueHandle: 0x12, uuid: red, end: 0x14)
        f.expectATT("04 13 00 14 00", reply: "05 01 13 00 02 29")
        f.expectATT("04 14 00 14 00", reply: "05 02 14 00 \(w(pts128))")
        #expect(try gatt.discoverDescriptors(of: c) == [Descriptor(handle: 0x13, uuid: u16(0x2902)), Descriptor(handle: 0x14, uuid: pts128)])
        f.verifyScriptDone()
    }
}

// MARK: - Database shapes (issue 14)

@Suite("GATT.TS client: database shapes")
struct GATTConformanceDatabaseTests {
    @Test("GATT/CL/GAD/BV-01-C..BV-06-C whole database: 16- and 128-bit UUIDs, an empty service, characteristics without descriptors at a service's end, the last attribute at 0xFFFF")
    func wholeDatabase() throws {
        let (f, gatt) = client()
        // 0x0001-0x0005 GAP (0x1800): two characteristics, the last one's value the service's last handle.
        // 0x0006-0x0006 GATT (0x1801): empty, its declaration only.
        // 0x0010-0xFFFF pts128: a 128-bit characteristic with a CCCD, and a
        //   16-bit characteristic whose User Description is the last attribute, 0xFFFF.
        f.expectATT("10 01 00 ff ff 00 28", reply: "11 06 01 00 05 00 00 18 06 00 06 00 01 18")
        f.expectATT("10 07 00 ff ff 00 28", reply: "11 14 10 00 ff ff \(w(pts128))")
        // Includes, service by service.
        f.expectATT("08 01 00 05 00 02 28", reply: "01 08 01 00 0a")
        f.expectATT("08 06 00 06 00 02 28", reply: "01 08 06 00 0a")
        f.expectATT("08 10 00 ff ff 02 28", reply: "01 08 10 00 0a")
        // Characteristics of 0x1800: the value at the service end stops discovery; no Find Information for either.
        f.expectATT("08 01 00 05 00 03 28", reply: "09 07 02 00 02 03 00 00 2a 04 00 02 05 00 01 2a")
        // The empty service: one Read By Type over its single handle.
        f.expectATT("08 06 00 06 00 03 28", reply: "01 08 06 00 0a")
        // The 128-bit service: a 128-bit declaration, then a 16-bit one in a separate response.
        f.expectATT("08 10 00 ff ff 03 28", reply: "09 15 11 00 12 12 00 \(w(pts128b))")
        f.expectATT("08 12 00 ff ff 03 28", reply: "09 07 fd ff 02 fe ff 19 2a")
        f.expectATT("08 fe ff ff ff 03 28", reply: "01 08 fe ff 0a")
        f.expectATT("04 13 00 fc ff", reply: "05 01 13 00 02 29")
        f.expectATT("04 14 00 fc ff", reply: "01 04 14 00 0a")
        // The last descriptor is 0xFFFF: no Find Information past it.
        f.expectATT("04 ff ff ff ff", reply: "05 01 ff ff 01 29")

        let db = try gatt.discoverDatabase()
        #expect(db.services.map(\.service) == [Service(uuid: u16(0x1800), start: 0x01, end: 0x05),
                                               Service(uuid: u16(0x1801), start: 0x06, end: 0x06),
                                               Service(uuid: pts128, start: 0x10, end: 0xFFFF)])
        #expect(db.services.allSatisfy { $0.includes.isEmpty })
        #expect(db.services[0].characteristics == [
            .init(characteristic: Characteristic(declarationHandle: 2, properties: .read, valueHandle: 3, uuid: u16(0x2A00), end: 3), descriptors: []),
            .init(characteristic: Characteristic(declarationHandle: 4, properties: .read, valueHandle: 5, uuid: u16(0x2A01), end: 5), descriptors: []),
        ])
        #expect(db.services[1].characteristics.isEmpty)
        #expect(db.services[2].characteristics == [
            .init(characteristic: Characteristic(declarationHandle: 0x11, properties: [.read, .notify], valueHandle: 0x12, uuid: pts128b, end: 0xFFFC),
                  descriptors: [Descriptor(handle: 0x13, uuid: u16(0x2902))]),
            .init(characteristic: Characteristic(declarationHandle: 0xFFFD, properties: .read, valueHandle: 0xFFFE, uuid: u16(0x2A19), end: 0xFFFF),
                  descriptors: [Descriptor(handle: 0xFFFF, uuid: u16(0x2901))]),
        ])
        f.verifyScriptDone()
    }

    @Test("GATT/CL/GAD/BV-03-C whole database: a 128-bit secondary service reached through an include is discovered with its UUID read from its declaration")
    func wholeDatabaseSecondary() throws {
        let (f, gatt) = client()
        f.expectATT("10 01 00 ff ff 00 28", reply: "11 06 01 00 05 00 0f 18")
        f.expectATT("10 06 00 ff ff 00 28", reply: "01 10 06 00 0a")
        f.expectATT("08 01 00 05 00 02 28", reply: "09 06 02 00 10 00 12 00")
        f.expectATT("0a 10 00", reply: "0b \(w(pts128))")
        f.expectATT("08 03 00 05 00 02 28", reply: "01 08 03 00 0a")
        f.expectATT("08 10 00 12 00 02 28", reply: "01 08 10 00 0a")
        f.expectATT("08 01 00 05 00 03 28", reply: "09 07 03 00 12 04 00 19 2a")
        f.expectATT("08 04 00 05 00 03 28", reply: "01 08 04 00 0a")
        f.expectATT("04 05 00 05 00", reply: "05 01 05 00 02 29")
        f.expectATT("08 10 00 12 00 03 28", reply: "09 15 11 00 02 12 00 \(w(pts128b))")
        let db = try gatt.discoverDatabase()
        #expect(db.services.map(\.service) == [Service(uuid: u16(0x180F), start: 0x01, end: 0x05),
                                               Service(uuid: pts128, start: 0x10, end: 0x12, isPrimary: false)])
        #expect(db.services[0].includes == [IncludedService(handle: 0x02, uuid: pts128, start: 0x10, end: 0x12)])
        #expect(db.services[0].characteristics == [
            .init(characteristic: Characteristic(declarationHandle: 3, properties: [.read, .notify], valueHandle: 4, uuid: u16(0x2A19), end: 5),
                  descriptors: [Descriptor(handle: 5, uuid: u16(0x2902))]),
        ])
        #expect(db.services[1].characteristics.map(\.characteristic.uuid) == [pts128b])
        #expect(db.services[1].characteristics.map(\.descriptors) == [[]])
        f.verifyScriptDone()
    }

    @Test("a characteristic whose value is 0xFFFF ends characteristic discovery: no Read By Type past 0xFFFF")
    func characteristicValueAtFFFF() throws {
        let (f, gatt) = client()
        f.expectATT("08 f0 ff ff ff 03 28", reply: "09 07 fe ff 02 ff ff 19 2a")
        let chars = try gatt.discoverCharacteristics(of: Service(uuid: u16(0x180F), start: 0xFFF0, end: 0xFFFF))
        #expect(chars == [Characteristic(declarationHandle: 0xFFFE, properties: .read, valueHandle: 0xFFFF, uuid: u16(0x2A19), end: 0xFFFF)])
        #expect(try gatt.discoverDescriptors(of: chars[0]) == [])
        f.verifyScriptDone()
    }

    @Test("a 16-bit characteristic after 128-bit ones in a service ending at 0xFFFF: discovery continues after the last declaration and ends on Attribute Not Found")
    func mixedAtTop() throws {
        let (f, gatt) = client()
        f.expectATT("08 00 ff ff ff 03 28", reply: "09 15 01 ff 02 02 ff \(w(red))")
        f.expectATT("08 02 ff ff ff 03 28", reply: "09 15 03 ff 02 04 ff \(w(green))")
        f.expectATT("08 04 ff ff ff 03 28", reply: "09 07 05 ff 02 06 ff 00 2a")
        f.expectATT("08 06 ff ff ff 03 28", reply: "01 08 06 ff 0a")
        let chars = try gatt.discoverCharacteristics(of: Service(uuid: service, start: 0xFF00, end: 0xFFFF))
        #expect(chars.map(\.uuid) == [red, green, u16(0x2A00)])
        #expect(chars.map(\.end) == [0xFF02, 0xFF04, 0xFFFF])
        f.verifyScriptDone()
    }
}

// MARK: - Reads (GATT.TS 4.6)

/// Reads `handle` and expects the Error Response `code` to surface as a typed ATTError.
private func expectReadError(_ code: ATTErrorCode, handle: UInt16 = 0x12, long: Bool = false, sourceLocation: SourceLocation = #_sourceLocation) {
    let (f, gatt) = client()
    f.expectATT("0a \(le(handle))", reply: "01 0a \(le(handle)) \(Hex.string([code.rawValue]))", sourceLocation: sourceLocation)
    #expect(throws: ATTError.errorResponse(request: .readRequest, handle: handle, code: code), sourceLocation: sourceLocation) {
        if long { _ = try gatt.readLong(handle) } else { _ = try gatt.read(handle) }
    }
    f.verifyScriptDone(sourceLocation: sourceLocation)
}

/// Read Using Characteristic UUID (0x2A0D over the whole range) answered by Error Response `code`.
private func expectReadByTypeError(_ code: ATTErrorCode, sourceLocation: SourceLocation = #_sourceLocation) {
    let (f, gatt) = client()
    f.expectATT("08 01 00 ff ff 0d 2a", reply: "01 08 0b 00 \(Hex.string([code.rawValue]))", sourceLocation: sourceLocation)
    #expect(throws: ATTError.errorResponse(request: .readByTypeRequest, handle: 0x0B, code: code), sourceLocation: sourceLocation) {
        _ = try gatt.readUsingCharacteristicUUID(u16(0x2A0D))
    }
    f.verifyScriptDone(sourceLocation: sourceLocation)
}

@Suite("GATT.TS client: reads (GAR)")
struct GATTConformanceReadTests {
    @Test("GATT/CL/GAR/BV-01-C read characteristic value")
    func read() throws {
        let (f, gatt) = client()
        f.expectATT("0a 03 00", reply: "0b 01 02 03")
        #expect(try gatt.read(0x03) == hex("01 02 03"))
        f.verifyScriptDone()
    }

    @Test("GATT/CL/GAR/BV-01-C an empty value and a full one (ATT_MTU - 1 bytes) read as they are")
    func readEmptyAndFull() throws {
        let (f, gatt) = client()
        f.expectATT("0a 03 00", reply: "0b")
        f.expectATT("0a 05 00", reply: "0b " + Hex.string(pattern(22)))
        #expect(try gatt.read(0x03) == [])
        #expect(try gatt.read(0x05) == pattern(22))
        f.verifyScriptDone()
    }

    @Test("GATT/CL/GAR/BI-01-C read characteristic value: Invalid Handle")
    func readInvalidHandle() { expectReadError(.invalidHandle, handle: 0x0000) }

    @Test("GATT/CL/GAR/BI-02-C read characteristic value: Read Not Permitted")
    func readNotPermitted() { expectReadError(.readNotPermitted) }

    @Test("GATT/CL/GAR/BI-03-C read characteristic value: Insufficient Authorization")
    func readAuthorization() { expectReadError(insufficientAuthorization) }

    @Test("GATT/CL/GAR/BI-04-C read characteristic value: Insufficient Authentication")
    func readAuthentication() { expectReadError(.insufficientAuthentication) }

    @Test("GATT/CL/GAR/BI-05-C read characteristic value: Insufficient Encryption Key Size")
    func readKeySize() { expectReadError(encryptionKeySizeTooShort) }

    @Test("GATT/CL/GAR/BI-35-C read characteristic value: an Application Error (invalid transport access over LE) surfaces as its code")
    func readInvalidTransport() { expectReadError(applicationError) }

    @Test("GATT/CL/GAR/BV-03-C read using characteristic UUID (16-bit): Read By Type after the last handle until Attribute Not Found")
    func readUsingUUID16() throws {
        let (f, gatt) = client()
        f.expectATT("08 01 00 ff ff 0d 2a", reply: "09 05 0a 00 01 02 03")
        f.expectATT("08 0b 00 ff ff 0d 2a", reply: "01 08 0b 00 0a")
        #expect(try gatt.readUsingCharacteristicUUID(u16(0x2A0D)) == [HandleValue(handle: 0x0A, value: hex("01 02 03"))])
        f.verifyScriptDone()
    }

    @Test("GATT/CL/GAR/BV-03-C read using characteristic UUID (128-bit), several instances over two responses")
    func readUsingUUID128() throws {
        let (f, gatt) = client()
        f.expectATT("08 01 00 ff ff \(w(pts128))", reply: "09 04 0a 00 01 02 0c 00 03 04")
        f.expectATT("08 0d 00 ff ff \(w(pts128))", reply: "09 04 20 00 05 06")
        f.expectATT("08 21 00 ff ff \(w(pts128))", reply: "01 08 21 00 0a")
        #expect(try gatt.readUsingCharacteristicUUID(pts128) == [HandleValue(handle: 0x0A, value: hex("01 02")),
                                                                 HandleValue(handle: 0x0C, value: hex("03 04")),
                                                                 HandleValue(handle: 0x20, value: hex("05 06"))])
        f.verifyScriptDone()
    }

    @Test("GATT/CL/GAR/BV-03-C a value that fills its Read By Type entry (ATT_MTU - 4 bytes) is read to its end with Read Blob")
    func readUsingUUIDLongValue() throws {
        let (f, gatt) = client()
        let value = pattern(30)
        f.expectATT("08 01 00 ff ff 0d 2a", reply: "09 15 0a 00 " + Hex.string(value[0..<19]))
        f.expectATT("0c 0a 00 13 00", reply: "0d " + Hex.string(value[19...]))
        f.expectATT("08 0b 00 ff ff 0d 2a", reply: "01 08 0b 00 0a")
        #expect(try gatt.readUsingCharacteristicUUID(u16(0x2A0D)) == [HandleValue(handle: 0x0A, value: value)])
        f.verifyScriptDone()
    }

    @Test("GATT/CL/GAR/BV-03-C the single-value form: the first value, Attribute Not Found is nil")
    func readUsingUUIDFirst() throws {
        let (f, gatt) = client()
        f.expectATT("08 01 00 ff ff 00 2a", reply: "09 05 03 00 4c 45 44")
        f.expectATT("08 01 00 ff ff 01 2a", reply: "01 08 01 00 0a")
        #expect(try gatt.read(type: GATTUUID.deviceName) == HandleValue(handle: 3, value: hex("4c 45 44")))
        #expect(try gatt.read(type: GATTUUID.appearance) == nil)
        f.verifyScriptDone()
    }

    @Test("GATT/CL/GAR/BI-06-C read using characteristic UUID: Read Not Permitted")
    func readUsingUUIDNotPermitted() { expectReadByTypeError(.readNotPermitted) }

    @Test("GATT/CL/GAR/BI-07-C read using characteristic UUID: Attribute Not Found is an empty result")
    func readUsingUUIDNotFound() throws {
        let (f, gatt) = client()
        f.expectATT("08 01 00 ff ff 0d 2a", reply: "01 08 01 00 0a")
        #expect(try gatt.readUsingCharacteristicUUID(u16(0x2A0D)) == [])
        f.verifyScriptDone()
    }

    @Test("GATT/CL/GAR/BI-09-C read using characteristic UUID: Insufficient Authorization")
    func readUsingUUIDAuthorization() { expectReadByTypeError(insufficientAuthorization) }

    @Test("GATT/CL/GAR/BI-10-C read using characteristic UUID: Insufficient Authentication")
    func readUsingUUIDAuthentication() { expectReadByTypeError(.insufficientAuthentication) }

    @Test("GATT/CL/GAR/BI-11-C read using characteristic UUID: Insufficient Encryption Key Size")
    func readUsingUUIDKeySize() { expectReadByTypeError(encryptionKeySizeTooShort) }

    @Test("GATT/CL/GAR/BV-04-C read long, step 1: m*(ATT_MTU-1) + n bytes, Read Blob at each offset until a short part")
    func readLongStep1() throws {
        let (f, gatt) = client()
        let value = pattern(49)
        f.expectATT("0a 12 00", reply: "0b " + Hex.string(value[0..<22]))
        f.expectATT("0c 12 00 16 00", reply: "0d " + Hex.string(value[22..<44]))
        f.expectATT("0c 12 00 2c 00", reply: "0d " + Hex.string(value[44...]))
        #expect(try gatt.readLong(0x12) == value)
        f.verifyScriptDone()
    }

    @Test("GATT/CL/GAR/BV-04-C read long, step 2: m*(ATT_MTU-1) bytes end with an empty Read Blob Response")
    func readLongStep2() throws {
        let (f, gatt) = client()
        let value = pattern(44)
        f.expectATT("0a 12 00", reply: "0b " + Hex.string(value[0..<22]))
        f.expectATT("0c 12 00 16 00", reply: "0d " + Hex.string(value[22...]))
        f.expectATT("0c 12 00 2c 00", reply: "0d")
        #expect(try gatt.readLong(0x12) == value)
        f.verifyScriptDone()
    }

    @Test("GATT/CL/GAR/BV-04-C read long, step 3: exactly ATT_MTU-1 bytes, one Read Blob gets an empty part")
    func readLongStep3() throws {
        let (f, gatt) = client()
        let value = pattern(22)
        f.expectATT("0a 12 00", reply: "0b " + Hex.string(value))
        f.expectATT("0c 12 00 16 00", reply: "0d")
        #expect(try gatt.readLong(0x12) == value)
        f.verifyScriptDone()
    }

    @Test("GATT/CL/GAR/BV-04-C read long, step 4: a short value needs no Read Blob")
    func readLongStep4() throws {
        let (f, gatt) = client()
        f.expectATT("0a 12 00", reply: "0b 01 02 03")
        #expect(try gatt.readLong(0x12) == hex("01 02 03"))
        f.verifyScriptDone()
    }

    @Test("GATT/CL/GAR/BV-04-C read long, 512 bytes: 23 Read Blobs and none past the last short part")
    func readLong512() throws {
        let (f, gatt) = client()
        let value = pattern(512)
        f.expectATT("0a 12 00", reply: "0b " + Hex.string(value[0..<22]))
        var offset = 22
        while offset < 512 {
            let end = min(offset + 22, 512)
            f.expectATT("0c 12 00 \(le(UInt16(offset)))", reply: "0d " + Hex.string(value[offset..<end]))
            offset = end
        }
        #expect(try gatt.readLong(0x12) == value)
        #expect(f.sentATT.count == 24)
        f.verifyScriptDone()
    }

    @Test("GATT/CL/GAR/BV-04-C read long: Attribute Not Long on the first Read Blob ends the read with what was read")
    func readLongNotLong() throws {
        let (f, gatt) = client()
        let value = [UInt8](repeating: 0x41, count: 22)
        f.expectATT("0a 12 00", reply: "0b " + Hex.string(value))
        f.expectATT("0c 12 00 16 00", reply: "01 0c 12 00 0b")
        #expect(try gatt.readLong(0x12) == value)
        f.verifyScriptDone()
    }

    @Test("GATT/CL/GAR/BI-12-C read long: Read Not Permitted")
    func readLongNotPermitted() { expectReadError(.readNotPermitted, long: true) }

    @Test("GATT/CL/GAR/BI-13-C read long: Invalid Offset on a Read Blob ends the read with the bytes before that offset")
    func readLongInvalidOffset() throws {
        let (f, gatt) = client()
        let value = pattern(22)
        f.expectATT("0a 12 00", reply: "0b " + Hex.string(value))
        f.expectATT("0c 12 00 16 00", reply: "01 0c 12 00 07")
        #expect(try gatt.readLong(0x12) == value)
        f.verifyScriptDone()
    }

    @Test("GATT/CL/GAR/BI-14-C read long: Invalid Handle")
    func readLongInvalidHandle() { expectReadError(.invalidHandle, handle: 0x0000, long: true) }

    @Test("GATT/CL/GAR/BI-15-C read long: Insufficient Authorization")
    func readLongAuthorization() { expectReadError(insufficientAuthorization, long: true) }

    @Test("GATT/CL/GAR/BI-16-C read long: Insufficient Authentication")
    func readLongAuthentication() { expectReadError(.insufficientAuthentication, long: true) }

    @Test("GATT/CL/GAR/BI-17-C read long: Insufficient Encryption Key Size")
    func readLongKeySize() { expectReadError(encryptionKeySizeTooShort, long: true) }

    @Test("GATT/CL/GAR/BI-12-C..BI-17-C an error on a later Read Blob fails the read with that error")
    func readLongErrorOnBlob() {
        let (f, gatt) = client()
        f.expectATT("0a 12 00", reply: "0b " + Hex.string(pattern(22)))
        f.expectATT("0c 12 00 16 00", reply: "01 0c 12 00 05")
        #expect(throws: ATTError.errorResponse(request: .readBlobRequest, handle: 0x12, code: .insufficientAuthentication)) {
            try gatt.readLong(0x12)
        }
        f.verifyScriptDone()
    }

    @Test("GATT/CL/GAR/BV-06-C read characteristic descriptor")
    func readDescriptor() throws {
        let (f, gatt) = client()
        f.expectATT("0a 04 00", reply: "0b 01 02 03")
        #expect(try gatt.read(0x04) == hex("01 02 03"))
        f.verifyScriptDone()
    }

    @Test("GATT/CL/GAR/BV-07-C read long characteristic descriptor")
    func readLongDescriptor() throws {
        let (f, gatt) = client()
        let value = pattern(30, from: 0x80)
        f.expectATT("0a 04 00", reply: "0b " + Hex.string(value[0..<22]))
        f.expectATT("0c 04 00 16 00", reply: "0d " + Hex.string(value[22...]))
        #expect(try gatt.readLong(0x04) == value)
        f.verifyScriptDone()
    }
}

// MARK: - Writes (GATT.TS 4.7)

/// A Write Request to `handle` answered by Error Response `code`.
private func expectWriteError(_ code: ATTErrorCode, handle: UInt16 = 0x07, sourceLocation: SourceLocation = #_sourceLocation) {
    let (f, gatt) = client()
    f.expectATT("12 \(le(handle)) 01 02 03", reply: "01 12 \(le(handle)) \(Hex.string([code.rawValue]))", sourceLocation: sourceLocation)
    #expect(throws: ATTError.errorResponse(request: .writeRequest, handle: handle, code: code), sourceLocation: sourceLocation) {
        try gatt.write(handle, value: hex("01 02 03"), withResponse: true)
    }
    f.verifyScriptDone(sourceLocation: sourceLocation)
}

/// A long write to `handle` whose first Prepare Write is answered by Error
/// Response `code`: the queue is cancelled (Execute Write 00) and the error thrown.
private func expectWriteLongError(_ code: ATTErrorCode, handle: UInt16 = 0x07, sourceLocation: SourceLocation = #_sourceLocation) {
    let (f, gatt) = client()
    let value = pattern(40)
    f.expectATT("16 \(le(handle)) 00 00 " + Hex.string(value[0..<18]), reply: "01 16 \(le(handle)) \(Hex.string([code.rawValue]))", sourceLocation: sourceLocation)
    f.expectATT("18 00", reply: "19", sourceLocation: sourceLocation)
    #expect(throws: ATTError.errorResponse(request: .prepareWriteRequest, handle: handle, code: code), sourceLocation: sourceLocation) {
        try gatt.writeLong(handle, value: value)
    }
    f.verifyScriptDone(sourceLocation: sourceLocation)
}

/// The Prepare Write / echo pairs for `value` written at `handle` from `offset` in 18-byte parts.
private func scriptPrepared(_ f: BearerFixture, handle: UInt16, value: [UInt8], offset: Int = 0) {
    var pos = 0
    while pos < value.count {
        let end = min(pos + 18, value.count)
        let pdu = "\(le(handle)) \(le(UInt16(offset + pos))) " + Hex.string(value[pos..<end])
        f.expectATT("16 " + pdu, reply: "17 " + pdu)
        pos = end
    }
}

@Suite("GATT.TS client: writes (GAW)")
struct GATTConformanceWriteTests {
    @Test("GATT/CL/GAW/BV-01-C write without response sends a Write Command and waits for nothing")
    func writeWithoutResponse() throws {
        let (f, gatt) = client()
        f.expectATT("52 07 00 01 02 03")
        try gatt.write(0x07, value: hex("01 02 03"), withResponse: false)
        #expect(f.bearer.commandsSent == 1)
        f.verifyScriptDone()
    }

    @Test("GATT/CL/GAW/BV-01-C a Write Command longer than ATT_MTU - 3 is refused before sending (it has no long form)")
    func writeWithoutResponseTooLong() {
        let (f, gatt) = client()
        #expect(throws: ATTError.tooLong(request: .writeCommand, size: 24, mtu: 23)) {
            try gatt.write(0x07, value: pattern(21), withResponse: false)
        }
        #expect(f.ctl.sent.isEmpty)
    }

    @Test("GATT/CL/GAW/BV-03-C write characteristic value with a Write Request")
    func writeRequest() throws {
        let (f, gatt) = client()
        f.expectATT("12 07 00 01 02 03", reply: "13")
        try gatt.write(0x07, value: hex("01 02 03"), withResponse: true)
        f.verifyScriptDone()
    }

    @Test("GATT/CL/GAW/BV-03-C a value of exactly ATT_MTU - 3 bytes still goes in one Write Request")
    func writeRequestFull() throws {
        let (f, gatt) = client()
        f.expectATT("12 07 00 " + Hex.string(pattern(20)), reply: "13")
        try gatt.write(0x07, value: pattern(20), withResponse: true)
        f.verifyScriptDone()
    }

    @Test("GATT/CL/GAW/BI-02-C write characteristic value: Invalid Handle")
    func writeInvalidHandle() { expectWriteError(.invalidHandle, handle: 0x0000) }

    @Test("GATT/CL/GAW/BI-03-C write characteristic value: Write Not Permitted")
    func writeNotPermitted() { expectWriteError(.writeNotPermitted) }

    @Test("GATT/CL/GAW/BI-04-C write characteristic value: Insufficient Authorization")
    func writeAuthorization() { expectWriteError(insufficientAuthorization) }

    @Test("GATT/CL/GAW/BI-05-C write characteristic value: Insufficient Authentication")
    func writeAuthentication() { expectWriteError(.insufficientAuthentication) }

    @Test("GATT/CL/GAW/BI-06-C write characteristic value: Insufficient Encryption Key Size")
    func writeKeySize() { expectWriteError(encryptionKeySizeTooShort) }

    @Test("write characteristic value: Invalid Attribute Value Length surfaces as its code")
    func writeInvalidLength() { expectWriteError(.invalidAttributeValueLength) }

    @Test("GATT/CL/GAW/BV-05-C write long: parts of ATT_MTU - 5 at offsets N*(ATT_MTU-5), each echo checked, then Execute Write 01")
    func writeLong() throws {
        let (f, gatt) = client()
        let value = pattern(40)
        scriptPrepared(f, handle: 0x07, value: value)
        f.expectATT("18 01", reply: "19")
        try gatt.writeLong(0x07, value: value)
        #expect(f.sentATT.count == 4)
        f.verifyScriptDone()
    }

    @Test("GATT/CL/GAW/BV-05-C a Write Request too long for ATT_MTU becomes a long write")
    func writeLongViaWrite() throws {
        let (f, gatt) = client()
        let value = pattern(21)
        scriptPrepared(f, handle: 0x07, value: value)
        f.expectATT("18 01", reply: "19")
        try gatt.write(0x07, value: value, withResponse: true)
        f.verifyScriptDone()
    }

    @Test("GATT/CL/GAW/BV-05-C write long, 512 bytes: 29 Prepare Writes, the last 8 bytes at offset 504")
    func writeLong512() throws {
        let (f, gatt) = client()
        let value = pattern(512)
        scriptPrepared(f, handle: 0x07, value: value)
        f.expectATT("18 01", reply: "19")
        try gatt.writeLong(0x07, value: value)
        #expect(f.sentATT.count == 30)
        #expect(f.sentATT[28].hasPrefix("16 07 00 f8 01 "))
        f.verifyScriptDone()
    }

    @Test("GATT/CL/GAW/BV-05-C a value longer than 512 bytes is refused before anything is sent")
    func writeLongTooLong() {
        let (f, gatt) = client()
        #expect(throws: GATTError.valueTooLong(size: 513, limit: 512)) { try gatt.writeLong(0x07, value: pattern(513)) }
        #expect(f.ctl.sent.isEmpty)
    }

    @Test("GATT/CL/GAW/BI-07-C write long: Invalid Handle; the queue is cancelled with Execute Write 00")
    func writeLongInvalidHandle() { expectWriteLongError(.invalidHandle, handle: 0x0000) }

    @Test("GATT/CL/GAW/BI-08-C write long: Write Not Permitted; the queue is cancelled with Execute Write 00")
    func writeLongNotPermitted() { expectWriteLongError(.writeNotPermitted) }

    @Test("GATT/CL/GAW/BI-09-C write long: Invalid Offset on Execute Write fails the write")
    func writeLongInvalidOffset() {
        let (f, gatt) = client()
        scriptPrepared(f, handle: 0x07, value: hex("01 02 03"), offset: 0x0100)
        f.expectATT("18 01", reply: "01 18 07 00 07")
        #expect(throws: ATTError.errorResponse(request: .executeWriteRequest, handle: 0x07, code: .invalidOffset)) {
            try gatt.writeLong(0x07, value: hex("01 02 03"), offset: 0x0100)
        }
        f.verifyScriptDone()
    }

    @Test("GATT/CL/GAW/BI-11-C write long: Insufficient Authorization; the queue is cancelled")
    func writeLongAuthorization() { expectWriteLongError(insufficientAuthorization) }

    @Test("GATT/CL/GAW/BI-12-C write long: Insufficient Authentication; the queue is cancelled")
    func writeLongAuthentication() { expectWriteLongError(.insufficientAuthentication) }

    @Test("GATT/CL/GAW/BI-13-C write long: Insufficient Encryption Key Size; the queue is cancelled")
    func writeLongKeySize() { expectWriteLongError(encryptionKeySizeTooShort) }

    @Test("write long: Prepare Queue Full on a later part cancels what was queued and throws")
    func writeLongQueueFull() {
        let (f, gatt) = client()
        let value = pattern(40)
        scriptPrepared(f, handle: 0x07, value: Array(value[0..<18]))
        f.expectATT("16 07 00 12 00 " + Hex.string(value[18..<36]), reply: "01 16 07 00 09")
        f.expectATT("18 00", reply: "19")
        #expect(throws: ATTError.errorResponse(request: .prepareWriteRequest, handle: 0x07, code: prepareQueueFull)) {
            try gatt.writeLong(0x07, value: value)
        }
        f.verifyScriptDone()
    }

    @Test("write long: Invalid Attribute Value Length on Execute Write fails the write")
    func writeLongInvalidLength() {
        let (f, gatt) = client()
        let value = pattern(40)
        scriptPrepared(f, handle: 0x07, value: value)
        f.expectATT("18 01", reply: "01 18 07 00 0d")
        #expect(throws: ATTError.errorResponse(request: .executeWriteRequest, handle: 0x07, code: .invalidAttributeValueLength)) {
            try gatt.writeLong(0x07, value: value)
        }
        f.verifyScriptDone()
    }

    @Test("GATT/CL/GAW/BV-06-C reliable write of one value: Prepare Write, echo checked, Execute Write 01")
    func reliableWrite() throws {
        let (f, gatt) = client()
        f.expectATT("16 07 00 00 00 01 02 03", reply: "17 07 00 00 00 01 02 03")
        f.expectATT("18 01", reply: "19")
        try gatt.writeLong(0x07, value: hex("01 02 03"))
        f.verifyScriptDone()
    }

    @Test("GATT/CL/GAW/BI-32-C cancel reliable write: a corrupted echo is cancelled with Execute Write 00 and reported")
    func cancelReliableWrite() {
        let (f, gatt) = client()
        f.expectATT("16 07 00 00 00 01 02 03", reply: "17 07 00 00 00 01 02 04")
        f.expectATT("18 00", reply: "19")
        #expect(throws: GATTError.prepareWriteMismatch(handle: 0x07, offset: 0)) { try gatt.writeLong(0x07, value: hex("01 02 03")) }
        f.verifyScriptDone()
    }

    @Test("GATT/CL/GAW/BI-32-C an echo with the wrong offset on a later part is cancelled too")
    func cancelReliableWriteLaterPart() {
        let (f, gatt) = client()
        let value = pattern(40)
        scriptPrepared(f, handle: 0x07, value: Array(value[0..<18]))
        f.expectATT("16 07 00 12 00 " + Hex.string(value[18..<36]), reply: "17 07 00 13 00 " + Hex.string(value[18..<36]))
        f.expectATT("18 00", reply: "19")
        #expect(throws: GATTError.prepareWriteMismatch(handle: 0x07, offset: 18)) { try gatt.writeLong(0x07, value: value) }
        f.verifyScriptDone()
    }

    @Test("GATT/CL/GAW/BV-08-C write characteristic descriptor")
    func writeDescriptor() throws {
        let (f, gatt) = client()
        f.expectATT("12 08 00 01 02 03", reply: "13")
        try gatt.write(0x08, value: hex("01 02 03"), withResponse: true)
        f.verifyScriptDone()
    }

    @Test("GATT/CL/GAW/BV-09-C write long characteristic descriptor")
    func writeLongDescriptor() throws {
        let (f, gatt) = client()
        let value = pattern(40, from: 0x40)
        scriptPrepared(f, handle: 0x08, value: value)
        f.expectATT("18 01", reply: "19")
        try gatt.writeLong(0x08, value: value)
        f.verifyScriptDone()
    }
}

// MARK: - Notifications and indications (GATT.TS 4.8)

@Suite("GATT.TS client: notifications and indications (GAN, GAI)")
struct GATTConformanceNotificationTests {
    static let char = Characteristic(declarationHandle: 0x02, properties: [.read, .notify, .indicate], valueHandle: 0x03, uuid: u16(0x2A19), end: 0x04)
    static let cccd = [Descriptor(handle: 0x04, uuid: GATTUUID.clientCharacteristicConfiguration)]

    @Test("GATT/CL/GAN/BV-01-C notifications: the CCCD is written 01 00, a notification is delivered and nothing is sent back")
    func notification() throws {
        let (f, gatt) = client()
        f.expectATT("12 04 00 01 00", reply: "13")
        try gatt.subscribe(Self.char, descriptors: Self.cccd)
        f.ctl.deliver(ACL.in(hex("1b 03 00 01 02 03")))
        try f.drain()
        #expect(f.notifications == [HandleValue(handle: 0x03, value: hex("01 02 03"))])
        #expect(f.sentATT == ["12 04 00 01 00"])
        f.verifyScriptDone()
    }

    @Test("GATT/CL/GAI/BV-01-C indications: the CCCD is written 02 00, an indication is delivered and confirmed once")
    func indication() throws {
        let (f, gatt) = client()
        f.expectATT("12 04 00 02 00", reply: "13")
        try gatt.subscribe(Self.char, indications: true, descriptors: Self.cccd)
        f.expectATT("1e")
        f.ctl.deliver(ACL.in(hex("1d 03 00 01 02 03")))
        try f.drain()
        #expect(f.indications == [HandleValue(handle: 0x03, value: hex("01 02 03"))])
        #expect(f.sentATT == ["12 04 00 02 00", "1e"])
        f.verifyScriptDone()
    }

    @Test("GATT/CL/GAI/BV-01-C an indication arriving while a request is outstanding is confirmed at once; the request then completes")
    func indicationDuringRequest() throws {
        let (f, gatt) = client()
        f.expectATT("0a 03 00", reply: "1d 03 00 07")
        f.expectATT("1e", reply: "0b 08")
        #expect(try gatt.read(0x03) == [0x08])
        #expect(f.indications == [HandleValue(handle: 0x03, value: [0x07])])
        #expect(f.sentATT == ["0a 03 00", "1e"])
        f.verifyScriptDone()
    }

    @Test("GATT/CL/GAI/BV-01-C two indications in a row are each confirmed")
    func twoIndications() throws {
        let (f, _) = client()
        f.expectATT("1e")
        f.expectATT("1e")
        f.ctl.deliver(ACL.in(hex("1d 03 00 01")), ACL.in(hex("1d 03 00 02")))
        try f.drain()
        #expect(f.indications.map(\.value) == [[0x01], [0x02]])
        #expect(f.sentATT == ["1e", "1e"])
        f.verifyScriptDone()
    }
}
