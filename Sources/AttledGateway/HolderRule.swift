// Issue 31, first piece: who holds a lamp when several gateways share it.
//
// MQTT has no compare-and-set and no lease, so nothing is locked: every
// gateway runs this rule on the same retained inputs (each gateway's status
// and its report of what it hears of the lamp, and the lamp's owner record)
// and reaches the same answer whatever order they arrived in. The lamp itself
// keeps it safe: it takes one connection and stops advertising while it has
// one, so a second gateway cannot connect while a holder's link is up.

/// What one gateway has published about one lamp, as every gateway reads it.
public struct HolderReport: Hashable, Sendable {
    /// The gateway's id (`--gateway-id`).
    public var gateway: String
    /// Its status is online (not its Last Will) and its heartbeat is fresh.
    public var online: Bool
    /// How old its report of the lamp is, in milliseconds, by the reader's clock.
    public var ageMs: UInt64
    /// Its smoothed RSSI of the lamp, in dBm.
    public var rssi: Int
    /// Its connect attempts to the lamp that failed recently.
    public var recentFailures: Int
    /// It has a link to the lamp now.
    public var holding: Bool
    /// Its free connection slots.
    public var freeSlots: Int

    public init(gateway: String, online: Bool = true, ageMs: UInt64 = 0, rssi: Int, recentFailures: Int = 0,
                holding: Bool = false, freeSlots: Int = 1) {
        self.gateway = gateway
        self.online = online
        self.ageMs = ageMs
        self.rssi = rssi
        self.recentFailures = recentFailures
        self.holding = holding
        self.freeSlots = freeSlots
    }
}

/// What the rule tells one gateway to do about one lamp.
public enum HolderAction: Equatable, Sendable {
    /// Keep the link: this gateway is the lamp's holder.
    case keep
    /// Connect now, or after `afterMs` when gateways ranked above it have not.
    case connect(afterMs: UInt64)
    /// Another gateway holds it, or ranks so that this one never tries.
    case standBy
    /// Drop the link: two gateways hold the lamp (a healed partition) and this
    /// one is not the one the rule keeps.
    case release
}

/// The rule: eligible gateways ranked by RSSI, less a penalty per recent
/// failure, plus a hysteresis for the lamp's last holder; ties broken by a
/// rendezvous hash of gateway and lamp, so equal gateways share the lamps
/// evenly and every gateway breaks the same tie the same way.
public struct HolderRule: Sendable {
    /// Reports older than this are not counted (their gateway is gone or deaf).
    public var maxReportAgeMs: UInt64 = 10_000
    /// A gateway hearing the lamp below this does not hold it.
    public var rssiFloor = -90
    /// Added to the last holder's score: noise of a few dB moves no lamp.
    public var hysteresisDb = 8
    /// Taken off a gateway's score per recent failed connect.
    public var failurePenaltyDb = 6
    /// The wait per rank before a gateway below the first connects anyway.
    public var rankDelayMs: UInt64 = 1_500

    public init() {}

    /// The gateways that may connect to `lamp` when no one holds it, best first:
    /// online, a fresh report, the lamp heard above the floor, a free slot.
    public func ranking(lamp: String, reports: [HolderReport], lastHolder: String?) -> [HolderReport] {
        ordered(latest(reports).filter { live($0) && $0.rssi >= rssiFloor && $0.freeSlots > 0 }, lamp, lastHolder)
    }

    /// The gateway that holds `lamp` now: among the live ones with a link, the
    /// best ranked (one in practice; two only while a partition heals). Its
    /// signal and slots do not matter: a healthy link is not taken away.
    public func holder(lamp: String, reports: [HolderReport], lastHolder: String?) -> String? {
        ordered(latest(reports).filter { live($0) && $0.holding }, lamp, lastHolder).first?.gateway
    }

    /// What `gateway` does about `lamp`.
    public func action(for gateway: String, lamp: String, reports: [HolderReport], lastHolder: String?) -> HolderAction {
        if let holder = holder(lamp: lamp, reports: reports, lastHolder: lastHolder) {
            if holder == gateway { return .keep }
            return latest(reports).contains { $0.gateway == gateway && $0.holding } ? .release : .standBy
        }
        let ranked = ranking(lamp: lamp, reports: reports, lastHolder: lastHolder)
        guard let rank = ranked.firstIndex(where: { $0.gateway == gateway }) else { return .standBy }
        return .connect(afterMs: UInt64(rank) * rankDelayMs)
    }

    func live(_ r: HolderReport) -> Bool { r.online && r.ageMs <= maxReportAgeMs }

    /// Best first: score, then the rendezvous hash, then the id (equal hashes).
    func ordered(_ reports: [HolderReport], _ lamp: String, _ lastHolder: String?) -> [HolderReport] {
        reports.sorted { a, b in
            let sa = score(a, lastHolder), sb = score(b, lastHolder)
            if sa != sb { return sa > sb }
            let ha = Self.rendezvous(a.gateway, lamp), hb = Self.rendezvous(b.gateway, lamp)
            if ha != hb { return ha > hb }
            return a.gateway < b.gateway
        }
    }

    func score(_ r: HolderReport, _ lastHolder: String?) -> Int {
        r.rssi - failurePenaltyDb * max(0, r.recentFailures) + (r.gateway == lastHolder ? hysteresisDb : 0)
    }

    /// One report per gateway, the newest, so a repeated or reordered delivery
    /// changes nothing.
    func latest(_ reports: [HolderReport]) -> [HolderReport] {
        var newest: [String: HolderReport] = [:]
        for r in reports {
            if let seen = newest[r.gateway], !Self.newer(r, than: seen) { continue }
            newest[r.gateway] = r
        }
        return Array(newest.values)
    }

    /// Younger wins; between equally old reports, a fixed order of their
    /// fields, so the choice does not depend on which came first.
    static func newer(_ a: HolderReport, than b: HolderReport) -> Bool {
        if a.ageMs != b.ageMs { return a.ageMs < b.ageMs }
        return (a.rssi, a.recentFailures, a.freeSlots, a.holding ? 1 : 0, a.online ? 1 : 0)
            > (b.rssi, b.recentFailures, b.freeSlots, b.holding ? 1 : 0, b.online ? 1 : 0)
    }

    /// Rendezvous (highest random weight) hashing: FNV-1a over the gateway id,
    /// a zero byte and the lamp id, then SplitMix64's finaliser to spread it.
    /// Not for secrecy: every gateway must compute the same number.
    static func rendezvous(_ gateway: String, _ lamp: String) -> UInt64 {
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        for b in Array(gateway.utf8) + [0] + Array(lamp.utf8) {
            h ^= UInt64(b)
            h = h &* 0x0000_0100_0000_01b3
        }
        h = (h ^ (h >> 30)) &* 0xbf58_476d_1ce4_e5b9
        h = (h ^ (h >> 27)) &* 0x94d0_49bb_1331_11eb
        return h ^ (h >> 31)
    }
}
