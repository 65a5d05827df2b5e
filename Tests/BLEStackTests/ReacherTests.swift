#if canImport(Glibc)
import Glibc
#endif
import Testing
@testable import BLEWire
@testable import BLETransport
@testable import BLEHCI
@testable import BLEGAP
@testable import Attled
@testable import AttledLED
@testable import AttledCLI

/// One-shot finding and connecting (`Reacher`, on the library's keeper) on a
/// scripted controller: which LE Create Connection goes out when, what each
/// target hears of it.
@Suite("Reacher: one-shot targets on the keeper")
struct ReacherTests {
    static let lamp1 = KeeperTests.lamp, lamp2 = KeeperTests.lamp2

    /// A target that records what the reacher tells it.
    final class Probe: Reaching {
        let target: Target
        let report = Report(prefix: "", quiet: true)
        var log: [String] = []
        var state = "waiting"
        var failure: (any Error)?
        init(_ t: Target) { target = t }
        var isWaiting: Bool { state == "waiting" }
        var isConnecting: Bool { state == "connecting" }
        var isFinished: Bool { state == "up" || state == "failed" }
        func heard(_ d: DiscoveredDevice) { log.append("heard \(d.name ?? "?")") }
        func connecting() { state = "connecting"; log.append("connecting") }
        func waitAgain() { state = "waiting"; log.append("wait") }
        func up(_ link: Link, cachedName: String?) { state = "up"; log.append("up" + (cachedName.map { " cached \($0)" } ?? "")) }
        func fail(_ error: any Error) { state = "failed"; failure = error; log.append("failed") }
        func fail(_ re: RunError) { state = "failed"; failure = re; log.append("failed \(re.code)") }
    }

    final class World {
        let ctl: ScriptedController
        let session: Session
        let probes: [Probe]
        let reacher: Reacher
        let dir: String

        /// - Parameter scanBeside: the controller lists LE Read Supported
        ///   States and its states allow scanning while initiating (bits 22, 23).
        init(_ args: String, scanEnable: [HCIPacket] = [Ev.complete(HCI.LESetScanEnable.opcode)], cache: (String, String)? = nil,
             scanBeside: Bool = false) throws {
            dir = try GATTCacheTests.tempDirectory()
            ctl = HCIHostInitTests.controller(bdaddr: "00 00 00 00 00 00")
            if scanBeside {
                var commands = [UInt8](repeating: 0, count: 64)
                commands[28] = 0x08; commands[37] = 0x60
                ctl.expect(h4("01 02 10 00"), reply: [Ev.complete(HCI.ReadLocalSupportedCommands.opcode, [0x00] + commands)])
                ctl.when(command: HCI.LEReadSupportedStates.opcode, reply: [Ev.complete(HCI.LEReadSupportedStates.opcode, [0x00, 0x00, 0x00, 0xC0, 0x00, 0x00, 0x00, 0x00, 0x00])])
            }
            ctl.when(command: LEScanParameters.opcode, reply: [Ev.complete(LEScanParameters.opcode)])
            ctl.when(command: HCI.LESetScanEnable.opcode, reply: scanEnable)
            ctl.when(command: LECreateConnection.opcode, reply: [Ev.status(LECreateConnection.opcode)])
            session = Session(try Options.parse(args.split(separator: " ").map(String.init)),
                              environment: ["XDG_CACHE_HOME": dir, "XDG_STATE_HOME": dir])
            if let (name, addr) = cache { session.cache?.remember(name: name, DeviceAddress(BDAddress(addr)!, .random)) }
            let stack = try BLEStack(transport: ctl)
            stack.host.interruptible = false
            stack.central.airRequests = []
            session.stack = stack
            probes = Target.from(session.opts).map(Probe.init)
            reacher = Reacher(session, stack, probes)
        }
        deinit { GATTCacheTests.removeAll(dir) }

        /// Pumps until `done` or 3 s.
        func pump(_ done: @escaping () -> Bool) throws { _ = try reacher.pump(until: Instant.now().adding(ms: 3000), done) }
        var connectsSent: [String] {
            ctl.sent.filter { $0.type == .command && $0.bytes.count >= 15 && $0.bytes[0] == 0x0D && $0.bytes[1] == 0x20 }
                .map { BDAddress(wire: Array($0.bytes[9..<15])).description }
        }
    }

