import Testing
@testable import BLEWire
@testable import BLEHCI
@testable import BLEGAP
@testable import Attled

/// The device keeper (issue 20) on a scripted controller: no sockets, the
/// keeper's decisions judged by the HCI commands it sends and its events.
@Suite("DeviceKeeper: links that last")
struct KeeperTests {
    static let lamp = "C0:11:22:33:44:55"
    static let lamp2 = "C0:11:22:33:44:66"

    /// An ADV_IND from a random address `addr` ("C0:11:...") named `name`.
    static func report(_ addr: String, _ name: String) -> HCIPacket {
        let a = BDAddress(addr)!.bytes
        let data: [UInt8] = [0x02, 0x01, 0x06, UInt8(name.utf8.count + 1), 0x09] + Array(name.utf8)
        let params: [UInt8] = [0x02, 0x01, 0x00, 0x01] + a + [UInt8(data.count)] + data + [0xC4]
        return HCIPacket(.event, [0x3E, UInt8(params.count)] + params)
    }

    /// LE Connection Complete for `addr` on `handle` (status 0: success).
    static func connected(_ addr: String, handle: UInt8, status: UInt8 = 0) -> HCIPacket {
        let a = BDAddress(addr)!.bytes
        let params: [UInt8] = [0x01, status, handle, 0x00, 0x00, 0x01] + a + [0x06, 0x00, 0x00, 0x00, 0xC8, 0x00, 0x00]
        return HCIPacket(.event, [0x3E, UInt8(params.count)] + params)
    }

    final class World {
        let ctl: ScriptedController
        let stack: BLEStack
        let keeper: DeviceKeeper
        let owner: KeeperOwner
        var events: [String] = []
        var work: Set<String> = []

        /// - Parameter acceptList: the controller lists the Filter Accept List
        ///   commands (8 entries); the policy's `useAcceptList` decides.
        /// - Parameter claim: what the test's owner claims each lamp heard as.
        init(policy: DeviceKeeper.Policy = { var p = DeviceKeeper.Policy(); p.useAcceptList = false; return p }(),
             claim: Claim = .keep, acceptList: Bool = false, reopen: (() throws -> BLEStack)? = nil) throws {
            ctl = HCIHostInitTests.controller(bdaddr: "00 00 00 00 00 00")
            if acceptList {
                var commands = [UInt8](repeating: 0, count: 64)
                commands[26] = 0xC0; commands[27] = 0x03; commands[37] = 0x60
                ctl.expect(h4("01 02 10 00"), reply: [Ev.complete(HCI.ReadLocalSupportedCommands.opcode, [0x00] + commands)])
                ctl.when(command: HCI.LEReadFilterAcceptListSize.opcode, reply: [Ev.complete(HCI.LEReadFilterAcceptListSize.opcode, [0x00, 0x08])])
                ctl.when(command: HCI.LEClearFilterAcceptList.opcode, reply: [Ev.complete(HCI.LEClearFilterAcceptList.opcode)])
                ctl.when(command: HCI.LEAddDeviceToFilterAcceptList.opcode, reply: [Ev.complete(HCI.LEAddDeviceToFilterAcceptList.opcode)])
            }
            ctl.when(command: LEScanParameters.opcode, reply: [Ev.complete(LEScanParameters.opcode)])
            ctl.when(command: HCI.LESetScanEnable.opcode, reply: [Ev.complete(HCI.LESetScanEnable.opcode)])
            ctl.when(command: LECreateConnection.opcode, reply: [Ev.status(LECreateConnection.opcode)])
            stack = try BLEStack(transport: ctl)
            stack.host.interruptible = false
            stack.central.airRequests = []
            keeper = DeviceKeeper(stack: stack, policy: policy, reopen: reopen)
            owner = keeper.owner("test")
            owner.wants = { $0.name?.hasPrefix("Lamp") == true ? claim : nil }
            owner.hasWork = { [unowned self] d in self.work.contains(d.name ?? "") }
            owner.subscribe { [unowned self] e in
                switch e {
                case let .linkUp(d, _): self.events.append("up \(d.name ?? "?")")
                case let .linkDown(d, _, planned): self.events.append("down \(d.name ?? "?")\(planned ? " planned" : "")")
                case let .becameOnDemand(d, _): self.events.append("on demand \(d.name ?? "?")")
                case .controllerLost: self.events.append("controller lost")
                case .controllerBack: self.events.append("controller back")
                case .waitingFromAcceptList: self.events.append("accept list")
                case let .connectFailed(d, _): self.events.append("failed \(d.name ?? d.address.address.description)")
                case let .notAtRememberedAddress(d, _): self.events.append("not at remembered \(d.name ?? d.address.address.description)")
                case .scanFailed, .stateChanged: break  // the tests judge the commands sent and the other events
                }
            }
        }

