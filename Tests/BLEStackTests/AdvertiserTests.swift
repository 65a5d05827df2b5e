import Testing
@testable import BLEWire
@testable import BLEHCI
@testable import BLEGAP
@testable import BLEL2CAP
@testable import Attled

/// The peripheral role's GAP/HCI layer on a scripted controller: the
/// advertising commands and their bytes, the data builder's split, the
/// connections made to us, and the Connection Parameter Update Request.
@Suite("Advertiser: the peripheral role")
struct AdvertiserTests {
    static let own = BDAddress("C0:AA:BB:CC:DD:EE")!
    /// The own address as it goes on the wire (least significant first).
    static let ownWire = "ee dd cc bb aa c0"
    static let central = "4A:11:22:33:44:55"
    /// "CassarTech" as a Complete Local Name structure.
    static let cassarName = "0b 09 43 61 73 73 61 72 54 65 63 68"
    /// The pycom service as a Complete List of 128-bit Service UUIDs ("1234567890123456" on the wire).
    static let pycomList = "11 07 31 32 33 34 35 36 37 38 39 30 31 32 33 34 35 36"

    /// Octet 36 bits 1-5 and octet 37 bits 0, 5, 6: the extended advertising and scanning commands.
    static func extendedCommandBits() -> [UInt8] {
        var c = [UInt8](repeating: 0, count: 64)
        c[36] = 0x3E; c[37] = 0x61
        return c
    }

    final class World {
        let ctl: ScriptedController
        let stack: BLEStack
        var adv: Advertiser { stack.advertiser }
        var events: [String] = []
        var incoming: [LEConnection] = []

        init(commands: [UInt8]? = nil, listen: Bool = true) throws {
            ctl = HCIHostInitTests.controller(bdaddr: "00 00 00 00 00 00")
            if let c = commands {
                // Strict entries win over the standing rules: this answer replaces the default bitmap.
                ctl.expect(h4("01 02 10 00"), reply: [Ev.complete(HCI.ReadLocalSupportedCommands.opcode, [0x00] + c)])
            }
            for op in [HCI.LESetAdvertisingParameters.opcode, HCI.LESetAdvertisingData.opcode, HCI.LESetScanResponseData.opcode,
                       HCI.LESetAdvertisingSetRandomAddress.opcode, HCI.LESetExtendedAdvertisingData.opcode, HCI.LESetExtendedScanResponseData.opcode,
                       HCI.LERemoveAdvertisingSet.opcode] {
                ctl.when(command: op, reply: [Ev.complete(op)])
            }
            ctl.when(command: HCI.LESetExtendedAdvertisingParameters.opcode, reply: [Ev.complete(HCI.LESetExtendedAdvertisingParameters.opcode, [0x00, 0x05])])
            stack = try BLEStack(transport: ctl, ownAddress: AdvertiserTests.own)
            stack.host.interruptible = false
            stack.central.airRequests = []
            guard listen else { return }
            adv.subscribe { [unowned self] e in
                switch e {
                case .connected(let c): self.events.append("connected \(c.handle)")
                case .disconnected(let c): self.events.append("disconnected \(c.handle)")
                case .advertising: self.events.append("advertising")
                case .restartRefused(let e): self.events.append("refused \(e)")
                }
            }
            adv.onConnection { [unowned self] c in self.incoming.append(c) }
        }

        /// Answers LE Set (Extended) Advertising Enable with success, always.
        func enableAlwaysSucceeds() {
            ctl.when(command: HCI.LESetAdvertisingEnable.opcode, reply: [Ev.complete(HCI.LESetAdvertisingEnable.opcode)])
            ctl.when(command: HCI.LESetExtendedAdvertisingEnable.opcode, reply: [Ev.complete(HCI.LESetExtendedAdvertisingEnable.opcode)])
        }

        func pump(ms: Int = 500, until done: () -> Bool) throws {
            _ = try stack.host.pump(until: Instant.now().adding(ms: ms), done)
        }

