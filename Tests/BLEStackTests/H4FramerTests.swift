#if canImport(Glibc)
import Glibc
#endif
import Testing
@testable import BLEWire
@testable import BLETransport

/// A capture of H4 traffic (both directions interleaved, as a framer on a
/// bidirectional tap would see it), from the virtual-controller notes.
private let stream: [[UInt8]] = [
    hex("01 03 0c 00"),                                                              // HCI_Reset
    hex("04 0e 04 01 03 0c 00"),                                                     // Command Complete
    hex("01 0d 20 19 10 00 10 00 00 01 55 44 33 22 11 c0 01 18 00 28 00 00 00 f4 01 00 00 00 00"), // LE Create Connection
    hex("04 0f 04 00 01 0d 20"),                                                     // Command Status
    hex("04 3e 13 01 00 01 00 00 01 55 44 33 22 11 c0 18 00 00 00 f4 01 00"),        // LE Connection Complete
    hex("02 01 20 07 00 03 00 04 00 02 05 02"),                                      // ATT Exchange MTU Request
    hex("02 01 20 05 00 01 00 04 00 13"),                                            // ATT Write Response
    hex("02 01 20 10 00 0c 00 05 00 12 01 08 00 18 00 28 00 00 00 90 01"),          // Connection Parameter Update Request
    hex("04 13 05 01 01 00 01 00"),                                                  // Number Of Completed Packets
]

private func packets(_ list: [[UInt8]]) -> [HCIPacket] {
    list.map { HCIPacket(HCIPacketType(rawValue: $0[0]), Array($0.dropFirst())) }
}

private func frame(_ chunks: [[UInt8]]) throws -> [HCIPacket] {
    var f = H4Framer()
    var out: [HCIPacket] = []
    for c in chunks {
        f.feed(c)
        out += try f.drain()
    }
    #expect(f.pendingByteCount == 0)
    return out
}

@Suite("H4 framer")
struct H4FramerTests {
    @Test("a whole stream fed at once yields every packet in order")
    func whole() throws {
        #expect(try frame([stream.flatMap { $0 }]) == packets(stream))
    }

    @Test("fed one byte at a time, the stream yields the same packets")
    func byteByByte() throws {
        let bytes = stream.flatMap { $0 }
        #expect(try frame(bytes.map { [$0] }) == packets(stream))
    }

    @Test("each packet fed on its own yields exactly that packet")
    func onePacketPerFeed() throws {
        for p in stream {
            #expect(try frame([p]) == packets([p]))
        }
    }

    @Test("the stream split in two at every possible point yields the same packets")
    func everySplitPoint() throws {
        let bytes = stream.flatMap { $0 }
        let expected = packets(stream)
        for cut in 0...bytes.count {
            let got = try frame([Array(bytes[0..<cut]), Array(bytes[cut...])])
            #expect(got == expected, "split at \(cut)")
        }
    }

    @Test("a partial packet is held, not returned, and reported as pending bytes")
    func partialHeld() throws {
        var f = H4Framer()
        f.feed(hex("04 0e 04 01 03"))
        #expect(try f.next() == nil)
        #expect(f.pendingByteCount == 5)
        f.feed(hex("0c 00 01"))
        #expect(try f.next() == HCIPacket(.event, hex("0e 04 01 03 0c 00")))
        #expect(try f.next() == nil)
        #expect(f.pendingByteCount == 1)
    }

    @Test("an empty framer returns nil")
    func empty() throws {
        var f = H4Framer()
        #expect(try f.next() == nil)
        #expect(try f.drain() == [])
    }

    @Test("ACL data uses a 2-byte length: a 300-byte payload is one packet")
    func aclTwoByteLength() throws {
        let payload = (0..<300).map { UInt8(truncatingIfNeeded: $0) }
        let bytes = hex("02 01 20 2c 01") + payload
        let got = try frame(bytes.map { [$0] })
        #expect(got == [HCIPacket(.acl, hex("01 20 2c 01") + payload)])
    }

    @Test("ISO data length is 14 bits: the top two bits of the length field are ignored")
    func isoLengthMask() throws {
        // Length field 0xC003: the RFU bits 14-15 are set; the length is 3.
        let got = try frame([hex("05 01 00 03 c0 aa bb cc 04 0e 03 01 00 00")])
        #expect(got == [HCIPacket(.iso, hex("01 00 03 c0 aa bb cc")), HCIPacket(.event, hex("0e 03 01 00 00"))])
    }

    @Test("SCO data uses a 1-byte length")
    func sco() throws {
        #expect(try frame([hex("03 01 00 02 11 22")]) == [HCIPacket(.sco, hex("01 00 02 11 22"))])
    }

    @Test("zero-length packets are complete at the header")
    func zeroLength() throws {
        #expect(try frame([hex("04 10 00 01 03 0c 00")]) == [HCIPacket(.event, hex("10 00")), HCIPacket(.command, hex("03 0c 00"))])
    }

