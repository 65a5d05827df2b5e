import Testing
@testable import BLEWire
@testable import BLEHCI
@testable import BLEGAP

/// The connect from the Filter Accept List (issue 18), on a scripted controller.
@Suite("Central: connecting from the Filter Accept List")
struct AcceptListTests {
    static let lamp = DeviceAddress(BDAddress("C0:11:22:33:44:55")!, .random)
    static let other = DeviceAddress(BDAddress("00:1B:DC:01:02:03")!, .public)

    func central(addFails: Bool = false) -> (ScriptedController, HCIHost, Central) {
        let ctl = ScriptedController()
        ctl.when(command: HCI.LEClearFilterAcceptList.opcode, reply: [Ev.complete(HCI.LEClearFilterAcceptList.opcode)])
        ctl.when(command: HCI.LEAddDeviceToFilterAcceptList.opcode, reply: [Ev.complete(HCI.LEAddDeviceToFilterAcceptList.opcode, [addFails ? 0x07 : 0x00])])
        ctl.when(command: LECreateConnection.opcode, reply: [Ev.status(LECreateConnection.opcode)])
        let host = HCIHost(transport: ctl)
        host.interruptible = false
        var info = ControllerInfo()
        info.ownAddress = DeviceAddress(BDAddress("C1:02:03:04:05:06")!, .random)
        return (ctl, host, Central(host: host, info: info))
    }

