import Testing
@testable import BLEWire
@testable import BLEHCI
@testable import BLEGAP
@testable import BLEATT
@testable import Attled

/// One owner of a connection's life: the facade's Link sees the end once and
/// passes it down in a fixed order.
@Suite("Link: the end of a connection")
struct LinkLifeTests {
    @Test("Disconnection Complete: the ATT request fails, then the link's owner hears it, then the Central's subscribers; each once")
    func order() throws {
        let ctl = HCIHostInitTests.controller(bdaddr: "00 00 00 00 00 00", version: "00 0c 34 12 0c 5f 00 78 56")
        let stack = try BLEStack(transport: ctl)
        stack.host.interruptible = false
        var link: Link?
        stack.central.adoptUnrequested { c in link = stack.attach(c); return true }
        ctl.deliver(h4("04 3e 13 01 00 01 00 00 01 55 44 33 22 11 c0 06 00 00 00 c8 00 00"))
        _ = try stack.host.pump(until: Instant.now().adding(ms: 500)) { link != nil }
        let l = try #require(link)
        var order: [String] = []
        let read = l.bearer.submit(ATT.ReadRequest(handle: 3)).map { _ in order.append("att: answered") }
            .recover { e -> Future<Void> in order.append("att: \(e)"); return .done }
        l.onDisconnect = { reason in order.append("link: \(reason.map { "0x" + Hex.int($0.rawValue, width: 2) } ?? "nil")") }
        stack.central.onDisconnection { c in order.append("central: \(c.isConnected)") }
        ctl.deliver(h4("04 05 04 00 01 00 13"))
        _ = try stack.host.pump(until: Instant.now().adding(ms: 500)) { order.count >= 3 }
        _ = try stack.host.pump(until: Instant.now().adding(ms: 20)) { false }
        #expect(read.isComplete)
        #expect(order == ["att: \(ATTError.disconnected(reason: .remoteUserTerminated))", "link: 0x13", "central: false"])
        #expect(!l.l2cap.isOpen && !l.isConnected)
        #expect(stack.links.isEmpty)
    }
}
