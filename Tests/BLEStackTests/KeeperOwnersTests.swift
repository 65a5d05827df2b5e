import Testing
@testable import BLEWire
@testable import BLETransport
@testable import BLEHCI
@testable import BLEGAP
@testable import Attled

/// One keeper, two owners (issue 29): the gateway's lamps and a
/// Bluetooth-proxy-style owner of higher priority sharing the controller's
/// slots, on a scripted controller that connects each LE Create Connection at
/// once and completes each Disconnect.
@Suite("DeviceKeeper: several owners share the slots")
struct KeeperOwnersTests {
    static let dev1 = "C0:11:22:33:44:88"
    static let lamp3 = "C0:11:22:33:44:77"

    /// A scripted controller that answers LE Create Connection with a
    /// connection to the peer named (handles 1, 2, ...) and Disconnect with its
    /// Disconnection Complete (0x16).
    static func controller() -> ScriptedController {
        let ctl = HCIHostInitTests.controller(bdaddr: "00 00 00 00 00 00")
        ctl.when(command: LEScanParameters.opcode, reply: [Ev.complete(LEScanParameters.opcode)])
        ctl.when(command: HCI.LESetScanEnable.opcode, reply: [Ev.complete(HCI.LESetScanEnable.opcode)])
        var next: UInt8 = 0
        ctl.respond = { p in
            guard p.type == .command, p.bytes.count >= 3 else { return nil }
            let op = UInt16(p.bytes[0]) | UInt16(p.bytes[1]) << 8
            if op == LECreateConnection.opcode.rawValue, p.bytes.count >= 15 {
                next += 1
                let peer = BDAddress(wire: Array(p.bytes[9..<15])).description
                return [Ev.status(LECreateConnection.opcode), KeeperTests.connected(peer, handle: next)]
            }
            if op == HCI.Disconnect.opcode.rawValue, p.bytes.count >= 6 {
                let handle = UInt16(p.bytes[3]) | UInt16(p.bytes[4]) << 8
                return [Ev.status(HCI.Disconnect.opcode), Ev.disconnected(handle: handle, reason: 0x16)]
            }
            return nil
        }
        return ctl
    }

    final class Rig {
        let ctl: ScriptedController
        let stack: BLEStack
        let keeper: DeviceKeeper
        let lamps: KeeperOwner
        let proxy: KeeperOwner
        var lampEvents: [String] = []
        var proxyEvents: [String] = []
        var work: Set<String> = []

        init(slots: Int, reopen: (() throws -> BLEStack)? = nil) throws {
            ctl = KeeperOwnersTests.controller()
            stack = try BLEStack(transport: ctl)
            stack.host.interruptible = false
            stack.central.airRequests = []
            var p = DeviceKeeper.Policy()
            p.useAcceptList = false
            p.maxLinks = slots
            p.deviceBackoff = Backoff(initialMs: 1, maxMs: 1)
            p.controllerBackoff = Backoff(initialMs: 1, maxMs: 1)
            keeper = DeviceKeeper(stack: stack, policy: p, reopen: reopen)
            lamps = keeper.owner("lamps")
            proxy = keeper.owner("proxy", priority: 10)
            lamps.wants = { $0.name?.hasPrefix("Lamp") == true ? .keep : nil }
            lamps.hasWork = { [unowned self] d in self.work.contains(d.name ?? "") }
            proxy.wants = { $0.name?.hasPrefix("Dev") == true ? .keep : nil }
            proxy.scanWanted = { false }
            lamps.subscribe { [unowned self] e in self.lampEvents += Self.label(e, keeper: self.keeper) }
            proxy.subscribe { [unowned self] e in self.proxyEvents += Self.label(e, keeper: self.keeper) }
        }

        /// What an owner heard, in short; a link up is made ready at once.
        static func label(_ e: DeviceKeeper.Event, keeper: DeviceKeeper) -> [String] {
            switch e {
            case let .linkUp(d, _): keeper.ready(d); return ["up \(d.name ?? "?")"]
            case let .linkDown(d, _, planned): return ["down \(d.name ?? "?")\(planned ? " planned" : "")"]
            case let .becameOnDemand(d, _): return ["on demand \(d.name ?? "?")"]
            case .controllerLost: return ["controller lost"]
            case .controllerBack: return ["controller back"]
            case let .connectFailed(d, _): return ["failed \(d.name ?? "?")"]
            case let .notAtRememberedAddress(d, _): return ["not at remembered \(d.name ?? "?")"]
            case .waitingFromAcceptList, .scanFailed, .stateChanged: return []
            }
        }

        func pump(ms: Int = 1000, until done: () -> Bool = { false }) throws {
            _ = try stack.host.pump(until: Instant.now().adding(ms: ms), done)
        }

