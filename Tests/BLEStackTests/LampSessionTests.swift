import Testing
@testable import BLEWire
@testable import BLEHCI
@testable import BLEGAP
@testable import BLEATT
@testable import BLEGATT
@testable import LEDProfile
@testable import Attled
@testable import AttledLED

/// The LED lamp session (issue 29), the one place the CLI jobs, the UI and
/// the gateway use a lamp's link, on the scripted controller with a scripted
/// GATT server: Write Commands never dropped for want of encryption, writes
/// done only when the controller sent them, Service Changed judged against
/// the LED service.
@Suite("LED lamp session")
struct LampSessionTests {
    /// A pycom lamp whose colour characteristics take Write Command only
    /// (read, write without response): service 0x0001-0x0007, red 0x0003,
    /// green 0x0005, blue 0x0007.
    static func commandLamp() -> ScriptedGATTServer {
        guard case let .rgb(red, green, blue) = LEDProfile.pycom.shape else { fatalError("pycom is RGB") }
        let props = ScriptedGATTServer.read | ScriptedGATTServer.writeCommand
        return ScriptedGATTServer([ScriptedGATTServer.service(0x0001, LEDProfile.pycom.service)]
            + ScriptedGATTServer.characteristic(0x0002, red, props, [0])
            + ScriptedGATTServer.characteristic(0x0004, green, props, [0])
            + ScriptedGATTServer.characteristic(0x0006, blue, props, [0]))
    }

    final class Rig {
        let ctl: ScriptedController
        let stack: BLEStack
        let server: ScriptedGATTServer
        let link: Link
        let session: LampSession
        var lines: [String] = []

        init(_ server: ScriptedGATTServer, pairing: SecurityPolicy.Pairing? = nil, autoComplete: Bool = true) throws {
            ctl = HCIHostInitTests.controller(bdaddr: "00 00 00 00 00 00")
            ctl.autoCompleteACL = autoComplete
            ctl.respond = { [unowned server] in server.answer($0) }
            self.server = server
            stack = try BLEStack(transport: ctl)
            stack.host.interruptible = false
            stack.central.airRequests = []
            var up: Link?
            stack.central.adoptUnrequested { [stack] c in up = stack.attach(c); return true }
            ctl.deliver(KeeperTests.connected(KeeperTests.lamp, handle: 1))
            _ = try stack.host.pump(until: Instant.now().adding(ms: 1_000)) { up != nil }
            link = try #require(up)
            let report = Report(prefix: "", quiet: false)
            let securer = pairing.map { Securer(policy: SecurityPolicy(pairing: $0), store: nil, report: report) }
            session = LampSession(link: link, resolver: LEDResolver(cache: nil, explicitProfile: nil, trustCache: false), securer: securer,
                                  advertised: [], deviceName: "Lamp1", report: report)
            report.output = { [unowned self] in self.lines.append($0) }
        }

        /// Runs `f` to its end on the loop.
        func wait<T>(_ f: Future<T>, ms: Int = 2_000) throws -> Result<T, any Error> {
            _ = try stack.host.pump(until: Instant.now().adding(ms: ms)) { f.isComplete }
            return try #require(f.result)
        }

        /// ATT requests of this opcode the server received.
        func requests(_ op: UInt8) -> Int { server.requests.filter { $0.hasPrefix(Hex.int(op, width: 2)) }.count }
    }

    @Test("Write Commands to characteristics that need encryption: the link is secured first; where pairing is not allowed, the write fails and nothing is sent")
    func writeCommandsNeedEncryption() throws {
        let server = Self.commandLamp()
        server.refuseRead = { _ in 0x0F } // Insufficient Encryption
        let r = try Rig(server, pairing: .never)
        let f = r.session.start { _ in r.session.startSetColour(RGB(1, 2, 3)).map { _ in } }
        let result = try r.wait(f)
        guard case .failure(let e) = result, case SecuringError.pairingNotAllowed = e else {
            Issue.record("expected pairingNotAllowed, got \(result)"); return
        }
        #expect(server.writes.isEmpty, "no Write Command the device would drop")
        #expect(r.lines.contains { $0.contains("need an encrypted link") })
    }