    @Test("two named targets share one scan, each claimed by its first report; the first heard waits (the scan goes on) until it is heard advertising again, then is connected (the scan stopped for the attempt, resumed while a target waits); an absent one fails alone when the scan time is over")
    func sharedScan() throws {
        let w = try World("get --name Lamp1 --name Lamp2 --name Lamp3 --timeout 2")
        let (p1, p2, p3) = (w.probes[0], w.probes[1], w.probes[2])
        let central = w.session.stack!.central
        w.reacher.start()
        try w.pump { central.isScanning }
        w.ctl.deliver(KeeperTests.report(Self.lamp2, "Lamp2"))
        _ = try w.reacher.pump(until: Instant.now().adding(ms: 30)) { false }
        #expect(w.connectsSent.isEmpty && central.isScanning, "gathering: Lamp1 and Lamp3 may be heard before Lamp2 advertises again")
        w.ctl.deliver(KeeperTests.report(Self.lamp2, "Lamp2"))  // its next advertising event
        try w.pump { !w.connectsSent.isEmpty }
        // The scan was stopped before the attempt (one thing at a time on the controller).
        #expect(w.connectsSent == [Self.lamp2])
        let ops = w.ctl.sentOpcodes
        #expect(ops[..<(try #require(ops.firstIndex(of: 0x200D)))].last == 0x200C)
        #expect(!central.isScanning && p2.log == ["heard Lamp2", "connecting"] && p1.log.isEmpty)
        w.ctl.deliver(KeeperTests.connected(Self.lamp2, handle: 1))
        // Lamp1 and Lamp3 still wait: the scan resumes.
        try w.pump { central.isScanning }
        #expect(p2.log.last == "up")
        w.ctl.deliver(KeeperTests.report(Self.lamp2, "Lamp2"), KeeperTests.report(Self.lamp1, "Lamp1"))
        try w.pump { w.connectsSent.count == 2 }
        #expect(w.connectsSent == [Self.lamp2, Self.lamp1], "a device serves one target: Lamp2's report is not taken again")
        w.ctl.deliver(KeeperTests.connected(Self.lamp1, handle: 2))
        try w.pump { p1.isFinished && p3.isFinished }
        #expect(p1.log == ["heard Lamp1", "connecting", "up"])
        // Lamp3 was never heard: it fails on its own, not found (exit 3), when the scan time is over.
        #expect(p3.log == ["failed \(ExitCode.deviceNotFound)"])
        #expect(!central.isScanning)
        #expect(w.session.tracedLinks.count == 2)
    }

    /// LE Set Scan Enable commands sent: true for Enable, false for Disable.
    static func scanEnables(_ ctl: ScriptedController) -> [Bool] {
        ctl.sent.filter { $0.type == .command && $0.bytes.count >= 4 && $0.bytes[0] == 0x0C && $0.bytes[1] == 0x20 }.map { $0.bytes[3] == 1 }
    }

    @Test("targets heard out of phase: the first heard is connected only once the others are heard (or it advertises again, or gatherMs passed), and the next connect goes to the one heard longest ago")
    func gatherThenPhaseOrder() throws {
        let w = try World("get --name Lamp1 --name Lamp2 --name Lamp3")
        let lamp3 = "C0:11:22:33:44:77"
        let central = w.session.stack!.central
        w.reacher.start()
        try w.pump { central.isScanning }
        // Lamp3 at 0 ms, Lamp1 at ~15 ms, then Lamp3's next event (heard again) before Lamp2 is heard.
        w.ctl.deliver(KeeperTests.report(lamp3, "Lamp3"))
        _ = try w.reacher.pump(until: Instant.now().adding(ms: 15)) { false }
        w.ctl.deliver(KeeperTests.report(Self.lamp1, "Lamp1"))
        _ = try w.reacher.pump(until: Instant.now().adding(ms: 15)) { false }
        #expect(w.connectsSent.isEmpty && central.isScanning)
        w.ctl.deliver(KeeperTests.report(lamp3, "Lamp3"))
        try w.pump { !w.connectsSent.isEmpty }
        // Lamp3 just advertised: Lamp1 (heard longest ago) goes first.
        #expect(w.connectsSent == [Self.lamp1])
        w.ctl.deliver(KeeperTests.connected(Self.lamp1, handle: 1))
        try w.pump { w.connectsSent.count == 2 }
        #expect(w.connectsSent == [Self.lamp1, lamp3], "the other heard target next, without a scan between")
        #expect(Self.scanEnables(w.ctl) == [true, false])
    }

