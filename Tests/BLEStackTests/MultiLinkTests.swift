import Testing
@testable import BLEWire
@testable import BLETransport
@testable import BLEHCI
@testable import BLEGAP
@testable import BLEL2CAP
@testable import BLEATT
@testable import BLEGATT

/// ACL basic frames on any handle (the fixtures in TestSupport use handle 1).
private func aclOut(_ handle: UInt16, _ payload: [UInt8]) -> HCIPacket {
    var w = ByteWriter()
    w.u16(UInt16(payload.count)); w.u16(CID.att); w.append(payload)
    return ACLPacket(handle: handle, boundary: .firstNonFlushable, data: w.bytes).packet
}
private func aclIn(_ handle: UInt16, _ payload: [UInt8]) -> HCIPacket {
    var w = ByteWriter()
    w.u16(UInt16(payload.count)); w.u16(CID.att); w.append(payload)
    return ACLPacket(handle: handle, boundary: .firstFlushable, data: w.bytes).packet
}

/// Two links (handles 0x0001 and 0x0002) on one host and one scripted controller.
private final class TwoLinks {
    let ctl = ScriptedController()
    let host: HCIHost
    let a: ATTBearer
    let b: ATTBearer
    var notificationsB: [HandleValue] = []

    init() {
        ctl.autoCompleteACL = true
        host = HCIHost(transport: ctl)
        host.interruptible = false
        host.setACLBuffers(length: 27, packets: 4)
        a = ATTBearer(link: L2CAPLink(host: host, handle: 1))
        b = ATTBearer(link: L2CAPLink(host: host, handle: 2))
        a.transactionTimeoutMs = 300
        b.transactionTimeoutMs = 300
        b.onNotification = { [unowned self] in self.notificationsB.append($0) }
    }
}

@Suite("Several links in one event loop")
struct MultiLinkTests {
    @Test("two links interleave: a notification on B arrives while A waits for its Write Response, and both complete")
    func interleave() throws {
        let t = TwoLinks()
        // A writes handle 0x0010; nothing answers yet. B reads handle 0x0020.
        let wa = t.a.submit(ATT.WriteRequest(handle: 0x0010, value: [0xFF]))
        let rb = t.b.submit(ATT.ReadRequest(handle: 0x0020))
        #expect(t.ctl.sentHex(.acl) == ["02 01 00 08 00 04 00 04 00 12 10 00 ff", "02 02 00 07 00 03 00 04 00 0a 20 00"])
        // B's notification and B's response come first, then A's response.
        t.ctl.deliver(aclIn(2, hex("1b 21 00 07")), aclIn(2, hex("0b 2a")), aclIn(1, hex("13")))
        _ = try t.host.pump(until: Instant.now().adding(ms: 500)) { wa.isComplete && rb.isComplete }
        #expect(t.notificationsB == [HandleValue(handle: 0x0021, value: [0x07])])
        #expect(try rb.result?.get() == ATT.ReadResponse([0x2A]))
        #expect(try wa.result?.get() == ATT.WriteResponse())
    }

    @Test("a disconnection on A fails only A's pending and queued requests; B's completes")
    func disconnectFailsOnlyItsLink() throws {
        let t = TwoLinks()
        let a1 = t.a.submit(ATT.ReadRequest(handle: 0x0010))
        let a2 = t.a.submit(ATT.ReadRequest(handle: 0x0011)) // queued behind a1
        let b1 = t.b.submit(ATT.ReadRequest(handle: 0x0020))
        t.ctl.deliver(Ev.disconnected(handle: 1, reason: 0x08), aclIn(2, hex("0b 01")))
        _ = try t.host.pump(until: Instant.now().adding(ms: 500)) { a1.isComplete && a2.isComplete && b1.isComplete }
        #expect(throws: ATTError.disconnected(reason: .connectionTimeout)) { try a1.result?.get() }
        #expect(throws: ATTError.disconnected(reason: .connectionTimeout)) { try a2.result?.get() }
        #expect(try b1.result?.get() == ATT.ReadResponse([0x01]))
        // The queued request on A was never sent.
        #expect(!t.ctl.sentHex(.acl).contains { $0.hasSuffix("0a 11 00") })
        #expect(t.b.state == .open)
    }