    @Test("an unknown packet indicator throws (the stream cannot be resynchronised)", arguments: [UInt8(0x00), 0x06, 0x41, 0xff])
    func unknownIndicator(indicator: UInt8) {
        var f = H4Framer()
        f.feed([indicator, 0x0e, 0x00])
        let e = expectWireError { try f.next() }
        guard case .invalid(let field, let reason)? = e else { Issue.record("got \(String(describing: e))"); return }
        #expect(field == "H4 packet indicator")
        #expect(reason.contains("0x" + Hex.int(indicator, width: 2)))
    }

    @Test("packets before a bad indicator are still returned by next()")
    func goodThenBad() throws {
        var f = H4Framer()
        f.feed(hex("04 0e 04 01 03 0c 00 7f"))
        #expect(try f.next() == HCIPacket(.event, hex("0e 04 01 03 0c 00")))
        #expect(throws: WireError.self) { try f.next() }
    }

    @Test("a long stream of many packets compacts and stays correct")
    func manyPackets() throws {
        var f = H4Framer()
        var out: [HCIPacket] = []
        for i in 0..<2000 {
            f.feed(hex("04 0e 04 01") + [UInt8(truncatingIfNeeded: i), 0x0c, 0x00] + hex("04 13"))
            out += try f.drain()
            f.feed(hex("05 01 01 00 01 00"))
            out += try f.drain()
        }
        #expect(out.count == 4000)
        #expect(out[3998] == HCIPacket(.event, hex("0e 04 01 cf 0c 00")))
        #expect(out[3999] == HCIPacket(.event, hex("13 05 01 01 00 01 00")))
        #expect(f.pendingByteCount == 0)
    }

    @Test("HCIPacket.h4 puts the indicator first; types print their names")
    func packetH4() {
        #expect(HCIPacket(.command, hex("03 0c 00")).h4 == hex("01 03 0c 00"))
        #expect(HCIPacketType.command.description == "HCI Command")
        #expect(HCIPacketType.acl.description == "ACL Data")
        #expect(HCIPacketType.sco.description == "SCO Data")
        #expect(HCIPacketType.event.description == "HCI Event")
        #expect(HCIPacketType.iso.description == "ISO Data")
        #expect(HCIPacketType(rawValue: 0x09).description == "packet type 0x09")
    }
}

@Suite("Transport specs")
struct TransportSpecTests {
    @Test("every accepted form parses to its spec and prints back",
          arguments: [
            ("hci0", TransportSpec.userChannel(index: 0), "hci0"),
            ("hci12", .userChannel(index: 12), "hci12"),
            ("tcp:127.0.0.1:9000", .tcp(host: "127.0.0.1", port: 9000), "tcp:127.0.0.1:9000"),
            ("tcp:localhost:1", .tcp(host: "localhost", port: 1), "tcp:localhost:1"),
            ("tcp:[::1]:9000", .tcp(host: "::1", port: 9000), "tcp:[::1]:9000"),
            ("tcp:host:65535", .tcp(host: "host", port: 65535), "tcp:host:65535"),
            ("unix:/tmp/ctl.sock", .unix(path: "/tmp/ctl.sock"), "unix:/tmp/ctl.sock"),
            ("serial:/dev/ttyACM0", .serial(path: "/dev/ttyACM0", baud: 115200, rtscts: false), "serial:/dev/ttyACM0,115200"),
            ("serial:/dev/x,921600,rtscts", .serial(path: "/dev/x", baud: 921600, rtscts: true), "serial:/dev/x,921600,rtscts"),
            ("serial:/dev/x,rtscts,1000000", .serial(path: "/dev/x", baud: 1_000_000, rtscts: true), "serial:/dev/x,1000000,rtscts"),
            ("uart:/dev/ttyS0,flow", .serial(path: "/dev/ttyS0", baud: 115200, rtscts: true), "serial:/dev/ttyS0,115200,rtscts"),
          ])
    func accepted(text: String, spec: TransportSpec, printed: String) throws {
        let s = try TransportSpec.parse(text)
        #expect(s == spec)
        #expect(s.description == printed)
        #expect(try TransportSpec.parse(s.description) == s)
    }

    @Test("malformed specs throw invalidSpec with the reason",
          arguments: [
            ("hci", "hciN"), ("hcix", "hciN"), ("hci123456", "hciN"), ("hci70000", "hciN"),
            ("tcp:host:0", "port"), ("tcp:host:65536", "port"), ("tcp:host:http", "port"), ("tcp:host", "HOST:PORT"), ("tcp::9000", "missing host"),
            ("tcp:[]:9000", "missing host"),
            ("bluetooth:x", "unknown transport kind 'bluetooth'"), ("nonsense", "KIND:ARGS"),
            ("unix:", "socket path"),
            ("serial:", "device path"), ("serial:,115200", "device path"), ("serial:/dev/x,12345", "unsupported baud rate 12345"),
            ("serial:/dev/x,fast", "unknown serial option 'fast'"), ("serial:/dev/x,-9600", "unknown serial option"),
          ])
    func rejected(text: String, reasonContains: String) {
        do {
            let s = try TransportSpec.parse(text)
            Issue.record("'\(text)' parsed as \(s)")
        } catch let TransportError.invalidSpec(t, reason) {
            #expect(t == text)
            #expect(reason.contains(reasonContains), "reason: \(reason)")
        } catch {
            Issue.record("unexpected error \(error)")
        }
    }