        /// Commands sent since `from` (an index into `ctl.sent`), as hex.
        func commands(from: Int) -> [String] {
            ctl.sent[from...].filter { $0.type == .command }.map { Hex.string($0.h4) }
        }

        /// How many times LE Set Advertising Enable 1 was sent.
        var enables: Int { ctl.sentHex(.command).filter { $0 == "01 0a 20 01 01" }.count }
    }

    /// LE Connection Complete (7.7.65.1) from `peer` on `handle`, with `role` (1: we are the peripheral).
    static func connected(handle: UInt8, role: UInt8, peer: String = central) -> HCIPacket {
        let a = BDAddress(peer)!.bytes
        let params: [UInt8] = [0x01, 0x00, handle, 0x00, role, 0x01] + a + [0x18, 0x00, 0x00, 0x00, 0xC8, 0x00, 0x00]
        return HCIPacket(.event, [0x3E, UInt8(params.count)] + params)
    }

    static let pycom = BluetoothUUID("36353433-3231-3039-3837-363534333231")!
    static let cassar = AdvertisingParameters(name: "CassarTech", services: [pycom])

    // MARK: - commands

    @Test("legacy: Set Advertising Parameters (100 ms, ADV_IND, own address random), Data, Scan Response Data, Enable; stop disables")
    func legacyCommands() throws {
        let w = try World()
        w.enableAlwaysSucceeds()
        let from = w.ctl.sent.count
        try w.adv.startAdvertising(Self.cassar)
        #expect(w.adv.state == .advertising && w.adv.mode == .legacy)
        #expect(w.commands(from: from) == [
            "01 06 20 0f a0 00 a0 00 00 01 00 00 00 00 00 00 00 07 00",
            "01 08 20 20 1e " + Self.cassarName + " " + Self.pycomList + " 00",
            "01 09 20 20 00" + String(repeating: " 00", count: 31),
            "01 0a 20 01 01",
        ])
        #expect(w.events == ["advertising"])
        let stopFrom = w.ctl.sent.count
        try w.adv.stopAdvertising()
        #expect(w.commands(from: stopFrom) == ["01 0a 20 01 00"])
        #expect(w.adv.state == .off && !w.adv.isActive)
        #expect(w.ctl.unexpected.isEmpty)
    }

    @Test("the interval is configurable (units of 0.625 ms) and clamped to 20 ms..10.24 s")
    func interval() throws {
        #expect(Advertiser.units625(100) == 0x00A0 && Advertiser.units625(30) == 0x0030)
        #expect(Advertiser.units625(5) == 0x0020 && Advertiser.units625(20_000) == 0x4000)
        let w = try World()
        w.enableAlwaysSucceeds()
        var p = Self.cassar; p.intervalMs = 50
        try w.adv.startAdvertising(p)
        #expect(w.ctl.sentHex(.command).contains("01 06 20 0f 50 00 50 00 00 01 00 00 00 00 00 00 00 07 00"))
    }

    @Test("extended: Set Extended Advertising Parameters (connectable, 1M), the set's random address, all data in one command, Enable; stop disables and removes the set")
    func extendedCommands() throws {
        let w = try World(commands: Self.extendedCommandBits())
        #expect(w.stack.info.supportsExtendedAdvertising)
        w.enableAlwaysSucceeds()
        let from = w.ctl.sent.count
        var p = Self.cassar; p.mode = .extended
        try w.adv.startAdvertising(p)
        #expect(w.adv.state == .advertising && w.adv.mode == .extended)
        #expect(w.commands(from: from) == [
            "01 36 20 19 00 01 00 a0 00 00 a0 00 00 07 01 00 00 00 00 00 00 00 00 7f 01 00 01 00 00",
            "01 35 20 07 00 " + Self.ownWire,
            // Flags, name and UUID: 33 octets, more than legacy's 31.
            "01 37 20 25 00 03 01 21 02 01 06 " + Self.cassarName + " " + Self.pycomList,
            "01 39 20 06 01 01 00 00 00 00",
        ])
        let stopFrom = w.ctl.sent.count
        try w.adv.stopAdvertising()
        #expect(w.commands(from: stopFrom) == ["01 39 20 06 00 01 00 00 00 00", "01 3c 20 01 00"])
        #expect(w.ctl.unexpected.isEmpty)
        // The trace reads every new command field by field.
        let cmd = try HCICommand.decode(Array(w.ctl.sent[from].bytes))
        #expect(cmd.traceFields.contains("Properties: 0x0001 (Connectable)"))
        #expect(cmd.traceFields.contains("Min advertising interval: 100.000 msec"))
    }

    @Test("automatic mode: a central on the extended commands advertises with them, legacy PDUs (ADV_IND, 0x0013) and a scan response")
    func automaticExtendedLegacyPDUs() throws {
        let w = try World(commands: Self.extendedCommandBits())
        w.enableAlwaysSucceeds()
        w.stack.central.useExtendedCommands = true
        let from = w.ctl.sent.count
        try w.adv.startAdvertising(AdvertisingParameters(name: "CassarTech Living Room", services: [Self.pycom]))
        #expect(w.adv.mode == .extendedLegacyPDUs)
        let sent = w.commands(from: from)
        #expect(sent.count == 5)
        #expect(sent.first?.hasPrefix("01 36 20 19 00 13 00 a0 00 00") == true)
        #expect(sent.contains { $0.hasPrefix("01 38 20 1c 00 03 01 18 17 09 43 61") })  // the Complete Local Name in the scan response
        #expect(sent.last == "01 39 20 06 01 01 00 00 00 00")
        #expect(!sent.contains { $0.hasPrefix("01 06 20") || $0.hasPrefix("01 0a 20") }, "legacy commands mixed with extended ones")
    }

    @Test("extended asked of a controller that does not list it fails without sending anything")
    func extendedUnsupported() throws {
        let w = try World()  // LE features bit 12, but octet 36 empty
        let from = w.ctl.sent.count
        var p = Self.cassar; p.mode = .extended
        #expect(throws: GAPError.self) { try w.adv.startAdvertising(p) }
        #expect(w.commands(from: from).isEmpty && w.adv.state == .off)
    }

    @Test("a refused command fails start, and advertising is off")
    func startRefused() throws {
        let w = try World()
        w.ctl.when(command: HCI.LESetAdvertisingEnable.opcode, reply: [Ev.complete(HCI.LESetAdvertisingEnable.opcode, [0x0C])])
        #expect(throws: HCIError.commandFailed(HCI.LESetAdvertisingEnable.opcode, .commandDisallowed)) { try w.adv.startAdvertising(Self.cassar) }
        #expect(w.adv.state == .off)
    }

    // MARK: - connections made to us

    @Test("LE Connection Complete with Role 1 reaches onConnection, not a running connect nor the central's adopters, and is not disconnected")
    func incomingConnection() throws {
        let w = try World()
        w.enableAlwaysSucceeds()
        w.ctl.when(command: LECreateConnection.opcode, reply: [Ev.status(LECreateConnection.opcode)])
        var adopted = 0
        w.stack.central.adoptUnrequested { _ in adopted += 1; return true }
        try w.adv.startAdvertising(Self.cassar)
        // A connect of our own is running meanwhile: the incoming link must not complete it.
        let attempt = w.stack.central.startConnect(to: DeviceAddress(BDAddress("C0:11:22:33:44:55")!, .random), timeoutMs: 0)
        try w.pump { w.stack.central.pendingConnect != nil }
        w.ctl.deliver(Self.connected(handle: 1, role: 1))
        try w.pump { !w.incoming.isEmpty }
        let c = try #require(w.incoming.first)
        #expect(c.role == 1 && c.handle == 1 && c.peer.address == BDAddress(Self.central)!)
        #expect(w.adv.connections[1] === c && w.stack.central.connections[1] === c)
        #expect(adopted == 0 && !attempt.isComplete)
        #expect(!w.ctl.sentOpcodes.contains(HCI.Disconnect.opcode.rawValue))
        // A Role 0 completion is still the attempt's.
        w.ctl.deliver(Self.connected(handle: 2, role: 0, peer: "C0:11:22:33:44:55"))
        try w.pump { attempt.isComplete }
        #expect(try attempt.result?.get().handle == 2 && w.incoming.count == 1)
    }

    @Test("with nobody subscribed to connections, a Role 1 connection is disconnected as before")
    func nobodyListening() throws {
        let w = try World(listen: false)
        w.ctl.when(command: HCI.Disconnect.opcode, reply: [Ev.status(HCI.Disconnect.opcode)])
        #expect(w.adv.subscriptionCount == 0)
        w.ctl.deliver(Self.connected(handle: 1, role: 1))
        try w.pump { w.ctl.sentOpcodes.contains(HCI.Disconnect.opcode.rawValue) }
        #expect(w.ctl.sentHex(.command).contains("01 06 04 03 01 00 13"))
    }

    @Test("one connection allowed (default): advertising pauses while it is up and restarts after Disconnection Complete")
    func restartAfterDisconnection() throws {
        let w = try World()
        w.enableAlwaysSucceeds()
        try w.adv.startAdvertising(Self.cassar)
        #expect(w.enables == 1)
        w.ctl.deliver(Self.connected(handle: 1, role: 1))
        try w.pump { !w.incoming.isEmpty }
        #expect(w.adv.state == .full && w.enables == 1)
        w.ctl.deliver(Ev.disconnected(handle: 1))
        try w.pump { w.enables == 2 && w.adv.state == .advertising }
        #expect(w.enables == 2 && w.adv.state == .advertising)
        #expect(w.events == ["advertising", "connected 1", "disconnected 1", "advertising"])
        #expect(w.adv.connections.isEmpty)
    }

    @Test("maxConnections 2: advertising restarts right after the first connection, not after the second, and again after a disconnection")
    func restartAfterConnection() throws {
        let w = try World()
        w.enableAlwaysSucceeds()
        w.adv.maxConnections = 2
        try w.adv.startAdvertising(Self.cassar)
        w.ctl.deliver(Self.connected(handle: 1, role: 1))
        try w.pump { w.enables == 2 && w.adv.state == .advertising }
        #expect(w.enables == 2)
        w.ctl.deliver(Self.connected(handle: 2, role: 1, peer: "4A:11:22:33:44:66"))
        try w.pump { w.incoming.count == 2 }
        #expect(w.adv.state == .full && w.enables == 2)
        w.ctl.deliver(Ev.disconnected(handle: 2))
        try w.pump { w.enables == 3 && w.adv.state == .advertising }
        #expect(w.events == ["advertising", "connected 1", "advertising", "connected 2", "disconnected 2", "advertising"])
    }

    @Test("a refused restart (Command Disallowed) is reported and retried at the next disconnection")
    func refusedRestart() throws {
        let w = try World()
        w.adv.maxConnections = 2
        w.ctl.when(command: HCI.LESetAdvertisingEnable.opcode, reply: [Ev.complete(HCI.LESetAdvertisingEnable.opcode)], once: true)
        w.ctl.when(command: HCI.LESetAdvertisingEnable.opcode, reply: [Ev.complete(HCI.LESetAdvertisingEnable.opcode, [0x0C])], once: true)
        w.ctl.when(command: HCI.LESetAdvertisingEnable.opcode, reply: [Ev.complete(HCI.LESetAdvertisingEnable.opcode)])
        try w.adv.startAdvertising(Self.cassar)
        w.ctl.deliver(Self.connected(handle: 1, role: 1))
        try w.pump { w.adv.state == .refused }
        #expect(w.adv.state == .refused && w.enables == 2)
        #expect(w.adv.refusal as? HCIError == .commandFailed(HCI.LESetAdvertisingEnable.opcode, .commandDisallowed))
        #expect(w.events.last?.hasPrefix("refused") == true)
        w.ctl.deliver(Ev.disconnected(handle: 1))
        try w.pump { w.adv.state == .advertising }
        #expect(w.enables == 3 && w.adv.state == .advertising && w.adv.refusal == nil)
        #expect(w.events.suffix(2) == ["disconnected 1", "advertising"])
    }

    @Test("close stops advertising and disconnects the links made to us")
    func closeStops() throws {
        let w = try World()
        w.enableAlwaysSucceeds()
        w.ctl.when(command: HCI.Disconnect.opcode, reply: [Ev.status(HCI.Disconnect.opcode), Ev.disconnected(handle: 1, reason: 0x16)])
        w.adv.maxConnections = 2
        try w.adv.startAdvertising(Self.cassar)
        w.ctl.deliver(Self.connected(handle: 1, role: 1))
        try w.pump { w.enables == 2 }
        let from = w.ctl.sent.count
        w.stack.close()
        #expect(w.commands(from: from) == ["01 0a 20 01 00", "01 06 04 03 01 00 13"])
    }

    // MARK: - the Link of a connection made to us: Connection Parameter Update

    /// A World with a peripheral link up on handle 1.
    static func peripheralLink() throws -> (World, Link) {
        let w = try World()
        w.enableAlwaysSucceeds()
        w.ctl.autoCompleteACL = true
        try w.adv.startAdvertising(Self.cassar)
        w.ctl.deliver(Self.connected(handle: 1, role: 1))
        try w.pump { !w.incoming.isEmpty }
        let link = w.stack.attach(try #require(w.incoming.first))
        return (w, link)
    }

    /// The L2CAPError a future failed with, nil otherwise.
    static func failure<T>(_ f: Future<T>) -> L2CAPError? {
        guard case .failure(let e)? = f.result else { return nil }
        return e as? L2CAPError
    }

    static let wanted = ConnectionParameters(intervalMin: 0x0018, intervalMax: 0x0028, latency: 0, supervisionTimeout: 0x0190)
    static let request = "02 01 00 10 00 0c 00 05 00 12 01 08 00 18 00 28 00 00 00 90 01"

    @Test("Connection Parameter Update Request sent, accepted (result 0) and rejected (result 1)", arguments: [(UInt8(0), true), (UInt8(1), false)])
    func parameterRequestAnswered(result: UInt8, accepted: Bool) throws {
        let (w, link) = try Self.peripheralLink()
        #expect(link.l2cap.isPeripheral)
        let f = link.l2cap.requestConnectionParameters(Self.wanted, timeoutMs: 2000)
        #expect(w.ctl.sentHex(.acl).last == Self.request)
        w.ctl.deliver(ACL.in(cid: CID.leSignalling, [0x13, 0x01, 0x02, 0x00, result, 0x00]))
        try w.pump { f.isComplete }
        #expect(try f.result?.get() == accepted)
        #expect(link.l2cap.parameterRequests.isEmpty)
    }

    @Test("Connection Parameter Update Request: no answer by the deadline, a Command Reject, a response to another identifier, the link ending")
    func parameterRequestFailures() throws {
        let (w, link) = try Self.peripheralLink()
        let silent = link.l2cap.requestConnectionParameters(Self.wanted, timeoutMs: 50)
        // A response with another identifier is not this request's answer.
        w.ctl.deliver(ACL.in(cid: CID.leSignalling, [0x13, 0x07, 0x02, 0x00, 0x00, 0x00]))
        try w.pump(ms: 2000) { silent.isComplete }
        #expect(Self.failure(silent) == .timeout(ms: 50))
        let rejected = link.l2cap.requestConnectionParameters(Self.wanted, timeoutMs: 2000)
        w.ctl.deliver(ACL.in(cid: CID.leSignalling, [0x01, 0x02, 0x02, 0x00, 0x00, 0x00]))
        try w.pump { rejected.isComplete }
        #expect(Self.failure(rejected) == .commandRejected(reason: 0))
        let pending = link.l2cap.requestConnectionParameters(Self.wanted, timeoutMs: 2000)
        w.ctl.deliver(Ev.disconnected(handle: 1))
        try w.pump { pending.isComplete }
        #expect(Self.failure(pending) == .closed)
    }

    @Test("a peripheral link rejects the central's request for parameters (Command Reject), sends no LE Connection Update; a central link cannot request")
    func peripheralDoesNotAccept() throws {
        let (w, link) = try Self.peripheralLink()
        w.ctl.deliver(ACL.in(cid: CID.leSignalling, hex("12 05 08 00 18 00 28 00 00 00 90 01")))
        try w.pump { w.ctl.sentHex(.acl).contains("02 01 00 0a 00 06 00 05 00 01 05 02 00 00 00") }
        #expect(w.ctl.sentHex(.acl).last == "02 01 00 0a 00 06 00 05 00 01 05 02 00 00 00")
        #expect(!w.ctl.sentOpcodes.contains(LEConnectionUpdate.opcode.rawValue))
        let central = L2CAPLink(host: w.stack.host, handle: 9)
        #expect(Self.failure(central.requestConnectionParameters(Self.wanted)) == .notPeripheral)
        _ = link
    }
}

