import Testing
@testable import BLEWire
@testable import AttledJSON
@testable import AttledGateway
@testable import BLETransport
import Glibc

/// Several gateways on one broker (issue 31): what each publishes, read back;
/// the decisions each draws from the others' retained reports, on a clock of
/// the test's own.
@Suite("Gateways sharing a broker")
struct SharingTests {
    let t0 = Instant(ns: 1_000_000_000_000)
    func at(_ ms: Int) -> Instant { t0.adding(ms: ms) }

    func hearing(_ lamps: [String: LampHearing], slots: Int = 2, beat: Int = 1) -> GatewayHearing {
        GatewayHearing(beat: beat, slots: slots, lamps: lamps)
    }

    /// A view of gateway `me` with the others online (no gathering time, but in `gather`).
    func view(_ me: String, online: [String], gatherMs: UInt64 = 0) -> SharedView {
        let v = SharedView(me: me)
        v.policy.gatherMs = gatherMs
        for g in online { v.availability(g, "online") }
        return v
    }

    @Test("gathering: when a lamp loses its holder nobody connects for gatherMs, so the reports of gateways that only now hear it arrive first")
    func gather() {
        let v = view("a", online: ["a", "b", "c"], gatherMs: 500)
        v.heard("b", hearing(["L": LampHearing(rssi: -80, holding: true)]), at: at(0))
        let own = LampHearing(rssi: -75)
        #expect(v.action("L", own: own, ownSlots: 1, at: at(100)) == .standBy)
        v.availability("b", "offline")  // its will: the lamp is free from here
        #expect(v.action("L", own: own, ownSlots: 1, at: at(200)) == .standBy)
        // c, in the lamp's new room, reports it within the gathering time: it ranks first.
        v.heard("c", hearing(["L": LampHearing(rssi: -50)]), at: at(400))
        #expect(v.action("L", own: own, ownSlots: 1, at: at(700)) == .standBy, "c connects first")
        #expect(v.action("L", own: own, ownSlots: 1, at: at(2_199)) == .standBy)
        #expect(v.action("L", own: own, ownSlots: 1, at: at(2_200)) == .connect(afterMs: 0), "c did not: a after 500 + 1500 ms")
    }