    @Test("a second ATT request on one bearer is queued, not trapped, and sent when the first is answered")
    func secondRequestQueued() throws {
        let t = TwoLinks()
        let r1 = t.a.submit(ATT.ReadRequest(handle: 0x0010))
        let r2 = t.a.submit(ATT.ReadRequest(handle: 0x0012))
        #expect(t.a.pendingRequest == .readRequest && t.a.queuedRequests == 1)
        #expect(t.ctl.sentHex(.acl).count == 1)
        t.ctl.deliver(aclIn(1, hex("0b 01")))
        _ = try t.host.pump(until: Instant.now().adding(ms: 500)) { r1.isComplete }
        #expect(t.ctl.sentHex(.acl).last == "02 01 00 07 00 03 00 04 00 0a 12 00")
        t.ctl.deliver(aclIn(1, hex("0b 02")))
        _ = try t.host.pump(until: Instant.now().adding(ms: 500)) { r2.isComplete }
        #expect(try r1.result?.get() == ATT.ReadResponse([1]))
        #expect(try r2.result?.get() == ATT.ReadResponse([2]))
    }

    @Test("an ATT timeout fails the outstanding request with timeout and the queued ones with bearerClosed, and reports it once")
    func timeoutClosesBearer() throws {
        let t = TwoLinks()
        var timeouts: [ATTError] = []
        t.a.onTimeout = { timeouts.append($0) }
        let r1 = t.a.submit(ATT.ReadRequest(handle: 0x0010))
        let r2 = t.a.submit(ATT.ReadRequest(handle: 0x0011))
        _ = try t.host.pump(until: Instant.now().adding(ms: 2000)) { r1.isComplete && r2.isComplete }
        #expect(throws: ATTError.timeout(request: .readRequest, handle: 0x0010, ms: 300)) { try r1.result?.get() }
        #expect(throws: ATTError.bearerClosed) { try r2.result?.get() }
        #expect(timeouts.count == 1)
        #expect(throws: ATTError.bearerClosed) { try t.a.request(ATT.ReadRequest(handle: 0x0012)) }
        #expect(t.ctl.sentHex(.acl).count == 1) // r2 was never sent
    }

    @Test("close() fails every queued and in-flight command and ATT request, clears ACL, drops timers, and runs close handlers once")
    func closeFailsEverything() throws {
        let t = TwoLinks()
        var cmdResults: [Result<HCIHost.CommandOutcome, HCIError>] = []
        t.host.enqueue(HCI.ReadBDADDR().command) { cmdResults.append($0) }   // in flight (1 credit)
        t.host.enqueue(HCI.ReadLocalVersion().command) { cmdResults.append($0) } // queued
        let ra = t.a.submit(ATT.ReadRequest(handle: 0x0010))
        let rb = t.b.submit(ATT.ReadRequest(handle: 0x0020))
        var fired = false
        t.host.schedule(afterMs: 10) { fired = true }
        var closes = 0
        t.host.onClose { _ in closes += 1 }
        t.host.close()
        t.host.close()
        #expect(cmdResults.count == 2)
        #expect(cmdResults.allSatisfy { if case .failure(.closed) = $0 { return true } else { return false } })
        #expect(throws: ATTError.disconnected(reason: nil)) { try ra.result?.get() }
        #expect(throws: ATTError.disconnected(reason: nil)) { try rb.result?.get() }
        #expect(t.host.unacknowledgedACL(handle: 1) == 0 && t.host.aclCredits == t.host.aclTotalPackets)
        #expect(closes == 1)
        #expect(throws: HCIError.closed) { try t.host.pump(until: Instant.now().adding(ms: 50)) { false } }
        #expect(!fired)
        #expect(throws: HCIError.closed) { try t.host.execute(HCI.Reset().command) }
    }