/// The advertising data builder's rule (AdvertisingBuilder): exact bytes at the 31 and 251 octet limits.
@Suite("AdvertisingBuilder: what goes where")
struct AdvertisingBuilderTests {
    static let pycom = AdvertiserTests.pycom
    static let other = BluetoothUUID("6e400001-b5a3-f393-e0a9-e50e24dcca9e")!
    static let battery = BluetoothUUID(uint16: 0x180F)
    static let info = BluetoothUUID(uint16: 0x180A)
    static let otherList = "9e ca dc 24 0e e5 a9 e0 93 f3 a3 b5 01 00 40 6e"
    static let pycomUUID = "31 32 33 34 35 36 37 38 39 30 31 32 33 34 35 36"

    /// The structures' lengths and types chain to the end exactly, and parse without problems.
    static func wellFormed(_ b: [UInt8], limit: Int) -> Bool {
        b.count <= limit && AdvertisingData(b).problems.isEmpty
    }

    @Test("a short name and a 16-bit UUID: everything in the advertising data, Flags first, no scan response")
    func short() {
        let p = AdvertisingBuilder.legacy(name: "Lamp", services: [Self.battery])
        #expect(p.advertising == hex("02 01 06 05 09 4c 61 6d 70 03 03 0f 18"))
        #expect(p.scanResponse.isEmpty)
    }