        func device(_ addr: String) throws -> KeptDevice { try #require(keeper.devices[BDAddress(addr)!]) }

        /// Handles of the Disconnects sent so far.
        var disconnects: [UInt16] {
            ctl.sent.filter { $0.type == .command && $0.bytes.count >= 5 && $0.bytes[0] == 0x06 && $0.bytes[1] == 0x04 }
                .map { UInt16($0.bytes[3]) | UInt16($0.bytes[4]) << 8 }
        }

        /// Three lamps heard one after the other, each connected and ready.
        func threeLampsReady() throws {
            keeper.attach(stack)
            for (i, (addr, name)) in [(KeeperTests.lamp, "Lamp1"), (KeeperTests.lamp2, "Lamp2"), (KeeperOwnersTests.lamp3, "Lamp3")].enumerated() {
                ctl.deliver(KeeperTests.report(addr, name))
                try pump { self.lampEvents.count == i + 1 }
            }
            #expect(lampEvents == ["up Lamp1", "up Lamp2", "up Lamp3"])
            #expect(keeper.linkCount == 3)
        }
    }

    @Test("three slots held by kept lamps: a proxy claim of higher priority takes the newest lamp's slot (Disconnect, then its connect); that lamp goes on demand; each owner hears only its own devices")
    func higherPriorityTakesASlot() throws {
        let r = try Rig(slots: 3)
        try r.threeLampsReady()
        let dev = r.keeper.reach(DeviceAddress(BDAddress(Self.dev1)!, .random), for: r.proxy, claim: .keep, name: "Dev1")
        try r.pump { r.proxyEvents == ["up Dev1"] }
        #expect(r.disconnects == [3], "Lamp3, the newest ready lamp, let go (handle 3)")
        #expect(r.lampEvents == ["up Lamp1", "up Lamp2", "up Lamp3", "on demand Lamp3", "down Lamp3 planned"])
        #expect(r.proxyEvents == ["up Dev1"], "the proxy hears nothing of the lamps")
        #expect(dev.phase == .ready && r.keeper.linkCount == 3)
        let l3 = try r.device(Self.lamp3)
        #expect(l3.mode == .onDemand && l3.phase == .idleOnDemand && l3.owner === r.lamps)
        // The lamp's owner has work for it: no slot and no lower priority to take from: it waits.
        r.work = ["Lamp3"]
        r.keeper.need(l3)
        try r.pump(ms: 100)
        #expect(r.disconnects == [3] && l3.link == nil, "nothing taken from the proxy")
    }

    @Test("owners of one priority take nothing from each other: a fourth lamp beyond three slots is connected on demand, no link let go")
    func samePriorityTakesNothing() throws {
        let r = try Rig(slots: 3)
        try r.threeLampsReady()
        r.keeper.reach(DeviceAddress(BDAddress("C0:11:22:33:44:99")!, .random), for: r.lamps, claim: .keep, name: "Lamp4")
        try r.pump { r.lampEvents.count == 4 }
        #expect(r.lampEvents.last == "on demand Lamp4")
        #expect(r.disconnects.isEmpty && r.keeper.linkCount == 3)
    }

    @Test("an owner removed: its links are let go and the slot goes to the other owner's device waiting with work")
    func ownerRemovedFreesItsSlots() throws {
        let r = try Rig(slots: 3)
        try r.threeLampsReady()
        let dev = r.keeper.reach(DeviceAddress(BDAddress(Self.dev1)!, .random), for: r.proxy, claim: .keep, name: "Dev1")
        try r.pump { r.proxyEvents == ["up Dev1"] }
        let l3 = try r.device(Self.lamp3)
        r.work = ["Lamp3"]
        r.keeper.need(l3)
        let handle = try #require(dev.link?.connection.handle)
        r.keeper.remove(r.proxy)
        try r.pump { l3.phase == .ready }
        #expect(r.disconnects == [3, handle], "the proxy's link let go")
        #expect(r.keeper.devices[BDAddress(Self.dev1)!] == nil && dev.phase == .gone, "its device forgotten")
        #expect(r.lampEvents.suffix(1) == ["up Lamp3"], "Lamp3 connected in the freed slot")
        #expect(r.proxyEvents == ["up Dev1"], "a removed owner hears nothing more")
        #expect(r.keeper.owners.map(\.name) == ["lamps"])
    }

    @Test("the controller reset: every owner hears the controller lost and back, and the stack is the new one")
    func controllerReset() throws {
        var second: BLEStack?
        let r = try Rig(slots: 3, reopen: {
            let s = try BLEStack(transport: KeeperOwnersTests.controller())
            s.host.interruptible = false
            second = s
            return s
        })
        // The first controller answers nothing from now on (its scan start times out).
        r.stack.host.commandTimeoutMs = 100
        r.ctl.removeRules(for: LEScanParameters.opcode)
        r.keeper.subscribe { [weak keeper = r.keeper] e in if case .controllerBack = e { keeper?.stop() } }
        try r.keeper.run()
        #expect(r.lampEvents == ["controller lost", "controller back"])
        #expect(r.proxyEvents == ["controller lost", "controller back"])
        #expect(r.keeper.stack === second && second != nil)
        #expect(r.ctl.closed)
    }
}
