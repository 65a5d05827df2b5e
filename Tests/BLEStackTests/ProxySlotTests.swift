import Testing
#if canImport(Glibc)
import Glibc
#endif
@testable import BLEWire
@testable import BLETransport
@testable import BLEHCI
@testable import BLEGAP
@testable import Attled
@testable import ESPHomeAPI
@testable import AttledProxy

/// The proxy's slot accounting (issue 30), scripted: the keeper on the
/// scripted controller, the proxy listening on a loopback port, and a
/// plaintext API client on a real socket, whose frames the test reads.
@Suite("Proxy: connection slots")
struct ProxySlotTests {
    /// A plaintext ESPHome API client on a blocking-free socket.
    final class APIClientSocket {
        let fd: Int32
        var decoder = PlaintextFrameDecoder()
        var received: [DecodedAPIMessage] = []

        init(port: UInt16) throws {
            fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var a = sockaddr_in()
            a.sin_family = sa_family_t(AF_INET)
            a.sin_port = port.bigEndian
            a.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
            let rc = withUnsafePointer(to: &a) { p in p.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
            try #require(rc == 0, "connect: errno \(errno)")
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        }

        func send(_ m: some APIMessage) {
            let b = PlaintextFrame.encode(m)
            _ = b.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, b.count, Int32(MSG_NOSIGNAL)) }
        }