    @Test("CassarTech and the pycom UUID (33 octets with Flags): Flags left out, name and UUID in the 30-octet advertising data")
    func cassarTech() {
        let p = AdvertisingBuilder.legacy(name: "CassarTech", services: [Self.pycom])
        #expect(p.advertising == hex(AdvertiserTests.cassarName + " " + AdvertiserTests.pycomList))
        #expect(p.advertising.count == 30 && p.scanResponse.isEmpty)
        // What a scanner that gets no scan responses (Bumble's) sees: the name and the service.
        let ad = AdvertisingData(p.advertising)
        #expect(ad.problems.isEmpty && ad.localName == "CassarTech" && ad.serviceUUIDs == [Self.pycom])
    }

    @Test("exactly 31 octets stay together with Flags; 32 drop Flags")
    func boundary() {
        // Flags 3 + name (2 + 10) + UUID 18 = 33; a 8-character name makes 31.
        let p31 = AdvertisingBuilder.legacy(name: "Cassar T", services: [Self.pycom])
        #expect(p31.advertising.count == 31 && p31.advertising.prefix(3) == [0x02, 0x01, 0x06] && p31.scanResponse.isEmpty)
        let p32 = AdvertisingBuilder.legacy(name: "Cassar Te", services: [Self.pycom])
        #expect(p32.advertising.count == 29 && p32.advertising.first == 0x0A && p32.scanResponse.isEmpty)
    }