    @Test("the gathering has a bound: a first target never heard again is connected gatherMs after it was heard")
    func gatherBound() throws {
        let w = try World("get --name Lamp1 --name Lamp2")
        let central = w.session.stack!.central
        w.reacher.start()
        try w.pump { central.isScanning }
        let heard = Instant.now()
        w.ctl.deliver(KeeperTests.report(Self.lamp1, "Lamp1"))
        try w.pump { !w.connectsSent.isEmpty }
        let waited = heard.msUntil(Instant.now())
        #expect(w.connectsSent == [Self.lamp1])
        #expect(waited >= Reacher.gatherMs - 20 && waited < Reacher.gatherMs + 500, "\(waited) ms")
    }

    @Test("three targets heard in one scan are connected in turn, in the order heard, without scanning again (a controller that cannot scan while initiating: the scan stops before the first connect and never restarts)")
    func heardTogetherConnectedInTurn() throws {
        let w = try World("get --name Lamp1 --name Lamp2 --name Lamp3")
        let lamp3 = "C0:11:22:33:44:77"
        let central = w.session.stack!.central
        w.reacher.start()
        try w.pump { central.isScanning }
        w.ctl.deliver(KeeperTests.report(Self.lamp2, "Lamp2"), KeeperTests.report(lamp3, "Lamp3"), KeeperTests.report(Self.lamp1, "Lamp1"))
        try w.pump { !w.connectsSent.isEmpty }
        #expect(w.connectsSent == [Self.lamp2])
        w.ctl.deliver(KeeperTests.connected(Self.lamp2, handle: 1))
        try w.pump { w.connectsSent.count == 2 }
        #expect(w.connectsSent == [Self.lamp2, lamp3])
        w.ctl.deliver(KeeperTests.connected(lamp3, handle: 2))
        try w.pump { w.connectsSent.count == 3 }
        w.ctl.deliver(KeeperTests.connected(Self.lamp1, handle: 3))
        try w.pump { w.probes.allSatisfy(\.isFinished) }
        #expect(w.connectsSent == [Self.lamp2, lamp3, Self.lamp1], "in the order heard")
        #expect(w.probes.map(\.log) == [["heard Lamp1", "connecting", "up"], ["heard Lamp2", "connecting", "up"], ["heard Lamp3", "connecting", "up"]])
        #expect(Self.scanEnables(w.ctl) == [true, false], "one scan, stopped once: no rescan")
        #expect(w.ctl.unexpected.isEmpty)
    }

    @Test("a controller that scans while initiating: the scan goes on beside the first connect for the targets not yet heard and stops once all are heard; nothing is scanned again")
    func scanBesideTheConnect() throws {
        let w = try World("get --name Lamp1 --name Lamp2 --name Lamp3", scanBeside: true)
        let lamp3 = "C0:11:22:33:44:77"
        let central = w.session.stack!.central
        #expect(w.session.stack!.info.scansWhileInitiating)
        w.reacher.start()
        try w.pump { central.isScanning }
        w.ctl.deliver(KeeperTests.report(Self.lamp2, "Lamp2"))
        try w.pump { !w.connectsSent.isEmpty }
        // Connect sent while the scan stays on: no Disable before it.
        #expect(Self.scanEnables(w.ctl) == [true] && central.isScanning)
        w.ctl.deliver(KeeperTests.report(Self.lamp1, "Lamp1"))
        try w.pump { w.probes[0].log == ["heard Lamp1"] }
        #expect(Self.scanEnables(w.ctl) == [true], "Lamp3 not heard yet: scanning on")
        w.ctl.deliver(KeeperTests.report(lamp3, "Lamp3"))
        try w.pump { !central.isScanning }
        #expect(Self.scanEnables(w.ctl) == [true, false], "all heard: the scan stops")
        w.ctl.deliver(KeeperTests.connected(Self.lamp2, handle: 1))
        try w.pump { w.connectsSent.count == 2 }
        w.ctl.deliver(KeeperTests.connected(Self.lamp1, handle: 2))
        try w.pump { w.connectsSent.count == 3 }
        w.ctl.deliver(KeeperTests.connected(lamp3, handle: 3))
        try w.pump { w.probes.allSatisfy(\.isFinished) }
        #expect(w.connectsSent == [Self.lamp2, Self.lamp1, lamp3])
        #expect(Self.scanEnables(w.ctl) == [true, false], "never scanned again")
        #expect(w.ctl.unexpected.isEmpty)
    }

