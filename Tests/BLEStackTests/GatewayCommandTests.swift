import Testing
@testable import BLEWire
@testable import BLEHCI
@testable import BLEGAP
@testable import BLEATT
@testable import BLEGATT
@testable import LEDProfile
@testable import MQTT
@testable import AttledHomeAssistant
@testable import Attled
@testable import AttledGateway
@testable import AttledLED

/// The gateway's command logic (issue 20) on a scripted controller, no
/// broker: Home Assistant commands coalesce while a write is in flight, the
/// latest state wins, and a partial command applies on top of the newest state.
@Suite("Gateway: light commands")
struct GatewayCommandTests {
    /// A gateway with one pycom lamp linked on handle 1, its LED
    /// characteristics known (red 0x10, green 0x12, blue 0x14; Write Request).
    final class Rig {
        let w: KeeperTests.World
        let gateway: Gateway
        let lamp: GatewayLamp

        init() throws {
            let w = try KeeperTests.World()
            w.ctl.autoCompleteACL = true
            var config = GatewayConfig(brokerHost: "127.0.0.1")
            config.names = ["Lamp1"]
            let gateway = try Gateway(config: config, stack: w.stack)
            // The lamp's link (made directly: the gateway's own setup, which
            // would discover the LED service, is not under test here).
            var link: Link?
            w.stack.central.adoptUnrequested { c in link = w.stack.attach(c); return true }
            w.ctl.deliver(KeeperTests.connected(KeeperTests.lamp, handle: 1))
            try w.pump { link != nil }
            let dev = KeptDevice(address: DeviceAddress(BDAddress(KeeperTests.lamp)!, .random), owner: gateway.owner, claim: .keep, backoff: Backoff())
            dev.state = .ready(try #require(link))
            // Adopted by the gateway's keeper: the lamp is this gateway's to write.
            gateway.keeper.devices[dev.address.address] = dev
            self.w = w
            self.gateway = gateway
            lamp = gateway.lamp(for: dev)
            let p = LEDProfile.pycom
            guard case let .rgb(r, g, b) = p.shape else { Issue.record("pycom is an RGB profile"); throw WireError.truncated(field: "shape", needed: 0, available: 0) }
            let chars = [(r, UInt16(0x10)), (g, 0x12), (b, 0x14)].map { u, h in
                Characteristic(declarationHandle: h - 1, properties: [.read, .write], valueHandle: h, uuid: u, end: h)
            }
            let session = LampSession(link: try #require(link), resolver: gateway.resolver, securer: nil, advertised: [], deviceName: "Lamp1", report: Report(prefix: "", quiet: true))
            lamp.session = session
            session.use(try ResolvedLED(profile: p, service: Service(uuid: p.service, start: 0x0C, end: 0x14), characteristics: chars))
            lamp.ha = try HADevice(id: "C0:11:22:33:44:55", name: "Lamp1", model: "pycom", kind: .light)
            lamp.light = LightState.readBack(LightColour(1, 2, 3))
        }

        /// A command from Home Assistant; the loop then sends what it queued.
        func command(_ json: String) throws {
            gateway.message(gateway.topics.command(lamp.ha!), Array(json.utf8))
            try w.pump(ms: 20)
        }

        /// The ATT Write Requests sent so far: (handle, value byte).
        var writes: [String] {
            w.ctl.sent.filter { $0.type == .acl && $0.bytes.count >= 12 && $0.bytes[8] == 0x12 }
                .map { p in "\(Hex.int(UInt16(p.bytes[9]) | UInt16(p.bytes[10]) << 8, width: 4))=\(p.bytes[11])" }
        }

        /// Answers the outstanding Write Request.
        func respond() throws {
            let n = writes.count
            w.ctl.deliver(ACL.in([0x13]))
            try w.pump(ms: 100) { writes.count > n || !lamp.isWriting }
        }
    }

    @Test("two commands while a write is in flight: the first is written, the second replaced by the third, which is written next; the state is the newest")
    func coalescing() throws {
        let r = try Rig()
        try r.command(#"{"state":"ON","color":{"r":10,"g":20,"b":30},"brightness":255}"#)
        #expect(r.writes == ["0010=10"])
        #expect(r.lamp.isWriting && r.lamp.inFlight?.deviceColour == LightColour(10, 20, 30))
        // Two more arrive before the first write is done.
        try r.command(#"{"state":"ON","color":{"r":40,"g":50,"b":60}}"#)
        try r.command(#"{"state":"ON","color":{"r":70,"g":80,"b":90}}"#)
        #expect(r.lamp.wanted?.deviceColour == LightColour(70, 80, 90))
        for _ in 0..<3 { try r.respond() }
        // The first colour done; the newest one follows at once (40,50,60 never written).
        #expect(r.writes == ["0010=10", "0012=20", "0014=30", "0010=70"])
        #expect(r.lamp.light?.deviceColour == LightColour(10, 20, 30))
        for _ in 0..<3 { try r.respond() }
        #expect(r.writes == ["0010=10", "0012=20", "0014=30", "0010=70", "0012=80", "0014=90"])
        #expect(r.lamp.light?.deviceColour == LightColour(70, 80, 90) && !r.lamp.isWriting && r.lamp.wanted == nil)
    }

    @Test("a brightness-only command applies to the state being written, not the one on the device")
    func partialOnTopOfInFlight() throws {
        let r = try Rig()
        try r.command(#"{"state":"ON","color":{"r":200,"g":100,"b":50},"brightness":255}"#)
        try r.command(#"{"state":"ON","brightness":128}"#)
        #expect(r.lamp.wanted?.deviceColour == LightColour(100, 50, 25))
        for _ in 0..<6 { try r.respond() }
        #expect(r.writes.suffix(3) == ["0010=100", "0012=50", "0014=25"])
    }

    @Test("a command for a device the gateway does not know is ignored; a malformed payload writes nothing")
    func ignored() throws {
        let r = try Rig()
        r.gateway.message("attled/000000000000/set", Array(#"{"state":"ON"}"#.utf8))
        try r.command("not json")
        try r.w.pump(ms: 20)
        #expect(r.writes.isEmpty && r.lamp.wanted == nil)
    }
}
