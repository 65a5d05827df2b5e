// trace: the input is a sequence of packets, each `tag, length, bytes`;
// tag bits 0-2 pick the H4 type (command, ACL, SCO, event, ISO, and two
// unknown ones), bit 3 the direction. PacketDecoder (which keeps L2CAP
// reassembly state across packets) and the --trace formatter must describe
// each without trapping.
import BLEWire
import BLETransport
import BLETrace

func fuzzTrace(_ data: [UInt8]) {
    var input = FuzzInput(data)
    var lines = 0
    let tracer = Tracer(hex: data.first.map { $0 & 0x80 != 0 } ?? false) { s in lines += s.isEmpty ? 0 : 1 }
    let decoder = PacketDecoder()
    var count = 0
    while !input.isAtEnd {
        let tag = input.u8()
        let type: UInt8 = [0x01, 0x02, 0x03, 0x04, 0x05, 0x00, 0xFF, 0x02][Int(tag & 7)]
        let dir: Direction = tag & 0x08 != 0 ? .sent : .received
        let p = packet(type, input.chunk())
        let d = decoder.decode(p, dir)
        require(!d.header.isEmpty && PacketLayer.allCases.contains(d.layer), "decoded packet without a header or layer")
        tracer.observe(p, direction: dir, at: Instant(ns: UInt64(count) * 1_000_000))
        count += 1
    }
    require(lines == count, "the tracer printed \(lines) times for \(count) packets")
}