    @Test("a command held back by zero command credits times out at its own deadline, counted from when it was queued")
    func zeroCreditsTimeout() throws {
        let ctl = ScriptedController()
        // Reset is answered with Num_HCI_Command_Packets 0 and nothing frees a credit.
        ctl.when(command: HCI.Reset.opcode, reply: [Ev.complete(HCI.Reset.opcode, ncmd: 0)])
        let host = HCIHost(transport: ctl)
        host.interruptible = false
        try host.execute(HCI.Reset().command)
        #expect(host.commandCredits == 0)
        let start = Instant.now()
        #expect(throws: HCIError.commandTimeout(HCI.ReadBDADDR.opcode, ms: 80)) { try host.execute(HCI.ReadBDADDR().command, timeoutMs: 80) }
        #expect(start.msUntil(Instant.now()) < 0 || Instant.now().usSince(start) < 1_000_000)
        #expect(ctl.sentOpcodes == [0x0C03]) // never sent
    }

    @Test("handler tokens: a link and a bearer release their registrations when the link ends")
    func tokensReleased() throws {
        let ctl = ScriptedController()
        let host = HCIHost(transport: ctl)
        host.interruptible = false
        let before = host.registrationCount
        let link = L2CAPLink(host: host, handle: 1)
        let bearer = ATTBearer(link: link)
        #expect(host.registrationCount > before)
        ctl.deliver(Ev.disconnected(handle: 1))
        _ = try host.pump(until: Instant.now().adding(ms: 200)) { !link.isOpen }
        #expect(host.registrationCount == before)
        #expect(bearer.state == .closed(.disconnected(reason: .remoteUserTerminated)))
    }

    @Test("ACL credits are shared fairly: with one credit, two links' fragments alternate")
    func fairCredits() throws {
        let ctl = ScriptedController()
        let host = HCIHost(transport: ctl)
        host.interruptible = false
        host.setACLBuffers(length: 4, packets: 1)
        host.sendACL(handle: 3, pdu: [3]) // takes the only credit
        host.sendACL(handle: 1, pdu: [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]) // 3 fragments
        host.sendACL(handle: 2, pdu: [2, 2, 2, 2, 2, 2, 2, 2])             // 2 fragments
        var order: [UInt16] = []
        func sentHandles() -> [UInt16] { ctl.sent.filter { $0.type == .acl }.compactMap { try? ACLPacket.decode($0.bytes).handle } }
        for _ in 0..<6 {
            order = sentHandles()
            guard let last = order.last else { break }
            ctl.deliver(Ev.completed(handle: last))
            _ = try host.pump(until: Instant.now().adding(ms: 100)) { ctl.inbox.isEmpty }
        }
        #expect(sentHandles() == [3, 1, 2, 1, 2, 1])
    }

    @Test("after a Hardware Error, fragments queued before it are not sent during clean-up")
    func hardwareErrorDropsQueuedACL() throws {
        let ctl = ScriptedController()
        let host = HCIHost(transport: ctl)
        host.interruptible = false
        host.setACLBuffers(length: 4, packets: 1)
        host.sendACL(handle: 1, pdu: Array(repeating: 7, count: 12)) // 1 sent, 2 waiting for credits
        ctl.deliver(h4("04 10 01 42"))
        #expect(throws: HCIError.hardwareError(0x42)) { try host.pump(until: Instant.now().adding(ms: 100)) { false } }
        #expect(host.recoverForCleanup())
        ctl.deliver(Ev.completed(handle: 1))
        _ = try host.pump(until: Instant.now().adding(ms: 100)) { ctl.inbox.isEmpty }
        #expect(ctl.sent.filter { $0.type == .acl }.count == 1)
        #expect(host.unacknowledgedACL(handle: 1) == 0)
    }

