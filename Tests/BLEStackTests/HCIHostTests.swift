import Testing
@testable import BLEWire
@testable import BLETransport
@testable import BLEHCI

private func makeHost(_ ctl: ScriptedController) -> HCIHost {
    let host = HCIHost(transport: ctl)
    host.interruptible = false
    host.commandTimeoutMs = 500
    return host
}

@Suite("HCI host: commands")
struct HCIHostCommandTests {
    @Test("execute() sends the command and returns the return parameters")
    func executeReturnsParameters() throws {
        let ctl = ScriptedController()
        ctl.when(h4("01 09 10 00"), reply: [h4("04 0e 0a 01 09 10 00 55 44 33 22 11 c0")])
        let host = makeHost(ctl)
        let rp = try host.execute(HCI.ReadBDADDR().command)
        #expect(rp == hex("00 55 44 33 22 11 c0"))
        #expect(ctl.sentHex() == ["01 09 10 00"])
        #expect(ctl.unexpected.isEmpty)
    }

    @Test("execute() of a command answered by Command Status returns the status byte")
    func executeStatus() throws {
        let ctl = ScriptedController()
        ctl.when(h4("01 06 04 03 01 00 13"), reply: [h4("04 0f 04 00 01 06 04")])
        let host = makeHost(ctl)
        #expect(try host.execute(HCI.Disconnect(handle: 1).command) == [0x00])
    }

