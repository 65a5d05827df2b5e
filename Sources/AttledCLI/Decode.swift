import Attled
import BLEWire
import BLETransport
import BLETrace

/// `attled decode FILE`: prints a btsnoop capture with the --trace decoder.
func runDecode(_ opts: Options) -> Int32 {
    let path = opts.files[0]
    let limit = 512 * 1024 * 1024
    let bytes: [UInt8]
    if path == "-" {
        bytes = SystemIO.readAll(0, limit: limit)
    } else {
        do { bytes = try SystemIO.contents(of: path, limit: limit) } catch {
            Console.err("attled: error: cannot open \(path): \(errnoName(error.code))")
            return ExitCode.unavailable.rawValue
        }
    }
    let (records, error) = Btsnoop.parse(bytes)
    let decoder = PacketDecoder()
    let t0 = records.first?.timestampUs ?? 0
    for rec in records {
        let d = decoder.decode(rec.packet, rec.direction)
        if let f = opts.filter {
            // --filter l2cap also shows ATT, which rides on L2CAP.
            let shown = f == .l2cap ? (d.layer == .l2cap || d.layer == .att) : d.layer == f
            if !shown { continue }
        }
        Console.out(Tracer.format(d, packet: rec.packet, number: rec.number, seconds: rec.timestampUs >= t0 ? rec.timestampUs - t0 : 0, hex: opts.trace == .hex))
    }
    if let e = error {
        Console.err("attled: error: \(path): \(e)")
        return ExitCode.dataError.rawValue
    }
    return 0
}