    @Test("a heard message reads back as written, in a stable byte order; garbage and out-of-range values are refused or clamped")
    func heardRoundTrip() throws {
        let h = hearing(["b": LampHearing(rssi: -70, failures: 2, holding: false), "a": LampHearing(rssi: -50, holding: true, name: "Lamp \"1\"")], slots: 1, beat: 7)
        let bytes = h.json.serializedBytes
        #expect(GatewayHearing.parse(bytes) == h)
        #expect(String(decoding: bytes, as: UTF8.self).hasPrefix(#"{"beat":7,"slots":1,"lamps":{"a":"#), "lamps in node order")
        #expect(GatewayHearing.parse(Array("not json".utf8)) == nil)
        #expect(GatewayHearing.parse(Array(#"{"beat":1}"#.utf8)) == nil)
        let odd = GatewayHearing.parse(Array(#"{"beat":1,"slots":-5,"lamps":{"x":{"rssi":500},"y":{"rssi":-60,"fail":99999}}}"#.utf8))
        #expect(odd?.slots == 0)
        #expect(odd?.lamps["x"] == nil, "an impossible RSSI drops the entry")
        #expect(odd?.lamps["y"]?.failures == 1000)
    }

    @Test("three gateways, one lamp, nobody holding: the best RSSI connects at once, the next only after its rank delay, the third later")
    func coldStart() {
        let reports: [String: LampHearing] = ["a": LampHearing(rssi: -60), "b": LampHearing(rssi: -50), "c": LampHearing(rssi: -75)]
        var actions: [String: [HolderAction]] = [:]
        for me in ["a", "b", "c"] {
            let v = view(me, online: ["a", "b", "c"])
            for (g, l) in reports where g != me { v.heard(g, hearing(["L": l]), at: at(0)) }
            actions[me] = [0, 1_499, 1_500, 3_000].map { v.action("L", own: reports[me], ownSlots: 2, at: at($0)) }
        }
        #expect(actions["b"] == [.connect(afterMs: 0), .connect(afterMs: 0), .connect(afterMs: 0), .connect(afterMs: 0)])
        #expect(actions["a"] == [.standBy, .standBy, .connect(afterMs: 0), .connect(afterMs: 0)])
        #expect(actions["c"] == [.standBy, .standBy, .standBy, .connect(afterMs: 0)])
    }

    @Test("a live holder is kept by everyone; when its availability goes offline (its will) the lamp is free again")
    func holderAndWill() {
        let v = view("a", online: ["a", "b"])
        v.heard("b", hearing(["L": LampHearing(rssi: -80, holding: true)]), at: at(0))
        let own = LampHearing(rssi: -40)
        #expect(v.action("L", own: own, ownSlots: 2, at: at(100)) == .standBy, "a healthy link is not taken away, even by a better gateway")
        #expect(v.holder("L", own: own, ownSlots: 2, at: at(100)) == "b")
        v.availability("b", "offline")
        #expect(v.action("L", own: own, ownSlots: 2, at: at(200)) == .connect(afterMs: 0))
    }

    @Test("a holder whose reports stop is gone after maxReportAgeMs; one that still reports while the lamp advertises is taken as gone after the override")
    func staleAndAdvertising() {
        let v = view("a", online: ["a", "b"])
        v.heard("b", hearing(["L": LampHearing(rssi: -50, holding: true)]), at: at(0))
        let own = LampHearing(rssi: -60)
        #expect(v.action("L", own: own, ownSlots: 2, at: at(5_900)) == .standBy)
        #expect(v.action("L", own: own, ownSlots: 2, at: at(6_100)) == .connect(afterMs: 0), "three missed heartbeats")
        // Fresh report again, then the lamp is heard advertising: no link, whatever b says.
        v.heard("b", hearing(["L": LampHearing(rssi: -50, holding: true)], beat: 2), at: at(7_000))
        v.advertised("L", at: at(8_000))
        #expect(v.action("L", own: own, ownSlots: 2, at: at(8_000)) == .standBy, "an advertisement soon after the holder's report proves nothing")
        v.advertised("L", at: at(9_600))
        #expect(v.holder("L", own: own, ownSlots: 2, at: at(9_600)) == nil)
        // b's ranking (it is not holding) is -50 against a's -60: b connects first, a after 1.5 s.
        #expect(v.action("L", own: own, ownSlots: 2, at: at(9_600)) == .standBy)
        #expect(v.action("L", own: own, ownSlots: 2, at: at(11_100)) == .connect(afterMs: 0))
    }

    @Test("two holders after a partition heals: the lesser releases, the better keeps, the same on both sides")
    func twoHolders() {
        let a = view("a", online: ["a", "b"]), b = view("b", online: ["a", "b"])
        a.heard("b", hearing(["L": LampHearing(rssi: -55, holding: true)]), at: at(0))
        b.heard("a", hearing(["L": LampHearing(rssi: -70, holding: true)]), at: at(0))
        #expect(a.action("L", own: LampHearing(rssi: -70, holding: true), ownSlots: 1, at: at(10)) == .release)
        #expect(b.action("L", own: LampHearing(rssi: -55, holding: true), ownSlots: 1, at: at(10)) == .keep)
    }

    @Test("hysteresis: the last holder (its record) wins against a gateway up to 8 dB better, not 9")
    func hysteresis() {
        for (other, expect) in [(-52, HolderAction.connect(afterMs: 0)), (-51, .standBy)] {
            let v = view("a", online: ["a", "b"])
            v.holderRecord("L", "a")
            v.heard("b", hearing(["L": LampHearing(rssi: other)]), at: at(0))
            #expect(v.action("L", own: LampHearing(rssi: -60), ownSlots: 1, at: at(10)) == expect, "b at \(other) dBm")
        }
    }

    @Test("no free slot, no connect: the lamp goes to the next gateway")
    func slots() {
        let v = view("a", online: ["a", "b"])
        v.heard("b", hearing(["L": LampHearing(rssi: -80)], slots: 1), at: at(0))
        #expect(v.action("L", own: LampHearing(rssi: -40), ownSlots: 0, at: at(10)) == .standBy)
        let w = view("b", online: ["a", "b"])
        w.heard("a", hearing(["L": LampHearing(rssi: -40)], slots: 0), at: at(0))
        #expect(w.action("L", own: LampHearing(rssi: -80), ownSlots: 1, at: at(10)) == .connect(afterMs: 0))
    }

    @Test("on demand: only when no gateway has a free slot, by the best signal, and never by a gateway with a slot of its own (it waits its rank)")
    func onDemand() {
        let v = view("a", online: ["a", "b"], gatherMs: 500)
        v.heard("b", hearing(["L": LampHearing(rssi: -80)], slots: 0), at: at(0))
        let own = LampHearing(rssi: -60)
        _ = v.action("L", own: own, ownSlots: 0, at: at(0))  // the lamp has had no holder since 0
        #expect(!v.onDemandTurn("L", own: own, ownSlots: 0, at: at(400)), "gathering")
        #expect(v.onDemandTurn("L", own: own, ownSlots: 0, at: at(600)))
        #expect(!v.onDemandTurn("L", own: own, ownSlots: 1, at: at(600)), "a free slot: the rule's ranking decides")
        let w = view("b", online: ["a", "b"])
        w.heard("a", hearing(["L": LampHearing(rssi: -60)], slots: 0), at: at(0))
        _ = w.action("L", own: LampHearing(rssi: -80), ownSlots: 0, at: at(0))
        #expect(!w.onDemandTurn("L", own: LampHearing(rssi: -80), ownSlots: 0, at: at(600)), "a hears it better")
        w.heard("a", hearing(["L": LampHearing(rssi: -60)], slots: 1), at: at(700))
        #expect(!w.onDemandTurn("L", own: LampHearing(rssi: -80), ownSlots: 0, at: at(800)), "a has a slot: it connects")
    }

    @Test("orphans: a dead holder's lamps still online are for a survivor to mark offline; not while someone holds them, not its own")
    func orphans() {
        let v = view("a", online: ["a", "b", "c"])
        v.holderRecord("L1", "b"); v.availability("L1", "online")
        v.holderRecord("L2", "c"); v.availability("L2", "online")
        v.holderRecord("L3", "a"); v.availability("L3", "online")
        v.heard("b", hearing(["L1": LampHearing(rssi: -50, holding: true)]), at: at(0))
        v.heard("c", hearing(["L2": LampHearing(rssi: -50, holding: true)]), at: at(0))
        #expect(v.orphans(ownHolding: ["L3"], at: at(100)).isEmpty)
        v.availability("b", "offline")
        #expect(v.orphans(ownHolding: ["L3"], at: at(200)) == ["L1"])
        v.availability("L1", "offline")
        #expect(v.orphans(ownHolding: ["L3"], at: at(300)).isEmpty, "said once")
        #expect(v.orphans(ownHolding: ["L3"], at: at(7_000)) == ["L2"], "c's reports went stale")
        #expect(v.orphans(ownHolding: [], at: at(7_000)) == ["L2"], "this gateway's own record is never an orphan of its own")
    }

    @Test("a gateway's own heard message is not read back as another's; a removed report (empty retained payload) is forgotten")
    func ownAndRemoved() {
        let v = view("a", online: ["a", "b"])
        v.heard("a", hearing(["L": LampHearing(rssi: -30, holding: true)]), at: at(0))
        #expect(v.holder("L", own: nil, ownSlots: 0, at: at(10)) == nil)
        v.heard("b", hearing(["L": LampHearing(rssi: -30, holding: true)]), at: at(0))
        #expect(v.holder("L", own: nil, ownSlots: 0, at: at(10)) == "b")
        v.heard("b", nil, at: at(20))
        #expect(v.holder("L", own: nil, ownSlots: 0, at: at(30)) == nil)
    }

    @Test("the shared topics read into the view; other topics are not taken")
    func take() {
        let v = view("a", online: [])
        #expect(v.take(topic: "p/b/availability", payload: Array("online".utf8), prefix: "p", at: at(0)) == .availability(id: "b", value: "online"))
        #expect(v.online("b"))
        #expect(v.take(topic: "p/b/heard", payload: hearing(["L": LampHearing(rssi: -50, holding: true)]).json.serializedBytes, prefix: "p", at: at(0)) == .heard(gateway: "b"))
        #expect(v.holder("L", own: nil, ownSlots: 0, at: at(10)) == "b")
        #expect(v.take(topic: "p/L/holder", payload: Array(#"{"holder":"b"}"#.utf8), prefix: "p", at: at(0)) == .holder(node: "L"))
        #expect(v.holderRecord["L"] == "b")
        #expect(v.take(topic: "p/L/applied", payload: Array(#"{"digest":"00ff"}"#.utf8), prefix: "p", at: at(0)) == .applied(node: "L", digest: "00ff"))
        #expect(v.take(topic: "p/L/set", payload: [], prefix: "p", at: at(0)) == nil)
        #expect(v.take(topic: "q/b/heard", payload: [], prefix: "p", at: at(0)) == nil)
        #expect(v.take(topic: "p/b/c/heard", payload: [], prefix: "p", at: at(0)) == nil)
    }

    @Test("command digests: 16 hex digits, equal for equal payloads, different for different ones")
    func digests() {
        let a = commandDigest(Array(#"{"state":"ON"}"#.utf8)), b = commandDigest(Array(#"{"state":"OFF"}"#.utf8))
        #expect(a.count == 16 && b.count == 16 && a != b)
        #expect(a == commandDigest(Array(#"{"state":"ON"}"#.utf8)))
        #expect(commandDigest([]) == "cbf29ce484222325", "FNV-1a's offset basis for no bytes")
    }
}

/// `attled gateway --status`'s report, from a view filled by hand.
@Suite("Gateways sharing a broker: --status")
struct GatewayStatusTextTests {
    @Test("the report names every gateway and lamp, the holder, who connects next, and why the others may not")
    func report() {
        let t0 = Instant(ns: 1_000_000_000_000)
        let v = SharedView(me: "")
        v.availability("hall", "online"); v.availability("kitchen", "online"); v.availability("attic", "offline")
        v.holderRecord("l1", "hall")
        v.heard("hall", GatewayHearing(beat: 9, slots: 1, lamps: ["l1": LampHearing(rssi: -50, holding: true, name: "Lamp1"), "l2": LampHearing(rssi: -95)]), at: t0)
        v.heard("kitchen", GatewayHearing(beat: 4, slots: 0, lamps: ["l1": LampHearing(rssi: -70, failures: 2), "l2": LampHearing(rssi: -60)]), at: t0)
        v.heard("attic", GatewayHearing(beat: 2, slots: 2, lamps: ["l2": LampHearing(rssi: -40)]), at: t0)
        let text = GatewayStatus.text(v, at: t0.adding(ms: 1_500))
        #expect(text.contains("gateways (3):"))
        #expect(text.contains("hall: online, report 1.5 s old (beat 9), 1 free slot(s), hears 2 lamp(s)"))
        #expect(text.contains("attic: offline"))
        #expect(text.contains("Lamp1 (l1): held by hall"))
        #expect(text.contains("hall: -50 dBm, holding, score -42, +8 as the last holder"))
        #expect(text.contains("kitchen: -70 dBm, score -82, 2 failed connect(s) (not eligible: no free slot)"))
        #expect(text.contains("l2: no holder, and no gateway may take it"))
        #expect(text.contains("attic: -40 dBm, score -40 (not eligible: offline)"))
        #expect(text.contains("hall: -95 dBm, score -95 (not eligible: below -90 dBm)"))
    }
}

/// systemd's notification protocol, judged by a datagram socket of the test's own.
@Suite("systemd notifications")
struct SystemdNotifyTests {
    @Test("READY, WATCHDOG and STOPPING reach $NOTIFY_SOCKET; the watchdog interval is half of WATCHDOG_USEC; nothing without the variable")
    func notify() throws {
        #expect(SystemdNotify(environment: [:]) == nil)
        let path = "/tmp/attled-notify-test-\(getpid()).sock"
        unlink(path)
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        #expect(fd >= 0)
        defer { close(fd); unlink(path) }
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in for (i, b) in path.utf8.enumerated() { raw[i] = b } }
        let bound = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) } }
        #expect(bound == 0)
        let n = try #require(SystemdNotify(environment: ["NOTIFY_SOCKET": path, "WATCHDOG_USEC": "3000000"]))
        #expect(n.watchdogIntervalMs == 1500)
        n.ready("up")
        n.alive()
        n.stopping()
        var got: [String] = []
        for _ in 0..<3 {
            var buf = [UInt8](repeating: 0, count: 256)
            let r = recv(fd, &buf, buf.count, Int32(MSG_DONTWAIT))
            if r > 0 { got.append(String(decoding: buf[0..<r], as: UTF8.self)) }
        }
        #expect(got == ["READY=1\nSTATUS=up", "WATCHDOG=1", "STOPPING=1"])
        let other = try #require(SystemdNotify(environment: ["NOTIFY_SOCKET": path, "WATCHDOG_USEC": "3000000", "WATCHDOG_PID": "1"]))
        #expect(other.watchdogIntervalMs == nil, "the watchdog is for another process")
    }
}