    @Test("Clear, Add per device (address type 1 random, 0 public), then LE Create Connection with filter policy 1 and Peer_Address the first; any listed device completes it; no deadline")
    func sequence() throws {
        let (ctl, host, central) = central()
        let f = central.startAcceptListConnect([Self.lamp, Self.other])
        _ = try host.pump(until: Instant.now().adding(ms: 100)) { false }
        #expect(ctl.sentHex() == [
            "01 10 20 00",
            "01 11 20 07 01 55 44 33 22 11 c0",
            "01 11 20 07 00 03 02 01 dc 1b 00",
            "01 0d 20 19 10 00 10 00 01 01 55 44 33 22 11 c0 01 06 00 0c 00 00 00 c8 00 00 00 00 00",
        ])
        #expect(!f.isComplete && central.acceptListConnect == [Self.lamp, Self.other])
        // The second device advertises first: the controller connects it.
        host.handle(h4("04 3e 13 01 00 02 00 00 00 03 02 01 dc 1b 00 0c 00 00 00 c8 00 00"))
        let c = try #require(try f.result?.get())
        #expect(c.peer == Self.other && c.handle == 2)
        #expect(central.acceptListConnect == nil)
        #expect(ctl.unexpected.isEmpty)
    }

    @Test("cancelAcceptListConnect sends LE Create Connection Cancel; the attempt fails with connectAborted")
    func cancel() throws {
        let (ctl, host, central) = central()
        ctl.when(command: HCI.LECreateConnectionCancel.opcode, reply: [Ev.complete(HCI.LECreateConnectionCancel.opcode),
                                                             h4("04 3e 13 01 02 00 00 00 01 55 44 33 22 11 c0 00 00 00 00 00 00 00")])
        let f = central.startAcceptListConnect([Self.lamp])
        _ = try host.pump(until: Instant.now().adding(ms: 50)) { false }
        central.cancelAcceptListConnect()
        _ = try host.pump(until: Instant.now().adding(ms: 300)) { f.isComplete }
        #expect(throws: GAPError.connectAborted(Self.lamp)) { try f.result?.get() }
        #expect(ctl.sentOpcodes == [0x2010, 0x2011, 0x200D, 0x200E])
    }

    @Test("a refused Add fails the attempt with the status and sends no LE Create Connection")
    func addRefused() throws {
        let (ctl, host, central) = central(addFails: true)
        let f = central.startAcceptListConnect([Self.lamp])
        _ = try host.pump(until: Instant.now().adding(ms: 300)) { f.isComplete }
        #expect(throws: HCIError.commandFailed(HCI.LEAddDeviceToFilterAcceptList.opcode, HCIStatus(rawValue: 0x07))) { try f.result?.get() }
        #expect(!ctl.sentOpcodes.contains(0x200D))
    }

    @Test("a direct connect queued behind the accept-list connect runs once that is cancelled")
    func directAfterCancel() throws {
        let (ctl, host, central) = central()
        ctl.when(command: HCI.LECreateConnectionCancel.opcode, reply: [Ev.complete(HCI.LECreateConnectionCancel.opcode),
                                                             h4("04 3e 13 01 02 00 00 00 01 55 44 33 22 11 c0 00 00 00 00 00 00 00")])
        let a = central.startAcceptListConnect([Self.lamp])
        let d = central.startConnect(to: Self.other, timeoutMs: 2000)
        _ = try host.pump(until: Instant.now().adding(ms: 50)) { false }
        central.cancelAcceptListConnect()
        _ = try host.pump(until: Instant.now().adding(ms: 300)) { ctl.sentOpcodes.filter { $0 == 0x200D }.count == 2 }
        #expect(a.isComplete && !d.isComplete)
        #expect(ctl.sentHex().last == "01 0d 20 19 10 00 10 00 00 00 03 02 01 dc 1b 00 01 06 00 0c 00 00 00 c8 00 00 00 00 00")
    }

    @Test("AcceptListWatch: a listed device heard for the deadline while pending means the list is ignored; unlisted devices and a reset do not count")
    func watch() {
        var w = AcceptListWatch(deadlineMs: 1500)
        let t0 = Instant.now()
        #expect(w.heard(Self.lamp, at: t0, pending: [Self.lamp]) == nil)
        #expect(w.heard(Self.lamp, at: t0.adding(ms: 1000), pending: [Self.lamp]) == nil)
        #expect(w.heard(Self.other, at: t0.adding(ms: 5000), pending: [Self.lamp]) == nil)
        #expect(w.heard(Self.lamp, at: t0.adding(ms: 1600), pending: [Self.lamp]) == 1600)
        w.reset()
        #expect(w.heard(Self.lamp, at: t0.adding(ms: 1700), pending: [Self.lamp]) == nil)
    }

    @Test("supported commands and LE features gate the accept list, LE states, data length and 2M PHY")
    func gating() throws {
        var info = ControllerInfo()
        info.supportedCommands = [UInt8](repeating: 0, count: 64)
        #expect(!info.supportsAcceptList && !info.supportsReadSupportedStates && !info.supportsDataLength && !info.supports2MPHY)
        info.supportedCommands[26] = 0xC0; info.supportedCommands[27] = 0x03; info.supportedCommands[28] = 0x08
        #expect(info.supportsAcceptList && info.supportsReadSupportedStates)
        info.supportedCommands[33] = 0x40; info.supportedCommands[35] = 0x40
        #expect(!info.supportsDataLength && !info.supports2MPHY)  // the commands without the features
        info.leFeatures = (1 << 5) | (1 << 8)
        #expect(info.supportsDataLength && info.supports2MPHY)
        // Bumble's controller: ffff3fffff030000 (no scanning beside initiating).
        let bumble = try LEStates.decode(hex("ff ff 3f ff ff 03 00 00"))
        #expect(!bumble.activeScanWhileInitiating && !bumble.passiveScanWhileInitiating)
        let both = try LEStates.decode(hex("00 00 c0 00 00 00 00 00"))
        #expect(both.activeScanWhileInitiating && both.passiveScanWhileInitiating)
        #expect(throws: WireError.self) { try LEStates.decode([0x00]) }
    }

    /// A Central whose controller lists LE Set Data Length and LE Set PHY and has both features.
    func airCentral(manufacturer: UInt16 = 0x000F, dataLengthStatus: UInt8 = 0x00) -> (ScriptedController, HCIHost, Central) {
        let ctl = ScriptedController()
        ctl.when(command: HCI.LESetDataLength.opcode, reply: [Ev.complete(HCI.LESetDataLength.opcode, dataLengthStatus == 0 ? [0x00, 0x01, 0x00] : [dataLengthStatus])])
        ctl.when(command: HCI.LESetPHY.opcode, reply: [Ev.status(HCI.LESetPHY.opcode), h4("04 3e 06 0c 00 01 00 02 02")])
        let host = HCIHost(transport: ctl)
        host.interruptible = false
        var info = ControllerInfo()
        info.supportedCommands = [UInt8](repeating: 0, count: 64)
        info.supportedCommands[33] = 0x40; info.supportedCommands[35] = 0x40
        info.leFeatures = (1 << 5) | (1 << 8)
        info.version = LocalVersion(hciVersion: 0x0C, hciRevision: 0, lmpVersion: 0x0C, manufacturer: manufacturer, lmpSubversion: 0)
        let central = Central(host: host, info: info)
        central.adoptUnrequested { _ in true }  // kept: the tests connect with no attempt
        return (ctl, host, central)
    }

    static let connected = h4("04 3e 13 01 00 01 00 00 01 55 44 33 22 11 c0 0c 00 00 00 c8 00 00")

    @Test("on connect: LE Set Data Length 251/2120 and LE Set PHY 2M; the events update the connection")
    func airRequests() throws {
        let (ctl, host, central) = airCentral()
        host.handle(Self.connected)
        _ = try host.pump(until: Instant.now().adding(ms: 100)) { false }
        #expect(ctl.sentHex() == ["01 22 20 06 01 00 fb 00 48 08", "01 32 20 07 01 00 00 02 02 00 00"])
        let c = try #require(central.connections[1])
        #expect(c.airRequest == "data length 251, 2M PHY")
        host.handle(h4("04 3e 0b 07 01 00 fb 00 48 08 fb 00 48 08"))
        #expect(c.txOctets == 251 && c.rxOctets == 251 && c.txPHY == 2 && c.rxPHY == 2)
        #expect(c.airDescription == "data length 251 octets, PHY 2M")
    }

    @Test("nothing is asked where the commands are not listed, only what airRequests names, and not LE Set PHY of a company-0xFFFF controller")
    func airRequestsGated() throws {
        let (ctl, host, central) = central()
        central.adoptUnrequested { _ in true }
        host.handle(Self.connected)
        _ = try host.pump(until: Instant.now().adding(ms: 50)) { false }
        #expect(ctl.sentHex().isEmpty && central.connections[1]?.airRequest == nil)

        let (ctl2, host2, central2) = airCentral()
        central2.airRequests = [.dataLength]
        host2.handle(Self.connected)
        _ = try host2.pump(until: Instant.now().adding(ms: 50)) { false }
        #expect(ctl2.sentOpcodes == [0x2022])

        let (ctl3, host3, central3) = airCentral(manufacturer: 0xFFFF)
        host3.handle(Self.connected)
        _ = try host3.pump(until: Instant.now().adding(ms: 50)) { false }
        #expect(ctl3.sentOpcodes == [0x2022])
        #expect(central3.connections[1]?.airRequest == "data length 251")
    }

    @Test("LE Set Data Length refused as Unknown HCI Command is not sent on the next connection")
    func dataLengthGivenUp() throws {
        let (ctl, host, central) = airCentral(dataLengthStatus: 0x01)
        host.handle(Self.connected)
        _ = try host.pump(until: Instant.now().adding(ms: 50)) { false }
        #expect(central.airGivenUp == [.dataLength])
        host.handle(h4("04 3e 13 01 00 02 00 00 01 55 44 33 22 11 c0 0c 00 00 00 c8 00 00"))
        _ = try host.pump(until: Instant.now().adding(ms: 50)) { false }
        #expect(ctl.sentOpcodes == [0x2022, 0x2032, 0x2032])
    }
}