    @Test("timers run inside pump in due order and can be cancelled")
    func timers() throws {
        let host = HCIHost(transport: ScriptedController())
        host.interruptible = false
        var ran: [Int] = []
        host.schedule(afterMs: 20) { ran.append(2) }
        host.schedule(afterMs: 5) { ran.append(1) }
        let t = host.schedule(afterMs: 10) { ran.append(99) }
        host.cancel(t)
        _ = try host.pump(until: Instant.now().adding(ms: 300)) { ran.count == 2 }
        #expect(ran == [1, 2])
    }
}

@Suite("Future")
struct FutureTests {
    @Test("completes exactly once; callbacks run in order, and at once when added after completion")
    func once() throws {
        let f = Future<Int>()
        var seen: [String] = []
        f.whenSuccess { seen.append("a\($0)") }
        f.whenSuccess { seen.append("b\($0)") }
        f.succeed(1)
        f.succeed(2)
        f.fail(HCIError.closed)
        f.whenSuccess { seen.append("c\($0)") }
        #expect(seen == ["a1", "b1", "c1"])
        #expect(try f.result?.get() == 1)
    }

    @Test("map, flatMap and recover chain; a throw in a step fails the chain")
    func chain() throws {
        let f = Future<Int>()
        let g = f.map { $0 * 2 }.flatMap { v in Future(value: "\(v)") }
        let h = f.map { _ -> Int in throw GATTError.serviceNotFound(BluetoothUUID(uint16: 0x180F)) }
            .recover { _ in Future(value: 7) }
        f.succeed(21)
        #expect(try g.result?.get() == "42")
        #expect(try h.result?.get() == 7)
    }

    @Test("sequentially runs steps in order and stops at the first failure")
    func sequence() {
        var ran: [Int] = []
        let pending = Future<Void>()
        let all = sequentially([1, 2, 3]) { i -> Future<Void> in
            ran.append(i)
            if i == 1 { return pending }
            if i == 2 { return Future(error: HCIError.closed) }
            return .done
        }
        #expect(ran == [1] && !all.isComplete)
        pending.succeed(())
        #expect(ran == [1, 2])
        #expect(throws: HCIError.closed) { try all.result?.get() }
    }
}

@Suite("Central: the connection manager")
struct ConnectionManagerTests {
    static let peerA = DeviceAddress(BDAddress("C0:11:22:33:44:55")!, .random)
    static let peerB = DeviceAddress(BDAddress("C0:11:22:33:44:66")!, .random)

    @Test("connections are made one at a time: the second LE Create Connection waits for the first LE Connection Complete")
    func serialised() throws {
        let ctl = ScriptedController()
        ctl.when(command: LECreateConnection.opcode, reply: [h4("04 0f 04 00 01 0d 20")])
        let host = HCIHost(transport: ctl)
        host.interruptible = false
        let central = Central(host: host, info: ControllerInfo())
        let fa = central.startConnect(to: Self.peerA, timeoutMs: 1000)
        let fb = central.startConnect(to: Self.peerB, timeoutMs: 1000)
        _ = try host.pump(until: Instant.now().adding(ms: 50)) { false }
        #expect(ctl.sentOpcodes == [0x200D])
        #expect(central.pendingConnect == Self.peerA)
        ctl.deliver(h4("04 3e 13 01 00 01 00 00 01 55 44 33 22 11 c0 06 00 00 00 c8 00 00"))
        _ = try host.pump(until: Instant.now().adding(ms: 200)) { ctl.sentOpcodes.count == 2 }
        #expect(try fa.result?.get().handle == 1)
        #expect(ctl.sentOpcodes == [0x200D, 0x200D])
        #expect(central.pendingConnect == Self.peerB)
        ctl.deliver(h4("04 3e 13 01 00 02 00 00 01 66 44 33 22 11 c0 06 00 00 00 c8 00 00"))
        _ = try host.pump(until: Instant.now().adding(ms: 200)) { fb.isComplete }
        #expect(try fb.result?.get().handle == 2)
        #expect(central.connections.count == 2)
    }