    @Test("a long name: Flags and the UUID, the start of the name as Shortened Local Name; the Complete Local Name in the scan response")
    func longName() {
        let p = AdvertisingBuilder.legacy(name: "CassarTech Living Room", services: [Self.pycom])
        #expect(p.advertising == hex("02 01 06 " + AdvertiserTests.pycomList + " 09 08 43 61 73 73 61 72 54 65"))
        #expect(p.advertising.count == 31)
        #expect(p.scanResponse == [0x17, 0x09] + Array("CassarTech Living Room".utf8))
        #expect(Self.wellFormed(p.advertising, limit: 31) && Self.wellFormed(p.scanResponse, limit: 31))
    }

    @Test("too many UUIDs: those that fit stay (16-bit first), the rest go to the scan response, both lists marked Incomplete")
    func manyUUIDs() {
        let p = AdvertisingBuilder.legacy(name: "Lamp", services: [Self.battery, Self.pycom, Self.info, Self.other])
        #expect(p.advertising == hex("02 01 06 05 03 0f 18 0a 18 11 06 " + Self.pycomUUID + " 03 08 4c 61"))
        #expect(p.scanResponse == hex("05 09 4c 61 6d 70 11 06 " + Self.otherList))
        // The two packets together list every UUID.
        let merged = AdvertisingData(p.advertising + p.scanResponse)
        #expect(Set(merged.serviceUUIDs) == Set([Self.battery, Self.pycom, Self.info, Self.other]))
    }