        func pump(ms: Int = 200, until done: () -> Bool = { false }) throws {
            _ = try stack.host.pump(until: Instant.now().adding(ms: ms), done)
        }

        func device(_ addr: String) throws -> KeptDevice { try #require(keeper.devices[BDAddress(addr)!]) }

        /// Opcodes of LE Create Connection sent so far, with their peer address.
        var connectsSent: [String] {
            ctl.sent.filter { $0.type == .command && $0.bytes.count >= 15 && $0.bytes[0] == 0x0D && $0.bytes[1] == 0x20 }
                .map { BDAddress(wire: Array($0.bytes[9..<15])).description }
        }
    }

    @Test("a wanted device is adopted on its first report and connected (scan stopped first); an unwanted one is not; ready makes it kept; a drop backs it off")
    func adoptConnectReadyDrop() throws {
        let w = try World()
        w.keeper.attach(w.stack)
        try w.pump(ms: 50)
        #expect(w.stack.central.isScanning)
        w.ctl.deliver(Self.report("00:1B:DC:01:02:03", "Other"), Self.report(Self.lamp, "Lamp1"))
        try w.pump { !w.connectsSent.isEmpty }
        #expect(w.connectsSent == [Self.lamp])
        // The scan was stopped first (LE Set Scan Enable 0x00 just before LE Create Connection).
        let ops = w.ctl.sentOpcodes
        let at = try #require(ops.firstIndex(of: 0x200D))
        #expect(ops[..<at].last == 0x200C && w.ctl.sentHex(.command).contains("01 0c 20 02 00 00"))
        let d = try w.device(Self.lamp)
        #expect(d.phase == .connecting || d.phase == .settingUp)
        w.ctl.deliver(Self.connected(Self.lamp, handle: 1))
        try w.pump { w.events == ["up Lamp1"] }
        #expect(w.events == ["up Lamp1"])
        #expect(w.keeper.devices.count == 1)
        #expect(d.phase == .settingUp && d.link != nil && d.attempts == 1)
        w.keeper.ready(d)
        #expect(d.phase == .ready && d.attempts == 0 && d.connectedAt != nil)
        w.ctl.deliver(h4("04 05 04 00 01 00 13"))
        try w.pump { w.events.count == 2 }
        #expect(w.events == ["up Lamp1", "down Lamp1"])
        guard case .backingOff = d.state else { Issue.record("state \(d.state)"); return }
        #expect(d.link == nil && w.keeper.linkCount == 0)
    }

