import Testing
@testable import BLEWire
@testable import BLETransport
@testable import BLEHCI
@testable import BLEGAP
@testable import BLEL2CAP
@testable import BLEATT
@testable import Attled
@testable import AttledServe
@testable import BLEGATTServer
@testable import LEDProfile

/// `ServeRunner` on the scripted controller: a central connects (LE
/// Connection Complete, role 1), its ATT requests are answered from the
/// board, its writes change the LED, and its end detaches its session.
@Suite("ServeRunner: a board served on the scripted controller")
struct ServeRunnerTests {
    final class World {
        let adv: AdvertiserTests.World
        let runner: ServeRunner
        var events: [String] = []
        init(_ p: LEDProfile, parameters: ConnectionParameters? = nil) throws {
            adv = try AdvertiserTests.World(listen: false)
            adv.enableAlwaysSucceeds()
            adv.ctl.autoCompleteACL = true
            var config = ServeConfig(database: try Boards.database(p, name: "CassarTech"), name: "CassarTech")
            config.connectionParameters = parameters
            runner = try ServeRunner(stack: adv.stack, config: config)
            runner.subscribe { [unowned self] e in
                switch e {
                case .advertising: self.events.append("advertising")
                case let .connected(a): self.events.append("connected \(a.address)")
                case let .disconnected(a, r): self.events.append("disconnected \(a.address) \(r.map { Hex.int($0.rawValue, width: 2) } ?? "-")")
                case let .write(_, w): self.events.append("write \(Hex.int(w.handle, width: 4)) \(Hex.string(w.value, separator: ""))")
                case let .state(.colour(c), _): self.events.append("LED \(c)")
                case let .state(.buttons(b), _): self.events.append("buttons \(b)")
                case let .subscribed(_, h, n, _): self.events.append("subscribed \(Hex.int(h, width: 4)) \(n)")
                case let .parametersAnswered(_, p, ok, err): self.events.append("asked \(p.intervalMin)-\(p.intervalMax): \(err ?? (ok ? "accepted" : "rejected"))")
                case let .connectionUpdated(_, c): self.events.append("interval \(c.interval) latency \(c.latency) timeout \(c.supervisionTimeout)")
                case .advertisingRefused, .encrypted, .paired, .securityFailed, .restored: break
                }
            }
            _ = try adv.stack.host.wait(runner.start(), until: Instant.now().adding(ms: 2000))
        }
        /// The ATT payloads sent on handle 1.
        var att: [String] {
            adv.ctl.sent.compactMap { p -> String? in
                guard p.type == .acl, let a = try? ACLPacket.decode(p.bytes), a.data.count >= 4, a.data[2] == 0x04, a.data[3] == 0 else { return nil }
                return Hex.string(a.data[4...])
            }
        }
        func ask(_ pdu: String) throws -> String? {
            let before = att.count
            adv.ctl.deliver(ACL.in(hex(pdu)))
            try adv.pump { self.att.count > before }
            return att.count > before ? att.last : nil
        }
    }

    @Test("a central connects, discovers the LED service, writes the colour: answered from the board, the LED follows; its end detaches it and advertising starts again")
    func connectServeDisconnect() throws {
        let w = try World(.pycom)
        #expect(w.events == ["advertising"])
        w.adv.ctl.deliver(AdvertiserTests.connected(handle: 1, role: 1))
        try w.adv.pump { w.events.count >= 2 }
        #expect(w.events.last == "connected \(AdvertiserTests.central)")
        #expect(try w.ask("10 01 00 ff ff 00 28") == "11 06 01 00 05 00 00 18 06 00 0d 00 01 18")
        #expect(try w.ask("12 10 00 ff") == "13")
        #expect(try w.ask("52 14 00 40") == nil, "a Write Command gets no answer")
        try w.adv.pump { w.events.contains("LED 255,0,64 (#ff0040)") }
        #expect(Array(w.events.dropFirst(3)) == ["write 0010 ff", "LED 255,0,0 (#ff0000)", "write 0014 40", "LED 255,0,64 (#ff0040)"], "\(w.events)")
        #expect(w.runner.server.sessions.count == 1)
        // Below maxConnections advertising went on beside the connection.
        #expect(w.adv.enables == 2 && w.adv.adv.state == .advertising)
        w.adv.ctl.deliver(h4("04 05 04 00 01 00 13"))
        try w.adv.pump { w.events.last?.hasPrefix("disconnected") == true }
        #expect(w.events.last == "disconnected \(AdvertiserTests.central) 13")
        #expect(w.runner.server.sessions.isEmpty)
        #expect(w.adv.adv.state == .advertising)
    }

    @Test("--conn-interval: each central is asked once it connected (L2CAP Connection Parameter Update Request); its answer and the LE Connection Update Complete that follows are told")
    func connectionParameters() throws {
        let w = try World(.pycom, parameters: AdvertiserTests.wanted)
        w.adv.ctl.deliver(AdvertiserTests.connected(handle: 1, role: 1))
        try w.adv.pump { w.runner.server.sessions.count == 1 }
        #expect(w.adv.ctl.sentHex(.acl).last == AdvertiserTests.request)
        w.adv.ctl.deliver(ACL.in(cid: CID.leSignalling, [0x13, 0x01, 0x02, 0x00, 0x00, 0x00]))
        try w.adv.pump { w.events.last?.hasPrefix("asked") == true }
        #expect(w.events.last == "asked 24-40: accepted")
        // LE Connection Update Complete: handle 1, interval 0x0028, latency 0, timeout 0x0190.
        w.adv.ctl.deliver(h4("04 3e 0a 03 00 01 00 28 00 00 00 90 01"))
        try w.adv.pump { w.events.last?.hasPrefix("interval") == true }
        #expect(w.events.last == "interval 40 latency 0 timeout 400")
        // Another connection's update is not this runner's to tell.
        let count = w.events.count
        w.adv.ctl.deliver(h4("04 3e 0a 03 00 07 00 28 00 00 00 90 01"))
        try w.adv.pump { w.adv.ctl.inbox.isEmpty }
        #expect(w.adv.ctl.inbox.isEmpty && w.events.count == count)
    }

    @Test("without --conn-interval nothing is asked")
    func noConnectionParameters() throws {
        let w = try World(.pycom)
        w.adv.ctl.deliver(AdvertiserTests.connected(handle: 1, role: 1))
        try w.adv.pump { w.runner.server.sessions.count == 1 }
        #expect(!w.adv.ctl.sentHex(.acl).contains { $0.contains("00 05 00 12") })
    }

    @Test("the harness served: a subscribed central hears each command it writes")
    func harness() throws {
        let w = try World(.harness)
        w.adv.ctl.deliver(AdvertiserTests.connected(handle: 1, role: 1))
        try w.adv.pump { w.runner.server.sessions.count == 1 }
        #expect(try w.ask("12 13 00 01 00") == "13")
        let mark = w.att.count
        _ = try w.ask("12 10 00 01")
        try w.adv.pump { w.att.count >= mark + 2 }
        #expect(Array(w.att[mark...]) == ["1b 12 00 01", "13"])
        #expect(w.events.contains("subscribed 0012 true") && w.events.contains("buttons [true, false]"))
    }
}
