import Testing
@testable import BLEWire
@testable import BLEHCI
@testable import BLEGAP
@testable import BLEL2CAP
@testable import AttledJSON
@testable import AttledServe
@testable import AttledCLI

@Suite("serve --conn-interval")
struct ServeOptionTests {
    private func parse(_ line: String) throws -> Options { try Options.parse(line.split(separator: " ").map(String.init)) }

    @Test("MIN-MAX ms in 1.25 ms units, no latency, a supervision timeout of 6 x MAX but at least 4 s", arguments: [
        ("7.5-15", 6, 12, 400), ("30-50", 24, 40, 400), ("45-50", 36, 40, 400), ("1000-4000", 800, 3200, 2400),
    ])
    func interval(_ v: String, _ min: Int, _ max: Int, _ timeout: Int) throws {
        let p = try #require(try parse("serve --profile pycom --conn-interval \(v)").serve.connectionParameters)
        #expect([Int(p.intervalMin), Int(p.intervalMax), Int(p.latency), Int(p.supervisionTimeout)] == [min, max, 0, timeout])
        #expect(p.isValid)
    }

    @Test("outside 7.5-4000 ms, backwards or not a range: a usage error naming the flag", arguments: ["5-10", "50-40", "30", "a-b", "30-5000", "-30", "30-"])
    func refused(_ v: String) {
        #expect(throws: UsageError("--conn-interval: '\(v)' is not an interval range in ms like 30-50 (7.5 to 4000)")) {
            try parse("serve --profile pycom --conn-interval \(v)")
        }
    }

    @Test("the request's answer and the update are printed as lines and as JSON")
    func lines() {
        let peer = DeviceAddress(BDAddress("C0:00:00:00:00:01")!, .random)
        let p = ConnectionParameters(intervalMin: 36, intervalMax: 40, latency: 0, supervisionTimeout: 400)
        #expect(ServeRun.line(.parametersAnswered(peer, p, accepted: true, error: nil))
                == "serve asked C0:00:00:00:00:01 (random) for a connection interval of 45-50 ms: accepted")
        #expect(ServeRun.line(.parametersAnswered(peer, p, accepted: false, error: nil))?.hasSuffix("45-50 ms: rejected") == true)
        #expect(ServeRun.line(.parametersAnswered(peer, p, accepted: false, error: "\(L2CAPError.timeout(ms: 30_000))"))?
            .hasSuffix("45-50 ms: no Connection Parameter Update Response within 30000 ms") == true)
        #expect(ServeRun.ms(6) == "7.5" && ServeRun.ms(25) == "31.25" && ServeRun.ms(40) == "50")
        let fields = ServeRun.jsonFields(.parametersAnswered(peer, p, accepted: true, error: nil), profile: "pycom")
        #expect(JSONValue.object(fields).serialized
                == #"{"event":"parameters","interval_min_ms":45.0,"interval_max_ms":50.0,"accepted":true,"error":null,"peer":"C0:00:00:00:00:01","peer_type":"random"}"#)
    }
}
