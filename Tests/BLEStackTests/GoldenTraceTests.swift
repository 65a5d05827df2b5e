import Testing
@testable import BLEWire
@testable import BLETransport
@testable import BLEHCI
@testable import BLEGAP
@testable import BLEATT
@testable import BLETrace

/// The decoder's output for recorded captures, byte for byte (Tests/BLEStackTests/Golden).
@Suite("Golden decodes")
struct GoldenTraceTests {
    static let dir: String = {
        let f = #filePath
        return String(f[..<f.lastIndex(of: "/")!]) + "/Golden/"
    }()

    static func read(_ name: String) throws -> [UInt8] {
        try #require(SystemIO.readFile(dir + name, limit: 1 << 24), "cannot open \(dir + name)")
    }

    /// The same loop as `attled decode`.
    static func decode(_ bytes: [UInt8]) -> (String, Btsnoop.FileError?) {
        let (records, error) = Btsnoop.parse(bytes)
        let decoder = PacketDecoder()
        let t0 = records.first?.timestampUs ?? 0
        var lines: [String] = []
        for r in records {
            let d = decoder.decode(r.packet, r.direction)
            lines.append(Tracer.format(d, packet: r.packet, number: r.number, seconds: r.timestampUs - t0, hex: false))
        }
        return (lines.map { $0 + "\n" }.joined(), error)
    }

    @Test("decodes match the golden text", arguments: ["pycom-run", "synthetic"])
    func golden(_ name: String) throws {
        let (text, error) = Self.decode(try Self.read(name + ".btsnoop"))
        #expect(error == nil)
        let expected = String(decoding: try Self.read(name + ".txt"), as: UTF8.self)
        let got = text.split(separator: "\n", omittingEmptySubsequences: false)
        let want = expected.split(separator: "\n", omittingEmptySubsequences: false)
        for (i, (g, w)) in zip(got, want).enumerated() where g != w {
            Issue.record("line \(i + 1): got \"\(g)\", expected \"\(w)\"")
            break
        }
        #expect(got.count == want.count)
    }

    @Test("every AD type and every ATT opcode attled knows appears in the golden set")
    func coverage() throws {
        var all = ""
        for n in ["pycom-run", "synthetic"] { all += String(decoding: try Self.read(n + ".txt"), as: UTF8.self) }
        for (code, info) in ATTOpcode.table {
            #expect(all.contains("\(info.name) (0x\(Hex.int(code, width: 2)))"), "ATT opcode \(info.name) missing")
        }
        // AD types: every one attled names appears in the captures' advertising reports.
        var seen = Set<UInt8>()
        for n in ["pycom-run", "synthetic"] {
            for r in Btsnoop.parse(try Self.read(n + ".btsnoop")).records where r.packet.type == .event {
                if case let .leAdvertisingReport(reps, _)? = try? HCIEvent.decode(r.packet.bytes) {
                    for rep in reps { for st in AdvertisingData(rep.data).structures { seen.insert(st.type.rawValue) } }
                }
            }
        }
        for code in ADType.names.keys.sorted() {
            #expect(seen.contains(code), "AD type \(ADType(rawValue: code)) missing from the golden captures")
        }
    }

    @Test("a truncated golden capture fails at the right record with the right message")
    func truncated() throws {
        let bytes = try Self.read("pycom-run.btsnoop")
        // Cut 5 bytes into the header of record 20.
        var off = 16
        for _ in 0..<19 {
            var r = ByteReader(Array(bytes[(off + 4)..<(off + 8)]))
            off += 24 + Int(try r.u32be())
        }
        let (text, error) = Self.decode(Array(bytes[0..<(off + 5)]))
        let e = try #require(error)
        #expect(e.record == 20)
        #expect(e.description.contains("record 20") && e.description.contains("truncated record header"))
        #expect(text.split(separator: "\n").filter { $0.hasPrefix("<") || $0.hasPrefix(">") }.count == 19)
    }
}