    @Test("a connection rejected with Command Disallowed fails that attempt and the next one proceeds")
    func rejectedThenNext() throws {
        let ctl = ScriptedController()
        ctl.when(command: LECreateConnection.opcode, reply: [h4("04 0f 04 0c 01 0d 20")], once: true)
        ctl.when(command: LECreateConnection.opcode, reply: [h4("04 0f 04 00 01 0d 20"), h4("04 3e 13 01 00 02 00 00 01 66 44 33 22 11 c0 06 00 00 00 c8 00 00")])
        let host = HCIHost(transport: ctl)
        host.interruptible = false
        let central = Central(host: host, info: ControllerInfo())
        let fa = central.startConnect(to: Self.peerA, timeoutMs: 1000)
        let fb = central.startConnect(to: Self.peerB, timeoutMs: 1000)
        _ = try host.pump(until: Instant.now().adding(ms: 300)) { fa.isComplete && fb.isComplete }
        #expect(throws: HCIError.commandFailed(LECreateConnection.opcode, .commandDisallowed)) { try fa.result?.get() }
        #expect(try fb.result?.get().peer == Self.peerB)
    }

    @Test("a connection that completes after its attempt was given up is disconnected, not leaked")
    func lateCompletionDisconnected() throws {
        let ctl = ScriptedController()
        ctl.when(command: LECreateConnection.opcode, reply: [h4("04 0f 04 00 01 0d 20")])
        ctl.when(command: HCI.LECreateConnectionCancel.opcode, reply: [Ev.complete(HCI.LECreateConnectionCancel.opcode)]) // but no Connection Complete (Bumble)
        ctl.when(command: HCI.Disconnect.opcode, reply: [h4("04 0f 04 00 01 06 04"), h4("04 05 04 00 01 00 16")])
        let host = HCIHost(transport: ctl)
        host.interruptible = false
        let central = Central(host: host, info: ControllerInfo())
        central.cancelGraceMs = 30
        #expect(throws: GAPError.connectCancelUnconfirmed(Self.peerA, ms: 20)) { try central.connect(to: Self.peerA, timeoutMs: 20) }
        #expect(central.abandoned.contains(Self.peerA))
        ctl.deliver(h4("04 3e 13 01 00 01 00 00 01 55 44 33 22 11 c0 06 00 00 00 c8 00 00"))
        _ = try host.pump(until: Instant.now().adding(ms: 300)) { central.connections.isEmpty && ctl.sentOpcodes.contains(0x0406) }
        #expect(ctl.sentOpcodes == [0x200D, 0x200E, 0x0406])
        #expect(central.connections.isEmpty)
    }

    @Test("a late completion the owner adopts (the gateway) is kept: handed to onUnrequestedConnection, no Disconnect")
    func lateCompletionAdopted() throws {
        let ctl = ScriptedController()
        ctl.when(command: LECreateConnection.opcode, reply: [h4("04 0f 04 00 01 0d 20")])
        ctl.when(command: HCI.LECreateConnectionCancel.opcode, reply: [Ev.complete(HCI.LECreateConnectionCancel.opcode)]) // no Connection Complete (stock Bumble)
        let host = HCIHost(transport: ctl)
        host.interruptible = false
        let central = Central(host: host, info: ControllerInfo())
        central.cancelGraceMs = 30
        var adopted: [LEConnection] = []
        central.adoptUnrequested { c in adopted.append(c); return true }
        #expect(throws: GAPError.connectCancelUnconfirmed(Self.peerA, ms: 20)) { try central.connect(to: Self.peerA, timeoutMs: 20) }
        ctl.deliver(h4("04 3e 13 01 00 01 00 00 01 55 44 33 22 11 c0 06 00 00 00 c8 00 00"))
        _ = try host.pump(until: Instant.now().adding(ms: 200)) { !adopted.isEmpty }
        _ = try host.pump(until: Instant.now().adding(ms: 50)) { false }
        #expect(adopted.map(\.peer) == [Self.peerA] && adopted.first?.handle == 1)
        #expect(ctl.sentOpcodes == [0x200D, 0x200E])
        #expect(central.connections[1]?.isConnected == true)
    }
}