    @Test("Connection Limit Exceeded with a link up: capacity 1 learned, both devices on demand (a slot kept free), the kept link released; need() connects only with work")
    func capacityAndOnDemand() throws {
        let w = try World()
        w.ctl.when(command: HCI.Disconnect.opcode, reply: [Ev.status(HCI.Disconnect.opcode), h4("04 05 04 00 01 00 16")])
        w.keeper.attach(w.stack)
        w.ctl.deliver(Self.report(Self.lamp, "Lamp1"))
        try w.pump { !w.connectsSent.isEmpty }
        w.ctl.deliver(Self.connected(Self.lamp, handle: 1))
        try w.pump { w.events == ["up Lamp1"] }
        w.keeper.ready(try w.device(Self.lamp))
        // The second lamp: the controller has no room for it.
        w.ctl.deliver(Self.report(Self.lamp2, "Lamp2"))
        try w.pump { w.connectsSent.count == 2 }
        #expect(w.connectsSent.last == Self.lamp2)
        w.ctl.deliver(Self.connected(Self.lamp2, handle: 0, status: 0x09))
        try w.pump { w.events.contains("down Lamp1 planned") }
        #expect(w.keeper.capacity == 1)
        #expect(w.events == ["up Lamp1", "on demand Lamp2", "on demand Lamp1", "down Lamp1 planned"])
        let d1 = try w.device(Self.lamp), d2 = try w.device(Self.lamp2)
        #expect(d1.mode == .onDemand && d2.mode == .onDemand)
        #expect(d1.phase == .idleOnDemand && d1.link == nil)
        // No work: need() makes no attempt; with work it connects.
        let before = w.connectsSent.count
        w.keeper.need(d2)
        try w.pump(ms: 50)
        #expect(w.connectsSent.count == before)
        w.work = ["Lamp2"]
        w.keeper.need(d2)
        try w.pump { w.connectsSent.count == before + 1 }
        #expect(w.connectsSent.last == Self.lamp2)
    }

    @Test("a command the controller never answers: the controller is lost, the stack closed and reopened, the run goes on on the new one")
    func controllerReopen() throws {
        var policy = DeviceKeeper.Policy()
        policy.useAcceptList = false
        policy.controllerBackoff = Backoff(initialMs: 1, maxMs: 1)
        var second: BLEStack?
        var reopened = 0
        let w = try World(policy: policy, reopen: {
            reopened += 1
            let ctl = HCIHostInitTests.controller(bdaddr: "00 00 00 00 00 00")
            ctl.when(command: LEScanParameters.opcode, reply: [Ev.complete(LEScanParameters.opcode)])
            ctl.when(command: HCI.LESetScanEnable.opcode, reply: [Ev.complete(HCI.LESetScanEnable.opcode)])
            let s = try BLEStack(transport: ctl)
            s.host.interruptible = false
            second = s
            return s
        })
        // The first controller answers nothing from now on (its scan enable times out).
        w.stack.host.commandTimeoutMs = 100
        w.ctl.removeRules(for: LEScanParameters.opcode)
        w.keeper.subscribe { [weak keeper = w.keeper] e in if case .controllerBack = e { keeper?.stop() } }
        try w.keeper.run()
        #expect(reopened == 1)
        #expect(w.events == ["controller lost", "controller back"])
        #expect(w.ctl.closed)
        #expect(w.keeper.stack === second && second != nil)
    }
    // MARK: reaching once (one-shot jobs)

    static var once: DeviceKeeper.Policy {
        var p = DeviceKeeper.Policy(); p.useAcceptList = false; return p
    }

    @Test("without reconnection a failed attempt is the device's end: connectFailed, gone, not tried again when heard again")
    func onceFailedIsGone() throws {
        let w = try World(policy: Self.once, claim: .once)
        w.keeper.attach(w.stack)
        w.ctl.deliver(Self.report(Self.lamp, "Lamp1"))
        try w.pump { !w.connectsSent.isEmpty }
        w.ctl.deliver(Self.connected(Self.lamp, handle: 0, status: 0x3E))
        try w.pump { !w.events.isEmpty }
        #expect(w.events == ["failed Lamp1"])
        let d = try w.device(Self.lamp)
        #expect(d.phase == .gone && d.link == nil)
        // Heard again, over more than one tick: no second attempt.
        w.ctl.deliver(Self.report(Self.lamp, "Lamp1"))
        try w.pump(ms: 2 * w.keeper.policy.tickMs) { w.connectsSent.count > 1 }
        #expect(w.connectsSent == [Self.lamp])
    }

