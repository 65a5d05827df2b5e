// Parser throughput micro-benchmark for `make bench`: advertising reports and
// ATT PDUs decoded per second on one core, with the stack's own parsers.
import BLEWire
import BLEHCI
import BLEGAP
import BLEATT

/// A real LE Extended Advertising Report (CassarTech, pycom) from a run.
let extReport = Hex.parse("3e 38 0d 01 01 00 01 55 44 33 22 11 c0 01 01 00 00 ce 00 00 00 00 00 00 00 00 00 1e 0b 09 43 61 73 73 61 72 54 65 63 68 11 07 31 32 33 34 35 36 37 38 39 30 31 32 33 34 35 36")!
/// A legacy LE Advertising Report with flags, name and a 128-bit UUID list.
let legacyReport = Hex.parse("3e 2a 02 01 00 01 55 44 33 22 11 c0 1e 02 01 06 08 09 48 61 72 6e 65 73 73 11 07 14 12 8a 76 04 d1 6c 4f 7e 53 f2 e8 10 00 b1 19 ce")!
/// ATT Read By Type Response with three 128-bit characteristic declarations.
let attPDU = Hex.parse("09 15 0f 00 0a 10 00 61 62 33 34 35 36 37 38 39 30 31 32 33 34 35 36 11 00 0a 12 00 62 62 33 34 35 36 37 38 39 30 31 32 33 34 35 36 13 00 0a 14 00 63 62 33 34 35 36 37 38 39 30 31 32 33 34 35 36")!

func measure(_ name: String, iterations: Int, _ body: () -> Int) {
    var sink = 0
    for _ in 0..<1000 { sink &+= body() } // warm up
    let t0 = Instant.now()
    for _ in 0..<iterations { sink &+= body() }
    let us = Instant.now().usSince(t0)
    let perSecond = us == 0 ? 0 : UInt64(iterations) * 1_000_000 / us
    print("\(name): \(perSecond) per second (\(iterations) in \(formatMs(us: us)) ms, check \(sink & 0xFF))")
}

let n = CommandLine.arguments.count > 1 ? Int(CommandLine.arguments[1]) ?? 1_000_000 : 1_000_000

// Event decode plus full AD parse: what the scanner does per report.
measure("extended advertising reports (event + AD parse)", iterations: n) {
    guard case let .leAdvertisingReport(reports, _)? = try? HCIEvent.decode(extReport) else { return 0 }
    return AdvertisingData(reports[0].data).structures.count
}
measure("legacy advertising reports (event + AD parse)", iterations: n) {
    guard case let .leAdvertisingReport(reports, _)? = try? HCIEvent.decode(legacyReport) else { return 0 }
    return AdvertisingData(reports[0].data).structures.count
}
measure("ATT Read By Type Response decode", iterations: n) {
    guard let r = try? ATT.decode(attPDU) as? ATT.ReadByTypeResponse else { return 0 }
    return r.values.count
}