    @Test("Write Commands to characteristics readable without encryption are written, back to back, and done only once the controller sent them")
    func writeCommandsDrained() throws {
        let r = try Rig(Self.commandLamp(), pairing: .never, autoComplete: false)
        var kinds: Set<Bool>?
        let f = r.session.start { _ in r.session.startSetColour(RGB(1, 2, 3)).map { kinds = $0 } }
        _ = try r.stack.host.pump(until: Instant.now().adding(ms: 1_000)) { r.server.writes.count == 3 }
        #expect(r.server.writes == ["cmd 0003=01", "cmd 0005=02", "cmd 0007=03"])
        #expect(!f.isComplete, "not done before the controller reports the packets sent")
        // Number Of Completed Packets for everything sent on handle 1.
        let sent = UInt16(r.ctl.sent.filter { $0.type == .acl }.count)
        r.ctl.deliver(HCIPacket(.event, [0x13, 0x05, 0x01, 0x01, 0x00, UInt8(sent & 0xFF), UInt8(sent >> 8)]))
        let result = try r.wait(f)
        guard case .success = result else { Issue.record("\(result)"); return }
        #expect(kinds == [false], "Write Command only")
    }

    @Test("Service Changed outside the LED service keeps the handles; over it, the next work discovers again first")
    func serviceChanged() throws {
        let r = try Rig(ScriptedGATTServer.pycom(1, 2, 3))
        _ = try r.wait(r.session.start { _ in .done })
        let discoveries = r.requests(0x06)
        #expect(discoveries == 1, "one Find By Type Value for the pycom service")
        // Handle Value Indication from 0x0020 (outside 0x0001-0x0007): 0x0030-0x0040 changed.
        r.ctl.deliver(ACL.in([0x1D, 0x20, 0x00, 0x30, 0x00, 0x40, 0x00]))
        _ = try r.stack.host.pump(until: Instant.now().adding(ms: 200)) { r.lines.contains { $0.contains("Service Changed") } }
        _ = try r.wait(r.session.act { _ in .done })
        #expect(r.requests(0x06) == discoveries, "not rediscovered")
        #expect(r.lines.contains { $0.contains("outside the LED service 0x0001-0x0007: cache kept") })
        // The whole database changed: the next work discovers the service again.
        r.ctl.deliver(ACL.in([0x1D, 0x20, 0x00, 0x01, 0x00, 0xFF, 0xFF]))
        _ = try r.stack.host.pump(until: Instant.now().adding(ms: 200)) { r.lines.contains { $0.contains("cache invalidated") } }
        var ran = false
        let result = try r.wait(r.session.act { _ in ran = true; return .done })
        guard case .success = result else { Issue.record("\(result)"); return }
        #expect(ran && r.requests(0x06) == discoveries + 1, "discovered again before the work")
        #expect(r.session.led?.service.start == 0x0001)
    }

    @Test("a notification of the lamp's characteristic reaches onValue; an operation before set-up fails cleanly")
    func valuesAndNotResolved() throws {
        let r = try Rig(ScriptedGATTServer.harness())
        let early = try r.wait(r.session.startSetColour(RGB(1, 1, 1)))
        guard case .failure(LEDOperations.Failure.notResolved) = early else { Issue.record("\(early)"); return }
        var got: [[UInt8]] = []
        r.session.onValue = { got.append($0.value) }
        let prepared = try r.wait(r.session.startPrepared())
        guard case .success(.subscribed(let n?)) = prepared else { Issue.record("\(prepared)"); return }
        #expect(n.valueHandle == 0x0005)
        r.ctl.deliver(ScriptedGATTServer.notification(0x0005, [0x01, 0x02]))
        _ = try r.stack.host.pump(until: Instant.now().adding(ms: 200)) { !got.isEmpty }
        #expect(got == [[0x01, 0x02]])
    }
}