    @Test("reach connects a known address without a report or a scan; without reconnection a drop is the end")
    func reachWithoutScan() throws {
        let w = try World(policy: Self.once, claim: .once)
        w.owner.scanWanted = { false }
        w.keeper.attach(w.stack)
        let d = w.keeper.reach(DeviceAddress(BDAddress(Self.lamp)!, .random), for: w.owner, name: "Lamp1", timeoutMs: 800)
        try w.pump { !w.connectsSent.isEmpty }
        #expect(w.connectsSent == [Self.lamp])
        #expect(!w.ctl.sentOpcodes.contains(0x200C), "no scan was started")
        w.ctl.deliver(Self.connected(Self.lamp, handle: 1))
        try w.pump { w.events == ["up Lamp1"] }
        w.keeper.ready(d)
        w.ctl.deliver(h4("04 05 04 00 01 00 13"))
        try w.pump { w.events.count == 2 }
        #expect(w.events == ["up Lamp1", "down Lamp1"])
        #expect(d.phase == .gone)
        try w.pump(ms: 2 * w.keeper.policy.tickMs) { w.connectsSent.count > 1 }
        #expect(w.connectsSent == [Self.lamp], "not reconnected")
    }

    @Test("a reached address that does not answer fails after its own timeout; forgotten, its report is adopted again")
    func reachTimesOutThenForget() throws {
        let w = try World(policy: Self.once, claim: .once)
        w.ctl.when(command: HCI.LECreateConnectionCancel.opcode, reply: [Ev.complete(HCI.LECreateConnectionCancel.opcode), Self.connected(Self.lamp, handle: 0, status: 0x02)])
        var scanning = false
        w.owner.scanWanted = { scanning }
        w.keeper.attach(w.stack)
        let start = Instant.now()
        let d = w.keeper.reach(DeviceAddress(BDAddress(Self.lamp)!, .random), for: w.owner, timeoutMs: 300)
        try w.pump(ms: 3000) { !w.events.isEmpty }
        #expect(w.events == ["failed \(Self.lamp)"])
        #expect(start.msUntil(Instant.now()) >= 300, "the attempt's own timeout bounds it")
        #expect(d.phase == .gone)
        #expect(w.ctl.sentOpcodes.contains(0x200E), "the attempt was cancelled")
        w.keeper.forget(d)
        #expect(w.keeper.devices.isEmpty)
        scanning = true
        // The keeper starts the scan on its next tick (up to tickMs away).
        try w.pump(ms: 3 * w.keeper.policy.tickMs) { w.stack.central.isScanning }
        #expect(w.stack.central.isScanning)
        w.ctl.deliver(Self.report(Self.lamp, "Lamp1"))
        try w.pump(ms: 3 * w.keeper.policy.tickMs) { w.connectsSent.count == 2 }
        #expect(w.connectsSent == [Self.lamp, Self.lamp])
    }

    @Test("a remembered address is tried for rememberedAddressMs at most; not answering there forgets the device (notAtRememberedAddress, no backoff) and its report is adopted again")
    func rememberedAddressThenScan() throws {
        var p = Self.once
        p.rememberedAddressMs = 300
        let w = try World(policy: p, claim: .once)
        w.ctl.when(command: HCI.LECreateConnectionCancel.opcode, reply: [Ev.complete(HCI.LECreateConnectionCancel.opcode), Self.connected(Self.lamp, handle: 0, status: 0x02)])
        var scanning = false
        w.owner.scanWanted = { scanning }
        w.keeper.attach(w.stack)
        let start = Instant.now()
        w.keeper.reach(DeviceAddress(BDAddress(Self.lamp)!, .random), for: w.owner, name: "Lamp1", timeoutMs: 5_000, remembered: true)
        try w.pump(ms: 3000) { !w.events.isEmpty }
        #expect(w.events == ["not at remembered Lamp1"])
        let took = start.msUntil(Instant.now())
        #expect(took >= 300 && took < 5_000, "bounded by rememberedAddressMs, not the owner's 5 s (\(took) ms)")
        #expect(w.keeper.devices.isEmpty, "forgotten by the keeper itself")
        scanning = true
        try w.pump(ms: 3 * w.keeper.policy.tickMs) { w.stack.central.isScanning }
        w.ctl.deliver(Self.report(Self.lamp, "Lamp1"))
        try w.pump(ms: 3 * w.keeper.policy.tickMs) { w.connectsSent.count == 2 }
        #expect(w.connectsSent == [Self.lamp, Self.lamp])
    }

