// btsnoop: the input is a capture file. Btsnoop.parse must return records
// or an error (never trap), the tracer must describe every record, and the
// records written back with the stack's own writer must read back the same.
import BLEWire
import BLETransport
import BLETrace

func fuzzBtsnoop(_ data: [UInt8]) {
    let (records, error) = Btsnoop.parse(data)
    if error == nil { require(data.count >= 16, "a file shorter than the header parsed") }
    let decoder = PacketDecoder()
    var last = 0
    for r in records {
        require(r.number > last, "record numbers do not increase")
        last = r.number
        let d = decoder.decode(r.packet, r.direction)
        _ = Tracer.format(d, packet: r.packet, number: r.number, seconds: r.timestampUs, hex: true)
    }
    // Writer and reader agree: what we write of these records reads back as them.
    var file = Btsnoop.header()
    for r in records { file += Btsnoop.record(r.packet, direction: r.direction, timestampUs: r.timestampUs) }
    let (again, err2) = Btsnoop.parse(file)
    require(err2 == nil, "a capture written by BtsnoopWriter's format does not parse: \(err2!)")
    require(again.count == records.count, "record count changed on rewrite")
    for (a, b) in zip(again, records) {
        require(a.packet == b.packet && a.direction == b.direction && a.timestampUs == b.timestampUs, "record changed on rewrite")
    }
}