    @Test("a name longer than a scan response: Shortened Local Name of 29 octets; UUIDs that fit nowhere are dropped")
    func overlong() {
        let name = String(repeating: "N", count: 40)
        let p = AdvertisingBuilder.legacy(name: name, services: [Self.pycom, Self.other])
        #expect(p.advertising == hex("02 01 06 11 06 " + Self.pycomUUID + " 09 08") + Array(repeating: 0x4E, count: 8))
        #expect(p.scanResponse == [0x1E, 0x08] + Array(repeating: 0x4E, count: 29))
        #expect(p.scanResponse.count == 31)
    }

    @Test("a shortened name is cut at a character boundary")
    func utf8Cut() {
        // "Lampe rötlich …": the Shortened Local Name never ends in half a character.
        let name = "Küchenlampe über dem Tisch ö"
        let p = AdvertisingBuilder.legacy(name: name, services: [Self.pycom])
        let ad = AdvertisingData(p.advertising)
        #expect(ad.problems.isEmpty)
        let short = ad.structures.compactMap { s -> String? in if case let .localName(n, false) = s.field { n } else { nil } }
        #expect(short.count == 1 && name.hasPrefix(short[0]) && !short[0].isEmpty)
        #expect(AdvertisingBuilder.cut("aö", to: 2) == Array("a".utf8))
    }

    @Test("extended: up to 251 octets in the advertising data, no scan response; past that the name is shortened to fit")
    func extended() {
        let p = AdvertisingBuilder.extended(name: "CassarTech Living Room", services: [Self.pycom, Self.other, Self.battery])
        #expect(p.advertising == hex("02 01 06 17 09") + Array("CassarTech Living Room".utf8)
            + hex("03 03 0f 18 21 07 " + Self.pycomUUID + " " + Self.otherList))
        #expect(p.scanResponse.isEmpty)
        let fits = AdvertisingBuilder.extended(name: String(repeating: "x", count: 246), services: [])
        #expect(fits.advertising.count == 251 && fits.advertising[3...4] == [0xF7, 0x09])
        let long = AdvertisingBuilder.extended(name: String(repeating: "x", count: 300), services: [Self.pycom])
        #expect(long.advertising.count == 251 && long.scanResponse.isEmpty)
        #expect(long.advertising.prefix(21) == hex("02 01 06 11 07 " + Self.pycomUUID)[...])
        #expect(long.advertising[21...22] == [0xE5, 0x08])
    }
}
