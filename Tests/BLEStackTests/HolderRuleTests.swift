import Testing
@testable import AttledGateway

/// Issue 31's rule for who holds a lamp among gateways on one broker.
@Suite("Several gateways: the holder rule")
struct HolderRuleTests {
    let rule = HolderRule()

    /// Every gateway's action, in gateway order.
    func actions(_ reports: [HolderReport], lamp: String = "Lamp1", last: String? = nil) -> [String: HolderAction] {
        var out: [String: HolderAction] = [:]
        for g in Set(reports.map(\.gateway)) { out[g] = rule.action(for: g, lamp: lamp, reports: reports, lastHolder: last) }
        return out
    }

    @Test("the same reports in any order, repeated or not, give every gateway the same answer")
    func orderIndependent() {
        let reports = [
            HolderReport(gateway: "hall", rssi: -70), HolderReport(gateway: "attic", rssi: -62, recentFailures: 1),
            HolderReport(gateway: "cellar", ageMs: 2_000, rssi: -65), HolderReport(gateway: "cellar", ageMs: 9_000, rssi: -40),
            HolderReport(gateway: "garage", rssi: -65),
        ]
        let expected = actions(reports)
        var rng = SystemRandomNumberGenerator()
        for _ in 0..<200 {
            var shuffled = reports.shuffled(using: &rng)
            if Bool.random(using: &rng) { shuffled += [shuffled[Int.random(in: 0..<shuffled.count, using: &rng)]] }
            #expect(actions(shuffled) == expected)
        }
        // cellar's newer report (-65) counts, not its older -40; attic's failure costs 6 dB (-68).
        let order = rule.ranking(lamp: "Lamp1", reports: reports, lastHolder: nil).map(\.gateway)
        #expect(Array(order.prefix(2)).sorted() == ["cellar", "garage"])
        #expect(Array(order.suffix(2)) == ["attic", "hall"])
        #expect(expected[order[0]] == .connect(afterMs: 0))
        #expect(expected[order[1]] == .connect(afterMs: 1_500))
        #expect(expected["hall"] == .connect(afterMs: 4_500))
    }

    @Test("stale reports, offline gateways, a signal below the floor and no free slot are not counted")
    func eligibility() {
        let reports = [
            HolderReport(gateway: "stale", ageMs: 10_001, rssi: -40), HolderReport(gateway: "offline", online: false, rssi: -41),
            HolderReport(gateway: "faint", rssi: -91), HolderReport(gateway: "full", rssi: -42, freeSlots: 0),
            HolderReport(gateway: "ok", ageMs: 10_000, rssi: -80),
        ]
        #expect(rule.ranking(lamp: "L", reports: reports, lastHolder: nil).map(\.gateway) == ["ok"])
        #expect(actions(reports, lamp: "L") == ["stale": .standBy, "offline": .standBy, "faint": .standBy, "full": .standBy,
                                                "ok": .connect(afterMs: 0)])
        #expect(rule.holder(lamp: "L", reports: reports, lastHolder: nil) == nil)
    }

    @Test("hysteresis: the last holder keeps the lamp against noise, not against a much better gateway")
    func hysteresis() {
        for other in -77 ... -63 {  // within 8 dB of -70: the last holder ranks first
            let r = [HolderReport(gateway: "a", rssi: -70), HolderReport(gateway: "b", rssi: other)]
            #expect(rule.ranking(lamp: "L", reports: r, lastHolder: "a").first?.gateway == "a", "b at \(other)")
        }
        let r = [HolderReport(gateway: "a", rssi: -70), HolderReport(gateway: "b", rssi: -61)]
        #expect(rule.ranking(lamp: "L", reports: r, lastHolder: "a").first?.gateway == "b")
        #expect(rule.ranking(lamp: "L", reports: r, lastHolder: nil).first?.gateway == "b")
    }

    @Test("a live holder keeps its link whatever the others hear; a full holder still holds")
    func holderKept() {
        let r = [HolderReport(gateway: "far", rssi: -88, holding: true, freeSlots: 0), HolderReport(gateway: "near", rssi: -40)]
        #expect(actions(r) == ["far": .keep, "near": .standBy])
        // Its status gone (Last Will) or its report stale: the lamp is free again.
        var gone = r
        gone[0].online = false
        #expect(actions(gone) == ["far": .standBy, "near": .connect(afterMs: 0)])
        gone[0].online = true
        gone[0].ageMs = 20_000
        #expect(actions(gone)["near"] == .connect(afterMs: 0))
    }

    @Test("two holders after a partition heals: the better one keeps, the other releases")
    func twoHolders() {
        let r = [HolderReport(gateway: "a", rssi: -60, holding: true), HolderReport(gateway: "b", rssi: -75, holding: true),
                 HolderReport(gateway: "c", rssi: -50)]
        #expect(actions(r) == ["a": .keep, "b": .release, "c": .standBy])
        #expect(actions(r, last: "b") == ["a": .keep, "b": .release, "c": .standBy])  // 8 dB does not cover 15
        let close = [HolderReport(gateway: "a", rssi: -60, holding: true), HolderReport(gateway: "b", rssi: -65, holding: true)]
        #expect(actions(close, last: "b") == ["a": .release, "b": .keep])
    }

    @Test("equal gateways: ties broken the same way everywhere, and the lamps spread over the gateways")
    func rendezvousSpread() {
        let gateways = ["hall", "attic", "cellar"]
        var count: [String: Int] = [:]
        for i in 0..<300 {
            let lamp = "Lamp\(i)"
            let reports = gateways.map { HolderReport(gateway: $0, rssi: -70) }
            let first = rule.ranking(lamp: lamp, reports: reports, lastHolder: nil)[0].gateway
            #expect(rule.ranking(lamp: lamp, reports: reports.reversed(), lastHolder: nil)[0].gateway == first)
            count[first, default: 0] += 1
        }
        for g in gateways { #expect((70...130).contains(count[g] ?? 0), "\(g): \(count)") }
        // Removing one gateway moves only its own lamps (rendezvous hashing).
        var moved = 0
        for i in 0..<300 {
            let lamp = "Lamp\(i)"
            let all = rule.ranking(lamp: lamp, reports: gateways.map { HolderReport(gateway: $0, rssi: -70) }, lastHolder: nil)[0].gateway
            let two = rule.ranking(lamp: lamp, reports: ["hall", "attic"].map { HolderReport(gateway: $0, rssi: -70) }, lastHolder: nil)[0].gateway
            if all != "cellar" { #expect(two == all) } else { moved += 1 }
        }
        #expect(moved == count["cellar"])
    }

    @Test("the rendezvous hash is a fixed function: the same number on every gateway and every build")
    func rendezvousFixed() {
        // Pinned to values computed apart (Python, FNV-1a 64 then SplitMix64's finaliser),
        // so a change of the function, which would move lamps between gateways of
        // different versions, is seen.
        #expect(HolderRule.rendezvous("a", "b") == 0xEB38_C838_C62D_597E)
        #expect(HolderRule.rendezvous("hall", "Lamp1") == 0x13E1_304D_D68F_E8FA)
        // The zero byte between the ids: "hall"+"L..." is not "hallL"+"...".
        #expect(HolderRule.rendezvous("hall", "Lamp1") != HolderRule.rendezvous("hallL", "amp1"))
    }
}