    @Test("a command rejected in Command Complete throws commandFailed naming the opcode and status")
    func rejectedComplete() {
        let ctl = ScriptedController()
        ctl.when(h4("01 0c 20 02 01 00"), reply: [h4("04 0e 04 01 0c 20 0c")])
        let host = makeHost(ctl)
        #expect(throws: HCIError.commandFailed(HCI.LESetScanEnable.opcode, .commandDisallowed)) {
            try host.execute(HCI.LESetScanEnable(enable: true, filterDuplicates: false).command)
        }
    }

    @Test("a command rejected in Command Status throws commandFailed naming the opcode and status")
    func rejectedStatus() {
        let ctl = ScriptedController()
        ctl.when(command: LECreateConnection.opcode, reply: [h4("04 0f 04 0c 01 0d 20")])
        let host = makeHost(ctl)
        let req = LECreateConnection(peer: DeviceAddress(BDAddress("C0:11:22:33:44:55")!, .random), ownAddressType: .random)
        do {
            try host.executeExpectingStatus(req.command)
            Issue.record("no error")
        } catch let e as HCIError {
            #expect(e == .commandFailed(LECreateConnection.opcode, .commandDisallowed))
            #expect(e.description.contains("LE Create Connection (0x200d)"))
        } catch { Issue.record("\(error)") }
    }

    @Test("a command never answered throws commandTimeout within its deadline")
    func timeout() {
        let ctl = ScriptedController()
        let host = makeHost(ctl)
        host.commandTimeoutMs = 50
        let start = Instant.now()
        #expect(throws: HCIError.commandTimeout(HCI.Reset.opcode, ms: 50)) { try host.execute(HCI.Reset().command) }
        let elapsedMs = Int(Instant.now().usSince(start) / 1000)
        #expect(elapsedMs >= 50)
        #expect(elapsedMs < 1000, "took \(elapsedMs) ms")
        #expect(ctl.sentHex() == ["01 03 0c 00"])
    }

    @Test("a timed-out command frees the queue: the next command is sent and answered")
    func timeoutDoesNotStallQueue() throws {
        let ctl = ScriptedController()
        ctl.when(h4("01 01 10 00"), reply: [Ev.complete(HCI.ReadLocalVersion.opcode, hex("00 0c 34 12 0c 5f 00 78 56"))])
        let host = makeHost(ctl)
        #expect(throws: HCIError.commandTimeout(HCI.Reset.opcode, ms: 30)) { try host.execute(HCI.Reset().command, timeoutMs: 30) }
        #expect(try host.execute(HCI.ReadLocalVersion().command).count == 9)
    }

    @Test("Num_HCI_Command_Packets = 0 holds the next command until a NOP Command Complete with ncmd 1")
    func flowControlNOP() throws {
        let ctl = ScriptedController()
        ctl.when(h4("01 03 0c 00"), reply: [h4("04 0e 04 00 03 0c 00")]) // ncmd 0
        ctl.when(h4("01 09 10 00"), reply: [h4("04 0e 0a 01 09 10 00 55 44 33 22 11 c0")])
        let host = makeHost(ctl)
        var first: Result<HCIHost.CommandOutcome, HCIError>?
        var second: Result<HCIHost.CommandOutcome, HCIError>?
        host.enqueue(HCI.Reset().command) { first = $0 }
        host.enqueue(HCI.ReadBDADDR().command) { second = $0 }
        #expect(ctl.sentHex() == ["01 03 0c 00"])
        #expect(try host.pump(until: Instant.now().adding(ms: 500)) { first != nil })
        #expect(host.commandCredits == 0)
        // Nothing else arrives: the second command stays queued.
        #expect(try host.pump(until: Instant.now()) { second != nil } == false)
        #expect(ctl.sentHex() == ["01 03 0c 00"])
        ctl.deliver(h4("04 0e 03 01 00 00")) // NOP, ncmd 1
        #expect(try host.pump(until: Instant.now().adding(ms: 500)) { second != nil })
        #expect(ctl.sentHex() == ["01 03 0c 00", "01 09 10 00"])
        guard case .success(.complete(let cc))? = second else { Issue.record("\(String(describing: second))"); return }
        #expect(cc.returnParameters == hex("00 55 44 33 22 11 c0"))
    }

    @Test("Num_HCI_Command_Packets = 0 holds the next command until another command's Command Complete with ncmd 1")
    func flowControlLaterComplete() throws {
        let ctl = ScriptedController()
        ctl.when(command: LECreateConnection.opcode, reply: [h4("04 0f 04 00 00 0d 20")]) // status ok, ncmd 0
        ctl.when(h4("01 0e 20 00"), reply: [Ev.complete(HCI.LECreateConnectionCancel.opcode)])
        let host = makeHost(ctl)
        let req = LECreateConnection(peer: DeviceAddress(BDAddress("C0:11:22:33:44:55")!, .random), ownAddressType: .random)
        try host.executeExpectingStatus(req.command)
        var done = false
        host.enqueue(HCI.LECreateConnectionCancel().command) { _ in done = true }
        #expect(ctl.sentOpcodes == [0x200D])
        // A late Command Complete for some other (earlier) command restores the credit.
        ctl.deliver(Ev.complete(HCIOpcode(rawValue: 0x0C03), ncmd: 1))
        #expect(try host.pump(until: Instant.now().adding(ms: 500)) { done })
        #expect(ctl.sentOpcodes == [0x200D, 0x200E])
    }

    @Test("a Command Complete for a command nobody sent is ignored")
    func strayComplete() throws {
        let ctl = ScriptedController()
        ctl.when(h4("01 03 0c 00"), reply: [Ev.complete(HCI.ReadBDADDR.opcode, hex("00 01 02 03 04 05 06")), h4("04 0e 04 01 03 0c 00")])
        let host = makeHost(ctl)
        #expect(try host.execute(HCI.Reset().command) == [0x00])
    }

    @Test("events nobody waits for reach onEvent handlers, as do Command Complete and Number Of Completed Packets")
    func eventsReachHandlers() throws {
        let ctl = ScriptedController()
        let host = makeHost(ctl)
        var seen: [HCIEvent] = []
        host.onEvent { seen.append($0) }
        ctl.deliver(h4("04 3e 0a 03 00 01 00 28 00 00 00 90 01"), h4("04 ff 02 aa bb"), h4("04 13 05 01 01 00 01 00"), h4("04 0e 03 01 00 00"))
        #expect(try host.pump(until: Instant.now().adding(ms: 500)) { seen.count == 4 })
        #expect(seen[0] == .leConnectionUpdateComplete(LEConnectionUpdateComplete(status: .success, handle: 1, interval: 0x28, latency: 0, supervisionTimeout: 0x190)))
        #expect(seen[1] == .other(.vendor, hex("aa bb")))
        #expect(seen[2] == .numberOfCompletedPackets([.init(handle: 1, count: 1)]))
        guard case .commandComplete = seen[3] else { Issue.record("\(seen[3])"); return }
    }

    @Test("an event that does not decode goes to onUndecodable and is otherwise ignored")
    func undecodable() throws {
        let ctl = ScriptedController()
        let host = makeHost(ctl)
        var bad: [(HCIPacket, WireError)] = []
        var events = 0
        host.onUndecodable { bad.append(($0, $1)) }
        host.onEvent { _ in events += 1 }
        ctl.deliver(h4("04 0f 03 00 01 0d"), h4("02 01 20 09 00 01"), h4("04 10 01 07"))
        #expect(try host.pump(until: Instant.now().adding(ms: 500)) { bad.count == 2 } )
        #expect(bad[0].0 == h4("04 0f 03 00 01 0d"))
        #expect(bad[0].1 == .truncated(field: "Command_Opcode", needed: 2, available: 1))
        #expect(bad[1].0.type == .acl)
        #expect(events == 0)
    }

    @Test("Hardware Error fails the command in flight and the one queued behind it, and every later command")
    func hardwareError() throws {
        let ctl = ScriptedController()
        ctl.when(h4("01 03 0c 00"), reply: [h4("04 10 01 07")])
        let host = makeHost(ctl)
        var inFlight: Result<HCIHost.CommandOutcome, HCIError>?
        var queued: Result<HCIHost.CommandOutcome, HCIError>?
        host.enqueue(HCI.Reset().command) { inFlight = $0 }
        host.enqueue(HCI.ReadLocalVersion().command) { queued = $0 }
        #expect(ctl.sentHex() == ["01 03 0c 00"])
        #expect(throws: HCIError.hardwareError(0x07)) { try host.pump(until: Instant.now().adding(ms: 500)) { false } }
        if case .failure(let e)? = inFlight { #expect(e == .hardwareError(0x07)) } else { Issue.record("in-flight command: \(String(describing: inFlight))") }
        if case .failure(let e)? = queued { #expect(e == .hardwareError(0x07)) } else { Issue.record("queued command: \(String(describing: queued))") }
        #expect(ctl.sentHex() == ["01 03 0c 00"])
        #expect(host.failure == .hardwareError(0x07))
        var later: Result<HCIHost.CommandOutcome, HCIError>?
        host.enqueue(HCI.Reset().command) { later = $0 }
        if case .failure(let e)? = later { #expect(e == .hardwareError(0x07)) } else { Issue.record("later command not failed at once") }
        #expect(throws: HCIError.hardwareError(0x07)) { try host.execute(HCI.ReadBDADDR().command) }
        #expect(ctl.sent.count == 1)
    }

    @Test("execute() of a command answered by Hardware Error throws hardwareError")
    func hardwareErrorExecute() {
        let ctl = ScriptedController()
        ctl.when(h4("01 03 0c 00"), reply: [h4("04 10 01 03")])
        let host = makeHost(ctl)
        #expect(throws: HCIError.hardwareError(0x03)) { try host.execute(HCI.Reset().command) }
    }

    @Test("the transport closing mid-wait throws .transport(.closedByPeer)")
    func closedMidWait() {
        let ctl = ScriptedController()
        ctl.closeWhenDrained = true
        let host = makeHost(ctl)
        #expect(throws: HCIError.transport(.closedByPeer("scripted"))) { try host.execute(HCI.Reset().command) }
        #expect(throws: HCIError.transport(.closedByPeer("scripted"))) { try host.execute(HCI.Reset().command) }
    }

    @Test("a send failure fails the command with the transport error")
    func sendFailure() {
        let ctl = ScriptedController()
        ctl.close()
        let host = makeHost(ctl)
        #expect(throws: HCIError.transport(.closedByPeer("scripted"))) { try host.execute(HCI.Reset().command) }
    }
}

@Suite("HCI host: ACL flow control")
struct HCIHostACLTests {
    @Test("a PDU is fragmented to aclMaxLength: first fragment PB 00, the rest PB 01")
    func fragmentation() throws {
        let ctl = ScriptedController()
        let host = makeHost(ctl)
        host.setACLBuffers(length: 4, packets: 10)
        host.sendACL(handle: 0x0040, pdu: hex("06 00 04 00 12 10 00 ff 00 01"))
        #expect(ctl.sentHex(.acl) == ["02 40 00 04 00 06 00 04 00", "02 40 10 04 00 12 10 00 ff", "02 40 10 02 00 00 01"])
    }

    @Test("a drain has a deadline: packets never reported completed fail it with ACLDrainTimeout; completed ones succeed it")
    func drainDeadline() throws {
        let ctl = ScriptedController()
        let host = makeHost(ctl)
        host.setACLBuffers(length: 27, packets: 4)
        host.sendACL(handle: 1, pdu: hex("03 00 04 00 52 10 00"))
        let quiet = host.startDrain(handle: 1, timeoutMs: 40)
        #expect(throws: ACLDrainTimeout(handle: 1, packets: 1, ms: 40)) { try host.wait(quiet, until: Instant.now().adding(ms: 1000)) }
        let ok = host.startDrain(handle: 1, timeoutMs: 1000)
        ctl.deliver(Ev.completed(handle: 1))
        try host.wait(ok, until: Instant.now().adding(ms: 500))
        #expect(host.unacknowledgedACL(handle: 1) == 0)
    }

    @Test("a PDU that fits is one packet; an empty PDU is one empty packet")
    func singleFragment() {
        let ctl = ScriptedController()
        let host = makeHost(ctl)
        host.setACLBuffers(length: 27, packets: 10)
        host.sendACL(handle: 1, pdu: hex("01 00 04 00 1e"))
        host.sendACL(handle: 1, pdu: [])
        #expect(ctl.sentHex(.acl) == ["02 01 00 05 00 01 00 04 00 1e", "02 01 00 00 00"])
    }

    @Test("with 2 credits a 3-fragment PDU sends 2 packets; the third goes after Number Of Completed Packets")
    func credits() throws {
        let ctl = ScriptedController()
        let host = makeHost(ctl)
        host.setACLBuffers(length: 27, packets: 2)
        let pdu = (0..<60).map { UInt8($0) }
        host.sendACL(handle: 0x0001, pdu: pdu)
        #expect(ctl.sent.count == 2)
        #expect(host.aclCredits == 0)
        #expect(host.unacknowledgedACL(handle: 1) == 3)
        // Pumping without completions sends nothing more.
        _ = try host.pump(until: Instant.now()) { false }
        #expect(ctl.sent.count == 2)
        ctl.deliver(h4("04 13 05 01 01 00 01 00"))
        #expect(try host.pump(until: Instant.now().adding(ms: 500)) { ctl.sent.count == 3 })
        let third = try ACLPacket.decode(ctl.sent[2].bytes)
        #expect(third.boundary == .continuing)
        #expect(third.data == Array(pdu[54...]))
        #expect(host.unacknowledgedACL(handle: 1) == 2)
        ctl.deliver(h4("04 13 05 01 01 00 02 00"))
        #expect(try host.pump(until: Instant.now().adding(ms: 500)) { host.unacknowledgedACL(handle: 1) == 0 })
        #expect(host.aclCredits == 2)
    }

    @Test("completions for more packets than are outstanding do not inflate the credits")
    func creditsCapped() throws {
        let ctl = ScriptedController()
        let host = makeHost(ctl)
        host.setACLBuffers(length: 27, packets: 2)
        host.sendACL(handle: 1, pdu: hex("01 00 04 00 1e"))
        ctl.deliver(h4("04 13 05 01 01 00 09 00"), h4("04 13 05 01 02 00 05 00"))
        _ = try host.pump(until: Instant.now().adding(ms: 100)) { ctl.inbox.isEmpty }
        #expect(host.aclCredits == 2)
    }

    @Test("Disconnection Complete returns the credits of the handle's unacknowledged packets and drops its queue")
    func disconnectReleasesCredits() throws {
        let ctl = ScriptedController()
        let host = makeHost(ctl)
        host.setACLBuffers(length: 27, packets: 1)
        host.sendACL(handle: 1, pdu: hex("01 00 04 00 1e"))
        host.sendACL(handle: 1, pdu: hex("01 00 04 00 1e"))
        #expect(ctl.sent.count == 1)
        ctl.deliver(h4("04 05 04 00 01 00 13"))
        _ = try host.pump(until: Instant.now().adding(ms: 100)) { ctl.inbox.isEmpty }
        #expect(host.aclCredits == 1)
        #expect(host.unacknowledgedACL(handle: 1) == 0)
        #expect(ctl.sent.count == 1)
    }

    @Test("incoming ACL reaches onACL handlers")
    func incomingACL() throws {
        let ctl = ScriptedController()
        let host = makeHost(ctl)
        var got: [ACLPacket] = []
        host.onACL { got.append($0) }
        ctl.deliver(h4("02 01 20 05 00 01 00 04 00 13"))
        #expect(try host.pump(until: Instant.now().adding(ms: 100)) { got.count == 1 })
        #expect(got[0] == ACLPacket(handle: 1, boundary: .firstFlushable, data: hex("01 00 04 00 13")))
    }
}

@Suite("HCI host: observers")
struct HCIHostObserverTests {
    final class Recorder: PacketObserver {
        var seen: [(HCIPacket, Direction)] = []
        func observe(_ packet: HCIPacket, direction: Direction, at time: Instant) { seen.append((packet, direction)) }
    }

    @Test("every packet passes the observers once, in both directions")
    func observers() throws {
        let ctl = ScriptedController()
        ctl.when(h4("01 03 0c 00"), reply: [h4("04 0e 04 01 03 0c 00")])
        let host = makeHost(ctl)
        let rec = Recorder()
        host.observers.append(rec)
        try host.execute(HCI.Reset().command)
        #expect(rec.seen.count == 2)
        #expect(rec.seen[0].0 == h4("01 03 0c 00") && rec.seen[0].1 == .sent)
        #expect(rec.seen[1].0 == h4("04 0e 04 01 03 0c 00") && rec.seen[1].1 == .received)
    }
}

@Suite("HCI host: initialisation")
struct HCIHostInitTests {
    /// A controller that answers the initialisation sequence; Read BD_ADDR returns `bdaddr`.
    static func controller(bdaddr: String, leBuffer: String = "00 1b 00 40", version: String = "00 0c 34 12 0c 5f 00 78 56") -> ScriptedController {
        let ctl = ScriptedController()
        ctl.when(h4("01 03 0c 00"), reply: [Ev.complete(HCI.Reset.opcode)])
        ctl.when(h4("01 01 10 00"), reply: [Ev.complete(HCI.ReadLocalVersion.opcode, hex(version))])
        ctl.when(h4("01 02 10 00"), reply: [Ev.complete(HCI.ReadLocalSupportedCommands.opcode, [0x00] + [UInt8](repeating: 0, count: 37) + [0x60] + [UInt8](repeating: 0, count: 26))])
        ctl.when(h4("01 03 10 00"), reply: [Ev.complete(HCI.ReadLocalSupportedFeatures.opcode, hex("00 00 00 00 00 60 00 00 00"))])
        ctl.when(h4("01 03 20 00"), reply: [Ev.complete(HCI.LEReadLocalSupportedFeatures.opcode, hex("00 00 10 00 00 00 00 00 00"))])
        ctl.when(h4("01 09 10 00"), reply: [Ev.complete(HCI.ReadBDADDR.opcode, hex("00 " + bdaddr))])
        ctl.when(command: HCI.SetEventMask.opcode, reply: [Ev.complete(HCI.SetEventMask.opcode)])
        ctl.when(command: HCI.LESetEventMask.opcode, reply: [Ev.complete(HCI.LESetEventMask.opcode)])
        ctl.when(h4("01 02 20 00"), reply: [Ev.complete(HCI.LEReadBufferSize.opcode, hex(leBuffer))])
        ctl.when(h4("01 05 10 00"), reply: [Ev.complete(HCI.ReadBufferSize.opcode, hex("00 fd 03 40 08 00"))])
        ctl.when(command: HCI.LESetRandomAddress.opcode, reply: [Ev.complete(HCI.LESetRandomAddress.opcode)])
        return ctl
    }

    @Test("a controller whose Read BD_ADDR is all zeros gets a static random address (top two bits 11)")
    func zeroAddressGetsStaticRandom() throws {
        let ctl = Self.controller(bdaddr: "00 00 00 00 00 00")
        let host = makeHost(ctl)
        let info = try host.initialise()
        #expect(ctl.sentOpcodes == [0x0C03, 0x1001, 0x1009, 0x1002, 0x2003, 0x2002, 0x0C01, 0x2001, 0x2005])
        #expect(ctl.sentHex().contains("01 01 0c 08 90 88 00 02 00 80 00 20"))
        #expect(ctl.sentHex().contains("01 01 20 08 5f 1a 08 00 00 00 00 00"))
        let setRandom = try #require(ctl.sent.last)
        let cmd = try HCICommand.decode(setRandom.bytes)
        #expect(cmd.opcode == HCI.LESetRandomAddress.opcode)
        #expect(cmd.parameters.count == 6)
        #expect(cmd.parameters[5] & 0xC0 == 0xC0)
        #expect(info.ownAddress.type == .random)
        #expect(info.ownAddress.address.bytes == cmd.parameters)
        #expect(info.ownAddress.address.randomAddressKind == .static)
        #expect(info.publicAddress.isZero)
        #expect(info.version?.hciVersion == 0x0C)
        #expect(info.aclBuffers == BufferSize(aclLength: 27, aclPackets: 64))
        #expect(host.aclMaxLength == 27 && host.aclTotalPackets == 64)
        #expect(info.supportsExtendedScanning)
        #expect(info.hasExtendedAdvertising)
        #expect(ctl.unexpected.isEmpty)
    }

    @Test("a controller with a public address uses it, and sends no LE Set Random Address")
    func publicAddress() throws {
        let ctl = Self.controller(bdaddr: "55 44 33 22 11 c0")
        let info = try makeHost(ctl).initialise()
        #expect(info.ownAddress == DeviceAddress(BDAddress("C0:11:22:33:44:55")!, .public))
        #expect(!ctl.sentOpcodes.contains(0x2005))
    }

    @Test("a fixed random address is set as given")
    func fixedRandom() throws {
        let ctl = Self.controller(bdaddr: "00 00 00 00 00 00")
        let info = try makeHost(ctl).initialise(randomAddress: BDAddress("C1:02:03:04:05:06")!)
        #expect(ctl.sentHex().last == "01 05 20 06 06 05 04 03 02 c1")
        #expect(info.ownAddress == DeviceAddress(BDAddress("C1:02:03:04:05:06")!, .random))
    }

    @Test("an LE buffer size of 0 falls back to Read Buffer Size")
    func bufferFallback() throws {
        let ctl = Self.controller(bdaddr: "55 44 33 22 11 c0", leBuffer: "00 00 00 00")
        let host = makeHost(ctl)
        let info = try host.initialise()
        #expect(ctl.sentOpcodes.contains(0x1005))
        #expect(info.aclBuffers == BufferSize(aclLength: 1021, aclPackets: 8))
        #expect(host.aclMaxLength == 1021)
    }

    @Test("optional commands that the controller rejects are tolerated")
    func optionalRejected() throws {
        let ctl = ScriptedController()
        ctl.when(h4("01 03 0c 00"), reply: [Ev.complete(HCI.Reset.opcode)])
        for op in [HCI.ReadLocalVersion.opcode, HCI.ReadLocalSupportedCommands.opcode, HCI.ReadLocalSupportedFeatures.opcode, HCI.LEReadLocalSupportedFeatures.opcode] {
            ctl.when(command: op, reply: [Ev.complete(op, [0x01])])
        }
        ctl.when(h4("01 09 10 00"), reply: [Ev.complete(HCI.ReadBDADDR.opcode, hex("00 55 44 33 22 11 c0"))])
        ctl.when(command: HCI.SetEventMask.opcode, reply: [Ev.complete(HCI.SetEventMask.opcode)])
        ctl.when(command: HCI.LESetEventMask.opcode, reply: [Ev.complete(HCI.LESetEventMask.opcode)])
        ctl.when(h4("01 02 20 00"), reply: [Ev.complete(HCI.LEReadBufferSize.opcode, hex("00 1b 00 40"))])
        let info = try makeHost(ctl).initialise()
        #expect(info.version == nil)
        #expect(info.supportedCommands.isEmpty)
        #expect(!info.supportsExtendedScanning)
    }

    @Test("a static random address never has all random bits 0 or 1 and always has top bits 11")
    func staticRandomShape() {
        for _ in 0..<200 {
            let a = HCIHost.makeStaticRandomAddress()
            #expect(a.bytes[5] & 0xC0 == 0xC0)
            let rest = Array(a.bytes[0..<5]) + [a.bytes[5] & 0x3F]
            #expect(!rest.allSatisfy { $0 == 0 })
            #expect(!(rest[0..<5].allSatisfy { $0 == 0xFF } && rest[5] == 0x3F))
        }
    }
}
