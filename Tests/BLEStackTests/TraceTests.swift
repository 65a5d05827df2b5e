#if canImport(Glibc)
import Glibc
#endif
import Testing
@testable import BLEWire
@testable import BLETransport
@testable import BLEHCI
@testable import BLETrace

/// Real packets from a session (H4 form), as in the virtual-controller notes and PROTOCOL traces.
private let session: [(HCIPacket, Direction)] = [
    (h4("01 03 0c 00"), .sent),
    (h4("04 0e 04 01 03 0c 00"), .received),
    (h4("01 01 0c 08 90 88 00 02 00 80 00 20"), .sent),
    (h4("04 0e 0a 01 09 10 00 55 44 33 22 11 c0"), .received),
    (h4("04 0e 07 01 02 20 00 1b 00 40"), .received),
    (h4("04 0e 0c 01 01 10 00 0c 34 12 0c 5f 00 78 56"), .received),
    (h4("04 0e 0a 01 05 10 00 fd 03 40 08 00"), .received),
    (h4("01 0b 20 07 01 10 00 10 00 01 00"), .sent),
    (h4("01 41 20 08 01 00 01 01 10 00 10 00"), .sent),
    (h4("01 0c 20 02 01 00"), .sent),
    (h4("01 42 20 06 01 00 00 00 00 00"), .sent),
    (h4("01 05 20 06 55 44 33 22 11 c0"), .sent),
    (h4("01 06 04 03 01 00 13"), .sent),
    (h4("01 13 20 0e 01 00 18 00 28 00 00 00 90 01 00 00 00 00"), .sent),
    (h4("01 43 20 1a 00 01 01 55 44 33 22 11 c0 01 10 00 10 00 18 00 28 00 00 00 f4 01 00 00 00 00"), .sent),
    (h4("04 3e 1e 02 02 00 00 55 44 33 22 11 c0 03 02 01 06 c5 04 01 66 55 44 33 22 11 05 04 09 41 42 43 b0"), .received),
    (h4("04 3e 26 0d 01 01 00 01 55 44 33 22 11 c0 01 00 ff 7f c5 00 00 00 00 00 00 00 00 00 0c 0b 09 43 61 73 73 61 72 54 65 63 68"), .received),
    (h4("01 0d 20 19 10 00 10 00 00 01 55 44 33 22 11 c0 01 18 00 28 00 00 00 f4 01 00 00 00 00"), .sent),
    (h4("04 0f 04 00 01 0d 20"), .received),
    (h4("04 3e 13 01 00 01 00 00 01 55 44 33 22 11 c0 18 00 00 00 f4 01 00"), .received),
    (h4("02 01 00 07 00 03 00 04 00 02 05 02"), .sent),
    (h4("02 01 20 07 00 03 00 04 00 03 05 02"), .received),
    (h4("02 01 00 0b 00 07 00 04 00 10 01 00 ff ff 00 28"), .sent),
    (h4("02 01 20 0c 00 08 00 04 00 11 06 01 00 05 00 00 18"), .received),
    (h4("02 01 00 09 00 05 00 04 00 08 01 00 05 00 03 28"), .sent),
    (h4("02 01 20 14 00 10 00 04 00 09 07 02 00 02 03 00 00 2a 04 00 02 05 00 01 2a"), .received),
    (h4("02 01 20 0a 00 06 00 04 00 05 01 04 00 02 29"), .received),
    (h4("02 01 00 08 00 04 00 04 00 12 10 00 ff"), .sent),
    (h4("02 01 20 05 00 01 00 04 00 13"), .received),
    (h4("02 01 20 09 00 05 00 04 00 01 12 10 00 03"), .received),
    (h4("02 01 20 08 00 04 00 04 00 1b 12 00 01"), .received),
    (h4("02 01 20 10 00 0c 00 05 00 12 01 08 00 18 00 28 00 00 00 90 01"), .received),
    (h4("02 01 00 0a 00 06 00 05 00 13 01 02 00 00 00"), .sent),
    (h4("02 01 00 0a 00 06 00 05 00 01 02 02 00 00 00"), .sent),
    (h4("02 01 20 0b 00 07 00 06 00 01 03 00 01 10 07 07"), .received),
    (h4("02 01 00 06 00 02 00 06 00 05 05"), .sent),
    (h4("04 3e 0a 03 00 01 00 28 00 00 00 90 01"), .received),
    (h4("04 3e 0b 07 01 00 fb 00 48 08 1b 00 48 01"), .received),
    (h4("04 13 05 01 01 00 01 00"), .received),
    (h4("04 05 04 00 01 00 16"), .received),
    (h4("04 10 01 07"), .received),
    (h4("04 ff 02 aa bb"), .received),
    (h4("05 01 00 03 00 aa bb cc"), .received),
]