        /// Reads what arrived (non-blocking) into `received`.
        func poll() {
            var buf = [UInt8](repeating: 0, count: 8192)
            while true {
                let n = buf.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, 8192) }
                guard n > 0 else { break }
                decoder.append(buf[0..<n])
            }
            while case let .frame(f) = decoder.next() {
                if let m = try? APIMessages.decode(type: f.type, payload: f.payload) { received.append(m) }
            }
        }

        func all<T: APIMessage>(_: T.Type) -> [T] {
            received.compactMap { if case let .known(m) = $0 { return m as? T } else { return nil } }
        }

        func close() { _ = Glibc.close(fd) }
    }

    final class Rig {
        let w: KeeperTests.World
        let proxy: Proxy
        let client: APIClientSocket

        init(maxConnections: Int?) throws {
            w = try KeeperTests.World()
            w.owner.scanWanted = { false }
            w.ctl.autoCompleteACL = true
            // Exchange MTU is answered (server MTU 247); Disconnect completes.
            w.ctl.respond = { p in
                guard p.type == .acl, p.bytes.count >= 9, p.bytes[8] == 0x02 else { return nil }
                return [ACL.in([0x03, 0xF7, 0x00])]
            }
            w.ctl.when(command: HCI.Disconnect.opcode, reply: [Ev.status(HCI.Disconnect.opcode), h4("04 05 04 00 01 00 16")])
            var c = ProxyConfig()
            c.listenHost = "127.0.0.1"
            c.listenPort = 0
            c.maxConnections = maxConnections
            proxy = Proxy(config: c, keeper: w.keeper)
            proxy.log = { _ in }
            try proxy.start()
            w.keeper.attach(w.stack)
            client = try APIClientSocket(port: try #require(proxy.port))
            try w.pump(ms: 50)  // accepted
            client.send(HelloRequest())
            client.send(SubscribeBluetoothConnectionsFreeRequest())
            try pump { self.client.all(BluetoothConnectionsFreeResponse.self).count == 1 }
        }

        func pump(ms: Int = 1_000, until done: @escaping () -> Bool) throws {
            _ = try w.stack.host.pump(until: Instant.now().adding(ms: ms)) { self.client.poll(); return done() }
        }

        var free: [(UInt32, UInt32, [UInt64])] { client.all(BluetoothConnectionsFreeResponse.self).map { ($0.free, $0.limit, $0.allocated) } }
        var connections: [BluetoothDeviceConnectionResponse] { client.all(BluetoothDeviceConnectionResponse.self) }

        func connect(_ address: UInt64) {
            var r = BluetoothDeviceRequest()
            r.address = address
            r.requestType = .connectV3WithoutCache
            r.hasAddressType = true
            r.addressType = 1
            client.send(r)
        }
    }

    static let lampAPI: UInt64 = 0xC0_11_22_33_44_55

    @Test("limit from --max-connections; a connect takes a slot at once (allocated), the link up keeps it, a second connect beyond the limit is refused with 0x09; the client gone drops the link and the slot comes back")
    func slots() throws {
        let r = try Rig(maxConnections: 1)
        #expect(r.free.map { "\($0.0)/\($0.1)" } == ["1/1"])
        r.connect(Self.lampAPI)
        try r.pump { r.free.count == 2 }
        #expect(r.free.last.map { "\($0.0)/\($0.1) \($0.2)" } == "0/1 [\(Self.lampAPI)]")
        try r.pump { !r.w.connectsSent.isEmpty }
        #expect(r.w.connectsSent == [KeeperTests.lamp])
        r.w.ctl.deliver(KeeperTests.connected(KeeperTests.lamp, handle: 1))
        try r.pump { !r.connections.isEmpty }
        #expect(r.connections.first.map { "\($0.connected) mtu \($0.mtu) error \($0.error)" } == "true mtu 247 error 0")
        // Beyond the limit: refused at once, Connection Limit Exceeded, no LE Create Connection.
        r.connect(0xC0_11_22_33_44_66)
        try r.pump { r.connections.count == 2 }
        #expect(r.connections.last.map { "\($0.address) \($0.connected) \($0.error)" } == "\(UInt64(0xC0_11_22_33_44_66)) false 9")
        #expect(r.w.connectsSent.count == 1)
        // The API client goes away: its link is disconnected and the slot is free again.
        r.client.close()
        try r.pump { r.w.ctl.sentOpcodes.contains(0x0406) }
        #expect(r.w.ctl.sentOpcodes.contains(0x0406), "Disconnect sent")
        try r.pump { r.proxy.freeSlots == 1 }
        #expect(r.proxy.freeSlots == 1)
    }

    @Test("another owner's links count against the proxy: with 2 slots and one kept lamp, the proxy offers 1")
    func sharedWithLamps() throws {
        var p = DeviceKeeper.Policy()
        p.useAcceptList = false
        p.maxLinks = 2
        let w = try KeeperTests.World(policy: p)
        var c = ProxyConfig()
        c.listenHost = "127.0.0.1"
        c.listenPort = 0
        let proxy = Proxy(config: c, keeper: w.keeper)
        proxy.log = { _ in }
        w.keeper.attach(w.stack)
        #expect(proxy.connectionLimit == 2 && proxy.freeSlots == 2)
        // The test owner keeps Lamp1: heard, connected, ready.
        w.ctl.deliver(KeeperTests.report(KeeperTests.lamp, "Lamp1"))
        try w.pump { !w.connectsSent.isEmpty }
        w.ctl.deliver(KeeperTests.connected(KeeperTests.lamp, handle: 1))
        try w.pump { w.events.contains("up Lamp1") }
        #expect(proxy.freeSlots == 1)
    }
}

@Suite("ESPHome API messages in the trace")
struct APITraceDescriptionTests {
    @Test("a message prints its name, id and the fields that are not their defaults; an address as one")
    func describe() {
        var w = BluetoothGATTWriteRequest()
        w.address = 0xC0_11_22_33_44_55
        w.handle = 16
        w.response = true
        w.data = [0x07]
        #expect(w.traceDescription == "BluetoothGATTWriteRequest (75) address=C0:11:22:33:44:55, handle=16, response=true, data=07")
        #expect(PingRequest().traceDescription == "PingRequest (7)")
        var f = BluetoothConnectionsFreeResponse()
        f.free = 0
        f.limit = 2
        f.allocated = [0xC0_11_22_33_44_55]
        #expect(f.traceDescription == "BluetoothConnectionsFreeResponse (81) limit=2, allocated=[C0:11:22:33:44:55]")
        var s = BluetoothGATTGetServicesResponse()
        s.address = 1
        s.services = [BluetoothGATTService(uuid: BluetoothGATTUUID(uuid: [1, 2]), handle: 14)]
        #expect(s.traceDescription == "BluetoothGATTGetServicesResponse (71) address=00:00:00:00:00:01, services=[{uuid=[1,2], handle=14}]")
    }
}
