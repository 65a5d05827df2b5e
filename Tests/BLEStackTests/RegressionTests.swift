import Testing
@testable import BLEWire
@testable import BLETransport
@testable import BLEHCI
@testable import BLEL2CAP
@testable import BLEATT
@testable import BLEGATT

/// Behaviours added after the fault tests (Tests/integration/test_faults.py) found them missing.
@Suite("Regressions from the fault tests")
struct RegressionTests {
    @Test("a response longer than ATT_MTU fails the request as malformed (Core Vol 3 Part F 3.2.8)")
    func oversizeResponse() throws {
        let f = BearerFixture()
        // 24-byte Read Response at the default ATT_MTU of 23.
        f.expectATT("0a 10 00", reply: "0b " + String(repeating: "aa ", count: 23))
        #expect(throws: ATTError.malformedResponse(request: .readRequest, reason: "Read Response of 24 bytes exceeds ATT_MTU 23")) {
            _ = try f.bearer.request(ATT.ReadRequest(handle: 0x10))
        }
    }

    @Test("a notification longer than ATT_MTU is dropped, not delivered")
    func oversizeNotification() throws {
        let f = BearerFixture()
        f.bearer.receive(hex("1b 10 00") + [UInt8](repeating: 1, count: 21))
        #expect(f.notifications.isEmpty)
        f.bearer.receive(hex("1b 10 00") + [UInt8](repeating: 1, count: 20))
        #expect(f.notifications.count == 1)
    }

    @Test("characteristic declarations out of order are a malformed response")
    func declarationsOutOfOrder() throws {
        let f = BearerFixture()
        let gatt = GATTClient(bearer: f.bearer)
        // 0x0013 then 0x000f in one Read By Type Response.
        f.expectATT("08 0e 00 20 00 03 28", reply: "09 07 13 00 02 14 00 01 2a 0f 00 02 10 00 02 2a")
        #expect(throws: GATTError.self) {
            _ = try gatt.discoverCharacteristics(of: Service(uuid: BluetoothUUID(uint16: 0x180F), start: 0x0E, end: 0x20))
        }
    }

    @Test("a Hardware Error can be recovered from for clean-up, a lost transport cannot")
    func recoverForCleanup() throws {
        let f = BearerFixture()
        f.host.handle(HCIPacket(.event, hex("10 01 33")))
        #expect(f.host.failure == .hardwareError(0x33))
        #expect(f.host.recoverForCleanup())
        #expect(f.host.failure == nil)
    }
}