    /// LE Create Connection commands sent from the accept list (Initiator_Filter_Policy 1).
    static func fromList(_ ctl: ScriptedController) -> Int {
        ctl.sent.filter { $0.type == .command && $0.bytes.count >= 8 && $0.bytes[0] == 0x0D && $0.bytes[1] == 0x20 && $0.bytes[7] == 1 }.count
    }

    /// A lamp connected and being set up (a read outstanding, failing the
    /// set-up when it fails, as the gateway's discovery does).
    static func settingUp(_ w: World) throws -> KeptDevice {
        w.keeper.attach(w.stack)
        w.ctl.deliver(Self.report(Self.lamp, "Lamp1"))
        try w.pump { !w.connectsSent.isEmpty }
        w.ctl.deliver(Self.connected(Self.lamp, handle: 1))
        try w.pump { w.events.contains("up Lamp1") }
        let d = try w.device(Self.lamp)
        let link = try #require(d.link)
        link.gatt.startRead(0x0010).whenComplete { [keeper = w.keeper] _ in keeper.setupFailed(d) }
        #expect(d.phase == .settingUp)
        return d
    }

    @Test("a link lost while being set up comes back from the accept list at once, though the owner's set-up fails (and says so) before the keeper hears of the drop: no backoff, no scan")
    func lostInSetUpReconnectsFromTheList() throws {
        let w = try World(policy: DeviceKeeper.Policy(), acceptList: true)
        w.ctl.autoCompleteACL = true
        let d = try Self.settingUp(w)
        #expect(Self.fromList(w.ctl) == 0)
        w.ctl.deliver(Ev.disconnected(handle: 1, reason: 0x08))
        try w.pump { Self.fromList(w.ctl) == 1 }
        #expect(Self.fromList(w.ctl) == 1, "armed at once: \(w.ctl.sentHex(.command))")
        #expect(d.phase == .wanted && d.link == nil && w.keeper.waitsFromAcceptList(d))
        #expect(w.events == ["up Lamp1", "down Lamp1", "accept list"])
        // The lamp advertises again: the controller connects it from the list.
        w.ctl.deliver(Self.connected(Self.lamp, handle: 2))
        try w.pump { w.events.count == 4 }
        #expect(w.events.last == "up Lamp1" && d.phase == .settingUp)
    }

    @Test("a set-up the owner refused (its link still up) is disconnected and backs off: the accept list waits for the backoff")
    func refusedSetUpBacksOff() throws {
        let w = try World(policy: DeviceKeeper.Policy(), acceptList: true)
        w.ctl.when(command: HCI.Disconnect.opcode, reply: [Ev.status(HCI.Disconnect.opcode), Ev.disconnected(handle: 1, reason: 0x16)])
        w.keeper.attach(w.stack)
        w.ctl.deliver(Self.report(Self.lamp, "Lamp1"))
        try w.pump { !w.connectsSent.isEmpty }
        w.ctl.deliver(Self.connected(Self.lamp, handle: 1))
        try w.pump { w.events.contains("up Lamp1") }
        let d = try w.device(Self.lamp)
        w.keeper.setupFailed(d)
        try w.pump { w.events.contains("down Lamp1") }
        guard case let .backingOff(until) = d.state else { Issue.record("state \(d.state)"); return }
        #expect(Instant.now().msUntil(until) > 300)
        try w.pump(ms: 200)
        #expect(Self.fromList(w.ctl) == 0, "not armed during the backoff")
        try w.pump(ms: 3 * w.keeper.policy.tickMs) { Self.fromList(w.ctl) == 1 }
        #expect(Self.fromList(w.ctl) == 1, "armed once the backoff is over")
    }
}