    @Test("the invalid-spec message lists the accepted forms")
    func message() {
        let m = TransportError.invalidSpec("x", reason: "r").description
        #expect(m.contains("hci0") && m.contains("tcp:HOST:PORT") && m.contains("unix:/path") && m.contains("serial:"))
    }
}

@Suite("Stream transport over a socket pair")
struct StreamTransportTests {
    /// A transport on one end of a Unix socket pair; the other end plays the controller.
    static func pair() throws -> (StreamTransport, Int32) {
        var fds: [Int32] = [-1, -1]
        try #require(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0)
        return (StreamTransport(fd: fds[0], name: "pair", isSocket: true), fds[1])
    }

    static func write(_ fd: Int32, _ bytes: [UInt8]) {
        let n = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress!, $0.count) }
        #expect(n == bytes.count)
    }

    @Test("packets written by the controller arrive whole, several per read")
    func receivesPackets() throws {
        let (t, peer) = try Self.pair()
        defer { t.close(); Glibc.close(peer) }
        Self.write(peer, hex("04 0e 04 01 03 0c 00 02 01 20 05 00 01 00 04 00 13 04 0e"))
        guard case .packet(let a) = try t.receive(timeoutMs: 1000, wakeFD: -1) else { Issue.record("no packet"); return }
        guard case .packet(let b) = try t.receive(timeoutMs: 1000, wakeFD: -1) else { Issue.record("no packet"); return }
        #expect(a == HCIPacket(.event, hex("0e 04 01 03 0c 00")))
        #expect(b == HCIPacket(.acl, hex("01 20 05 00 01 00 04 00 13")))
        // The partial "04 0e" is held until the rest arrives.
        guard case .timeout = try t.receive(timeoutMs: 0, wakeFD: -1) else { Issue.record("partial packet returned"); return }
        Self.write(peer, hex("04 01 03 0c 00"))
        guard case .packet(let c) = try t.receive(timeoutMs: 1000, wakeFD: -1) else { Issue.record("no packet"); return }
        #expect(c == HCIPacket(.event, hex("0e 04 01 03 0c 00")))
    }

    @Test("send writes the H4 form")
    func sends() throws {
        let (t, peer) = try Self.pair()
        defer { t.close(); Glibc.close(peer) }
        try t.send(HCIPacket(.command, hex("03 0c 00")))
        var buf = [UInt8](repeating: 0, count: 16)
        let n = buf.withUnsafeMutableBytes { Glibc.read(peer, $0.baseAddress!, $0.count) }
        #expect(Array(buf[0..<max(0, n)]) == hex("01 03 0c 00"))
    }

    @Test("the controller closing its end is closedByPeer; sending after close is closedByPeer")
    func peerCloses() throws {
        let (t, peer) = try Self.pair()
        Glibc.close(peer)
        #expect(throws: TransportError.closedByPeer("pair")) { try t.receive(timeoutMs: 1000, wakeFD: -1) }
        t.close()
        #expect(throws: TransportError.closedByPeer("pair")) { try t.send(HCIPacket(.command, hex("03 0c 00"))) }
    }

    @Test("a byte that is no packet indicator is a corrupt stream")
    func corrupt() throws {
        let (t, peer) = try Self.pair()
        defer { t.close(); Glibc.close(peer) }
        Self.write(peer, hex("7e 0e 04"))
        do {
            _ = try t.receive(timeoutMs: 1000, wakeFD: -1)
            Issue.record("no error")
        } catch let TransportError.corruptStream(name, reason) {
            #expect(name == "pair")
            #expect(reason.contains("0x7e"))
        }
    }

    @Test("a readable wake descriptor interrupts the wait")
    func woken() throws {
        let (t, peer) = try Self.pair()
        defer { t.close(); Glibc.close(peer) }
        var p: [Int32] = [-1, -1]
        try #require(pipe(&p) == 0)
        defer { Glibc.close(p[0]); Glibc.close(p[1]) }
        Self.write(p[1], [1])
        guard case .woken = try t.receive(timeoutMs: 1000, wakeFD: p[0]) else { Issue.record("not woken"); return }
    }

    @Test("a wait with nothing to read times out")
    func timesOut() throws {
        let (t, peer) = try Self.pair()
        defer { t.close(); Glibc.close(peer) }
        guard case .timeout = try t.receive(timeoutMs: 5, wakeFD: -1) else { Issue.record("no timeout"); return }
    }
}