    @Test("two --address targets: connected one after the other without a scan, the second as soon as the first attempt ends")
    func addressesInTurn() throws {
        let w = try World("get --address \(Self.lamp1) --address \(Self.lamp2)")
        w.reacher.start()
        try w.pump { !w.connectsSent.isEmpty }
        #expect(w.connectsSent == [Self.lamp1])
        w.ctl.deliver(KeeperTests.connected(Self.lamp1, handle: 1))
        try w.pump { w.connectsSent.count == 2 }
        #expect(w.connectsSent == [Self.lamp1, Self.lamp2])
        w.ctl.deliver(KeeperTests.connected(Self.lamp2, handle: 2))
        try w.pump { w.probes.allSatisfy(\.isFinished) }
        #expect(w.probes.map(\.log) == [["connecting", "up"], ["connecting", "up"]])
        #expect(!w.ctl.sentOpcodes.contains(0x200C), "no scan")
    }

    @Test("a cached address is tried first, briefly; when it does not answer it is forgotten and the target waits for the scan, which finds it")
    func cachedAddressFallsBack() throws {
        let w = try World("get --name Lamp1 --connect-timeout 5000", cache: ("Lamp1", Self.lamp1))
        w.ctl.when(command: HCI.LECreateConnectionCancel.opcode, reply: [Ev.complete(HCI.LECreateConnectionCancel.opcode), KeeperTests.connected(Self.lamp1, handle: 0, status: 0x02)])
        let p = w.probes[0]
        let start = Instant.now()
        w.reacher.start()
        #expect(w.connectsSent == [Self.lamp1] && !w.ctl.sentOpcodes.contains(0x200C), "connected at the cached address, no scan")
        try w.pump { p.isWaiting }
        #expect(p.log == ["connecting", "wait"])
        let waited = start.msUntil(Instant.now())
        #expect(waited >= 1000 && waited < 2500, "tried for 1 s, not the 5 s --connect-timeout (\(waited) ms)")
        #expect(w.session.cache?.address(forName: "Lamp1") == nil, "the cached address is forgotten")
        try w.pump { w.session.stack!.central.isScanning }
        w.ctl.deliver(KeeperTests.report(Self.lamp1, "Lamp1"))
        try w.pump { w.connectsSent.count == 2 }
        w.ctl.deliver(KeeperTests.connected(Self.lamp1, handle: 1))
        try w.pump { p.isFinished }
        #expect(p.log == ["connecting", "wait", "heard Lamp1", "connecting", "up"])
        #expect(w.session.cache?.address(forName: "Lamp1") == DeviceAddress(BDAddress(Self.lamp1)!, .random), "remembered again")
    }

    @Test("a scan that cannot start ends the run with the controller's error")
    func scanFailure() throws {
        let refused = try World("get --name Lamp1", scanEnable: [Ev.complete(HCI.LESetScanEnable.opcode, [0x0C])])
        refused.reacher.start()
        // (#require(throws:) returns the error only from Swift 6.1's Testing on.)
        do {
            try refused.pump { false }
            Issue.record("the run went on")
        } catch let e as HCIError {
            guard case .commandFailed(_, .commandDisallowed) = e else { Issue.record("got \(e)"); return }
        }
    }
}