@Suite("btsnoop capture files")
struct BtsnoopTests {
    @Test("the header is the magic, version 1, datalink 1002 (H4)")
    func header() {
        #expect(Btsnoop.header() == hex("62 74 73 6e 6f 6f 70 00  00 00 00 01  00 00 03 ea"))
    }

    @Test("a record: lengths, flags, drops, timestamp since year 0 (epoch offset 0x00DCDDB30F2F8000), then the H4 packet")
    func record() {
        #expect(Btsnoop.record(h4("01 03 0c 00"), direction: .sent, timestampUs: 0)
                == hex("00 00 00 04  00 00 00 04  00 00 00 02  00 00 00 00  00 dc dd b3 0f 2f 80 00  01 03 0c 00"))
        #expect(Btsnoop.record(h4("04 0e 04 01 03 0c 00"), direction: .received, timestampUs: 1_700_000_000_123_456)
                == hex("00 00 00 07  00 00 00 07  00 00 00 03  00 00 00 00  00 e2 e7 d7 27 4f a2 40  04 0e 04 01 03 0c 00"))
    }

    @Test("record flags for each direction and type", arguments: [
        ("01 03 0c 00", Direction.sent, UInt8(2)), ("04 10 01 07", .received, 3),
        ("02 01 00 01 00 1e", .sent, 0), ("02 01 20 01 00 1e", .received, 1),
    ])
    func flags(packet: String, direction: Direction, flags: UInt8) {
        let r = Btsnoop.record(h4(packet), direction: direction, timestampUs: 5)
        #expect(Array(r[8..<12]) == [0, 0, 0, flags])
    }

    @Test("the epoch offset is 1970-01-01 in microseconds since 0000-01-01")
    func epoch() {
        #expect(Btsnoop.epochOffset == 0x00DC_DDB3_0F2F_8000)
    }

    private static func capture(_ packets: [(HCIPacket, Direction)], start: UInt64 = 1_700_000_000_000_000) -> [UInt8] {
        var bytes = Btsnoop.header()
        for (i, (p, d)) in packets.enumerated() { bytes += Btsnoop.record(p, direction: d, timestampUs: start + UInt64(i) * 1250) }
        return bytes
    }

    @Test("parse(write(x)) gives back every packet, direction and timestamp")
    func roundTrip() throws {
        let (records, error) = Btsnoop.parse(Self.capture(session))
        #expect(error == nil)
        try #require(records.count == session.count)
        for (i, r) in records.enumerated() {
            #expect(r.number == i + 1)
            #expect(r.packet == session[i].0)
            #expect(r.direction == session[i].1)
            #expect(r.timestampUs == 1_700_000_000_000_000 + UInt64(i) * 1250)
            #expect(r.drops == 0)
        }
    }

    @Test("a capture cut anywhere inside the last record returns the records before it and an error naming the record number")
    func truncated() {
        let first3 = Array(session.prefix(3))
        let whole = Self.capture(first3)
        let lastStart = Self.capture(Array(session.prefix(2))).count
        for cut in (lastStart + 1)..<whole.count {
            let (records, error) = Btsnoop.parse(Array(whole[0..<cut]))
            #expect(records.count == 2, "cut at \(cut)")
            #expect(records.map(\.packet) == first3.prefix(2).map(\.0))
            #expect(error?.record == 3, "cut at \(cut)")
            #expect(error?.offset == lastStart)
            #expect(error?.description.hasPrefix("record 3 (byte offset \(lastStart)): truncated") == true, "\(String(describing: error))")
        }
        #expect(Btsnoop.parse(Array(whole[0..<lastStart])).error == nil)
    }

    @Test("every prefix of a capture parses without trapping")
    func everyPrefix() {
        let whole = Self.capture(session)
        for n in 0..<whole.count {
            let (records, error) = Btsnoop.parse(Array(whole[0..<n]))
            #expect(records.count <= session.count)
            if n < 16 { #expect(error != nil && records.isEmpty) }
        }
    }

    @Test("header problems: not btsnoop, short header, wrong version, unsupported datalink")
    func headerProblems() {
        #expect(Btsnoop.parse(hex("00 01 02")).error?.message.hasPrefix("not a btsnoop file") == true)
        #expect(Btsnoop.parse(Btsnoop.magic + hex("00 00 00 01")).error?.message == "truncated header (needs 16 bytes)")
        #expect(Btsnoop.parse(Btsnoop.magic + hex("00 00 00 02 00 00 03 ea")).error?.message == "btsnoop version 2, expected 1")
        let dl = Btsnoop.parse(Btsnoop.magic + hex("00 00 00 01 00 00 03 e8"))
        #expect(dl.error?.message.hasPrefix("datalink 1000 is not supported") == true)
        #expect(dl.error?.record == nil)
    }

    @Test("an implausible included length and an empty H4 packet are errors naming the record")
    func recordProblems() {
        let big = Btsnoop.header() + hex("00 00 00 04 00 10 00 00 00 00 00 02 00 00 00 00 00 dc dd b3 0f 2f 80 00")
        #expect(Btsnoop.parse(big).error?.message.hasPrefix("implausible length") == true)
        let empty = Btsnoop.header() + hex("00 00 00 00 00 00 00 00 00 00 00 02 00 00 00 00 00 dc dd b3 0f 2f 80 00")
        #expect(Btsnoop.parse(empty).error?.message == "empty packet")
        #expect(Btsnoop.parse(empty).error?.record == 1)
    }

    @Test("BtsnoopWriter writes a file that parses back to the packets observed")
    func writer() throws {
        var template = Array("/tmp/attled-snoop-XXXXXX".utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        try #require(fd >= 0)
        Glibc.close(fd)
        let path = template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        defer { unlink(path) }
        let w = try BtsnoopWriter(path: path)
        let t0 = Instant.now()
        w.observe(h4("01 03 0c 00"), direction: .sent, at: t0)
        w.observe(h4("04 0e 04 01 03 0c 00"), direction: .received, at: t0.adding(ms: 2))
        w.close()
        w.observe(h4("04 10 01 07"), direction: .received, at: t0.adding(ms: 3)) // after close: dropped
        let rfd = open(path, O_RDONLY)
        try #require(rfd >= 0)
        var buf = [UInt8](repeating: 0, count: 4096)
        let n = buf.withUnsafeMutableBytes { read(rfd, $0.baseAddress!, $0.count) }
        Glibc.close(rfd)
        let bytes = Array(buf[0..<max(0, n)])
        #expect(Array(bytes.prefix(16)) == Btsnoop.header())
        let (records, error) = Btsnoop.parse(bytes)
        #expect(error == nil)
        #expect(records.map(\.packet) == [h4("01 03 0c 00"), h4("04 0e 04 01 03 0c 00")])
        #expect(records.map(\.direction) == [.sent, .received])
        try #require(records.count == 2)
        #expect(records[1].timestampUs - records[0].timestampUs == 2000)
    }

    @Test("datalink 1001 (no indicator) takes the type from the flags")
    func datalinkHCI() {
        var file = Btsnoop.magic + hex("00 00 00 01 00 00 03 e9")
        file += hex("00 00 00 03 00 00 00 03 00 00 00 02 00 00 00 00 00 dc dd b3 0f 2f 80 00 03 0c 00")
        file += hex("00 00 00 06 00 00 00 06 00 00 00 03 00 00 00 00 00 dc dd b3 0f 2f 80 01 0e 04 01 03 0c 00")
        file += hex("00 00 00 05 00 00 00 05 00 00 00 01 00 00 00 00 00 dc dd b3 0f 2f 80 02 01 20 01 00 13")
        let (records, error) = Btsnoop.parse(file)
        #expect(error == nil)
        #expect(records.map(\.packet) == [h4("01 03 0c 00"), h4("04 0e 04 01 03 0c 00"), h4("02 01 20 01 00 13")])
        #expect(records.map(\.direction) == [.sent, .received, .received])
        #expect(records.map(\.timestampUs) == [0, 1, 2])
    }

    @Test("datalink 2001 (btmon monitor) maps opcodes and skips non-HCI records")
    func datalinkMonitor() {
        var file = Btsnoop.magic + hex("00 00 00 01 00 00 07 d1")
        file += hex("00 00 00 03 00 00 00 03 00 00 00 02 00 00 00 00 00 dc dd b3 0f 2f 80 00 03 0c 00")
        file += hex("00 00 00 01 00 00 00 01 00 00 00 0c 00 00 00 00 00 dc dd b3 0f 2f 80 00 41")
        file += hex("00 00 00 06 00 00 00 06 00 00 00 03 00 00 00 00 00 dc dd b3 0f 2f 80 00 0e 04 01 03 0c 00")
        file += hex("00 00 00 05 00 00 00 05 00 00 00 05 00 00 00 00 00 dc dd b3 0f 2f 80 00 01 20 01 00 13")
        let (records, error) = Btsnoop.parse(file)
        #expect(error == nil)
        #expect(records.map(\.number) == [1, 3, 4])
        #expect(records.map(\.packet) == [h4("01 03 0c 00"), h4("04 0e 04 01 03 0c 00"), h4("02 01 20 01 00 13")])
        #expect(records.map(\.direction) == [.sent, .received, .received])
    }
}

@Suite("Packet decoder")
struct PacketDecoderTests {
    private func text(_ d: PacketDecoder.Decoded) -> String { ([d.header] + d.fields).joined(separator: "\n") }

    @Test("an ATT Write Request ACL packet decodes to Write Request (0x12), Handle: 0x0010")
    func writeRequest() {
        let d = PacketDecoder().decode(h4("02 01 00 08 00 04 00 04 00 12 10 00 ff"), .sent)
        #expect(d.header == "< ACL Data: handle 1 flags 0x00 dlen 8")
        #expect(d.layer == .att)
        #expect(d.fields.contains { $0.contains("Write Request (0x12)") })
        #expect(d.fields.contains { $0.contains("Handle: 0x0010") })
        #expect(d.fields.contains { $0.contains("Data: ff") })
        #expect(d.fields.first == "      L2CAP: ATT (cid 0x0004) len 4")
    }

    @Test("commands, events and signalling decode to the expected lines")
    func lines() {
        let dec = PacketDecoder()
        let reset = dec.decode(h4("01 03 0c 00"), .sent)
        #expect(reset.header == "< HCI Command: Reset (0x0c03) plen 0")
        let cc = dec.decode(h4("04 0e 0a 01 09 10 00 55 44 33 22 11 c0"), .received)
        #expect(cc.header == "> HCI Event: Command Complete (0x0e) plen 10")
        #expect(text(cc).contains("Address: C0:11:22:33:44:55"))
        let create = text(dec.decode(h4("01 0d 20 19 10 00 10 00 00 01 55 44 33 22 11 c0 01 18 00 28 00 00 00 f4 01 00 00 00 00"), .sent))
        #expect(create.contains("Peer address: C0:11:22:33:44:55 (random)"))
        #expect(create.contains("Min connection interval: 30.000 msec"))
        #expect(create.contains("Supervision timeout: 5000 msec"))
        let conn = text(dec.decode(h4("04 3e 13 01 00 01 00 00 01 55 44 33 22 11 c0 18 00 00 00 f4 01 00"), .received))
        #expect(conn.contains("LE Connection Complete (0x01)"))
        #expect(conn.contains("Role: Central (0x00)"))
        let adv = dec.decode(h4("04 3e 26 0d 01 01 00 01 55 44 33 22 11 c0 01 00 ff 7f c5 00 00 00 00 00 00 00 00 00 0c 0b 09 43 61 73 73 61 72 54 65 63 68"), .received)
        #expect(adv.layer == .adv)
        #expect(text(adv).contains("Name (complete): CassarTech"))
        #expect(text(adv).contains("RSSI: -59 dBm (0xc5)"))
        let sig = text(dec.decode(h4("02 01 20 10 00 0c 00 05 00 12 01 08 00 18 00 28 00 00 00 90 01"), .received))
        #expect(sig.contains("LE Signalling: Connection Parameter Update Request (0x12) ident 1 len 8"))
        #expect(sig.contains("Timeout multiplier: 400 (4000 msec)"))
        let smp = text(dec.decode(h4("02 01 00 06 00 02 00 06 00 05 05"), .sent))
        #expect(smp.contains("SMP: Pairing Failed (0x05) len 1"))
        #expect(smp.contains("Reason: Pairing Not Supported (0x05)"))
    }

    @Test("a malformed event prints its name, the reason and the bytes, not a crash")
    func malformedEvent() {
        let d = PacketDecoder().decode(h4("04 0f 03 00 01 0d"), .received)
        #expect(d.header == "> HCI Event: Command Status (0x0f) plen 3")
        #expect(d.fields.first?.contains("malformed: truncated: Command_Opcode needs 2 byte(s), 1 left") == true)
        #expect(d.fields.last == "        0f 03 00 01 0d")
    }

    @Test("a malformed ATT PDU prints the reason and hex")
    func malformedATT() {
        let d = PacketDecoder().decode(h4("02 01 20 06 00 02 00 04 00 09 01"), .received)
        #expect(text(d).contains("ATT: Read By Type Response (0x09) len 1"))
        #expect(text(d).contains("malformed:"))
    }

    @Test("fragmented ACL is reassembled per handle and direction before decoding")
    func reassembly() {
        let dec = PacketDecoder()
        let a = dec.decode(h4("02 01 20 04 00 08 00 04 00"), .received)
        #expect(a.fields == ["      L2CAP: start fragment, 4 of 12 bytes"])
        // The same handle in the other direction is independent.
        let other = dec.decode(h4("02 01 10 02 00 aa bb"), .sent)
        #expect(other.fields == ["      L2CAP: continuation without a start fragment (dropped by the stack)"])
        let b = dec.decode(h4("02 01 10 04 00 0b 41 42 43"), .received)
        #expect(b.fields == ["      L2CAP: continuation, 8 of 12 bytes"])
        let c = dec.decode(h4("02 01 10 04 00 44 45 46 47"), .received)
        #expect(c.layer == .att)
        #expect(text(c).contains("Value: 41 42 43 44 45 46 47 \"ABCDEFG\""))
    }

    @Test("every prefix of every real packet decodes without trapping, in both directions")
    func prefixesNeverTrap() {
        let dec = PacketDecoder()
        for (p, _) in session {
            for cut in prefixes(p.bytes) + [p.bytes] {
                for dir in [Direction.sent, .received] {
                    let d = dec.decode(HCIPacket(p.type, cut), dir)
                    #expect(!d.header.isEmpty)
                }
            }
        }
    }

    @Test("every single-byte mutation of every real packet decodes without trapping")
    func mutationsNeverTrap() {
        let dec = PacketDecoder()
        for (p, dir) in session {
            for i in p.bytes.indices {
                for v: UInt8 in [0x00, 0x01, 0x02, 0x05, 0x0d, 0x10, 0x13, 0x29, 0x7f, 0x80, 0xfe, 0xff] {
                    var m = p.bytes
                    m[i] = v
                    _ = dec.decode(HCIPacket(p.type, m), dir)
                }
            }
        }
    }

    @Test("the trace layout: header with number and seconds, fields, optional hex")
    func traceFormat() {
        let p = h4("01 03 0c 00")
        let d = PacketDecoder().decode(p, .sent)
        #expect(Tracer.format(d, packet: p, number: 7, seconds: 1_000_123, hex: false) == "< HCI Command: Reset (0x0c03) plen 0  #7 1.000123")
        #expect(Tracer.format(d, packet: p, number: 7, seconds: 5, hex: true) == "< HCI Command: Reset (0x0c03) plen 0  #7 0.000005\n        | 01 03 0c 00")
    }

    @Test("the tracer observes packets and prints them through its output")
    func tracer() {
        final class Lines: @unchecked Sendable { var all: [String] = [] }
        let lines = Lines()
        let t = Tracer(hex: false) { lines.all.append($0) }
        t.observe(h4("02 01 00 08 00 04 00 04 00 12 10 00 ff"), direction: .sent, at: Instant.now())
        #expect(lines.all.count == 1)
        #expect(lines.all.first?.contains("Write Request (0x12)") == true)
        #expect(lines.all.first?.contains("#1 ") == true)
    }
}
