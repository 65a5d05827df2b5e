// Issue 31: several gateways on one broker share the lamps.
//
// What each gateway publishes (retained) and reads back from the others, and
// the decisions it draws from them, with no I/O: the gateway feeds messages
// and its own observations in, and asks what to do. The broker is the only
// thing the gateways share; the rule (HolderRule) is computed by each of
// them on the same inputs.
//
//   <prefix>/<gateway>/availability  "online", or "offline" (its Last Will)
//   <prefix>/<gateway>/heard         every `heartbeatMs` and on a change, with
//                                    an MQTT 5 message expiry of 3 heartbeats:
//                                    {"beat":N,"slots":F,"lamps":{"<node>":
//                                    {"rssi":-61,"fail":0,"hold":true,"name":..}}}
//   <prefix>/<node>/holder           the holder's record (a fact, not a lock):
//                                    {"holder":"<gateway>"}; Home Assistant's
//                                    attributes of the lamp's entities
//   <prefix>/<node>/applied          the last command the holder carried out:
//                                    {"digest":"<16 hex>"}
//   <prefix>/<node>/availability     the lamp's: from its holder; a survivor
//                                    says "offline" for a dead holder's lamps

import Attled
import AttledJSON

/// What one gateway says it hears of one lamp.
public struct LampHearing: Equatable, Sendable {
    /// Smoothed RSSI of its advertisements, dBm.
    public var rssi: Int
    /// Its connect attempts that failed in the last `SharePolicy.failureWindowMs`.
    public var failures: Int
    /// It has a link to the lamp.
    public var holding: Bool
    /// The lamp's advertised name, when known.
    public var name: String?

    public init(rssi: Int, failures: Int = 0, holding: Bool = false, name: String? = nil) {
        self.rssi = rssi
        self.failures = failures
        self.holding = holding
        self.name = name
    }
}

/// One gateway's `heard` message.
public struct GatewayHearing: Equatable, Sendable {
    /// Counts up with every message (a restarted gateway starts again at 1).
    public var beat: Int
    /// Its free connection slots.
    public var slots: Int
    /// By lamp node id.
    public var lamps: [String: LampHearing]

    public init(beat: Int, slots: Int, lamps: [String: LampHearing]) {
        self.beat = beat
        self.slots = slots
        self.lamps = lamps
    }

    /// The message's JSON, lamps in node order (the same state gives the same bytes).
    public var json: JSONValue {
        var members: [(String, JSONValue)] = []
        for (node, l) in lamps.sorted(by: { $0.key < $1.key }) {
            var m: [(String, JSONValue)] = [("rssi", .int(Int64(l.rssi))), ("fail", .int(Int64(l.failures))), ("hold", .bool(l.holding))]
            if let n = l.name { m.append(("name", .string(n))) }
            members.append((node, .object(m)))
        }
        return ["beat": .int(Int64(beat)), "slots": .int(Int64(slots)), "lamps": .object(members)]
    }

    /// Reads a `heard` message; nil for anything else (another version, garbage).
    public static func parse(_ payload: [UInt8]) -> GatewayHearing? {
        guard payload.count <= 65_536, let v = try? JSONValue.parse(payload, maxDepth: 8),
              let beat = v["beat"]?.integerValue, let slots = v["slots"]?.integerValue,
              let lamps = v["lamps"]?.objectValue else { return nil }
        var out: [String: LampHearing] = [:]
        for (node, l) in lamps {
            guard let rssi = l["rssi"]?.integerValue, (-127...20).contains(rssi) else { continue }
            let fail = l["fail"]?.integerValue ?? 0
            out[node] = LampHearing(rssi: Int(rssi), failures: Int(max(0, min(fail, 1000))), holding: l["hold"]?.boolValue ?? false,
                                    name: l["name"]?.stringValue)
        }
        return GatewayHearing(beat: Int(clamping: beat), slots: Int(max(0, min(slots, 1000))), lamps: out)
    }
}

/// How a gateway shares: the rule and its timings.
public struct SharePolicy: Sendable {
    public var rule = HolderRule()
    /// How often a gateway says what it hears (and that it is alive).
    public var heartbeatMs = 2_000
    /// A gateway away from the broker this long drops its links (self-fencing):
    /// the others cannot see it, so it must not hold what they may take.
    public var fenceAfterMs = 4_000
    /// A holder whose last report is older than the lamp's advertising by this
    /// much is taken as gone (the lamp advertises only without a link); longer
    /// than a heartbeat, so a live holder's reports always contradict it.
    public var advertisingOverrideMs = 2_500
    /// A lamp not heard for this long is left out of the gateway's report.
    public var heardWindowMs = 6_000
    /// Failed connects older than this are forgotten.
    public var failureWindowMs = 60_000
    /// Nobody connects to a lamp until it has had no holder this long: the
    /// reports of the gateways that hear it now (a lamp carried into another
    /// room, heard there only once its old link ended) reach everyone first.
    public var gatherMs: UInt64 = 500

    public init() {
        // Three missed heartbeats and a gateway's report no longer counts.
        rule.maxReportAgeMs = 6_000
    }

    /// The message expiry of a `heard` message, seconds: three heartbeats.
    public var heardExpirySeconds: UInt32 { UInt32(max(1, (3 * heartbeatMs + 999) / 1000)) }
}

/// What one gateway knows of the others and of the lamps, from the retained
/// messages and its own radio; and what it should do. Times are the
/// caller's `Instant`s, so tests run it on a clock of their own.
public final class SharedView {
    /// This gateway's id.
    public let me: String
    public var policy: SharePolicy

    struct Peer {
        var hearing: GatewayHearing
        var receivedAt: Instant
    }

    /// The others' last `heard` messages (not this gateway's own).
    var peers: [String: Peer] = [:]
    /// `<prefix>/<id>/availability` as last read (gateways and lamps share the level).
    public private(set) var availability: [String: String] = [:]
    /// Each lamp's holder record: the gateway that last held it.
    public private(set) var holderRecord: [String: String] = [:]
    /// When this gateway last heard each lamp advertise.
    var lastAdvertised: [String: Instant] = [:]
    /// Since when each lamp has had no live holder (for the rank delays).
    var unheldSince: [String: Instant] = [:]

    public init(me: String, policy: SharePolicy = SharePolicy()) {
        self.me = me
        self.policy = policy
    }

    // MARK: inputs

    /// A `heard` message of `gateway` (this gateway's own is ignored: it knows better).
    public func heard(_ gateway: String, _ h: GatewayHearing?, at now: Instant) {
        guard gateway != me else { return }
        if let h { peers[gateway] = Peer(hearing: h, receivedAt: now) } else { peers[gateway] = nil }
    }

    /// An availability message (a gateway's or a lamp's).
    public func availability(_ id: String, _ value: String?) { availability[id] = value }

    /// A message on `<prefix>/<id>/<leaf>`, one of the shared topics, read
    /// into the view (heard, availability, holder record); returned so the
    /// gateway can act on it too. nil: not a shared topic.
    public enum Message: Equatable {
        case heard(gateway: String)
        case availability(id: String, value: String?)
        case holder(node: String)
        case applied(node: String, digest: String?)
    }

    /// Reads one message of the shared topics under `prefix` (the topic prefix).
    public func take(topic: String, payload: [UInt8], prefix: String, at now: Instant) -> Message? {
        let head = prefix + "/"
        guard topic.hasPrefix(head) else { return nil }
        let rest = topic.dropFirst(head.count).split(separator: "/", omittingEmptySubsequences: false)
        guard rest.count == 2 else { return nil }
        let id = String(rest[0])
        switch rest[1] {
        case "heard":
            heard(id, payload.isEmpty ? nil : GatewayHearing.parse(payload), at: now)
            return .heard(gateway: id)
        case "availability":
            let value = payload.isEmpty ? nil : String(decoding: payload, as: UTF8.self)
            availability(id, value)
            return .availability(id: id, value: value)
        case "holder":
            holderRecord(id, (try? JSONValue.parse(payload, maxDepth: 4))?["holder"]?.stringValue)
            return .holder(node: id)
        case "applied":
            return .applied(node: id, digest: (try? JSONValue.parse(payload, maxDepth: 4))?["digest"]?.stringValue)
        default:
            return nil
        }
    }

    /// A holder record; nil or empty: none.
    public func holderRecord(_ node: String, _ gateway: String?) {
        holderRecord[node] = gateway.flatMap { $0.isEmpty ? nil : $0 }
    }

    /// This gateway heard `node` advertise.
    public func advertised(_ node: String, at now: Instant) { lastAdvertised[node] = now }

    // MARK: the rule's inputs

    /// A gateway is online while its availability says so (a gateway never
    /// heard of is not).
    public func online(_ gateway: String) -> Bool { availability[gateway] == "online" }

    /// The gateways this one has heard from, with how old their last report is.
    public func peerAges(at now: Instant) -> [(gateway: String, ageMs: UInt64, hearing: GatewayHearing)] {
        peers.map { ($0.key, UInt64(max(0, now.msSince($0.value.receivedAt))), $0.value.hearing) }.sorted { $0.gateway < $1.gateway }
    }

    /// Every gateway's report of `node`: the peers' as received (a holder's
    /// "holding" dropped when the lamp has advertised well after it: it has no
    /// link, whatever the holder last said), and this gateway's own.
    public func reports(_ node: String, own: LampHearing?, ownSlots: Int, at now: Instant) -> [HolderReport] {
        var out: [HolderReport] = []
        for (g, p) in peers {
            guard let l = p.hearing.lamps[node] else { continue }
            var holding = l.holding
            if holding, let adv = lastAdvertised[node], adv.msSince(p.receivedAt) > policy.advertisingOverrideMs { holding = false }
            out.append(HolderReport(gateway: g, online: online(g), ageMs: UInt64(max(0, now.msSince(p.receivedAt))), rssi: l.rssi,
                                    recentFailures: l.failures, holding: holding, freeSlots: p.hearing.slots))
        }
        if let own {
            out.append(HolderReport(gateway: me, online: true, ageMs: 0, rssi: own.rssi, recentFailures: own.failures,
                                    holding: own.holding, freeSlots: ownSlots))
        }
        return out
    }

    // MARK: decisions

    /// What this gateway does about `node` now. A `.connect(afterMs:)` whose
    /// delay, plus `gatherMs`, has not passed since the lamp lost its holder
    /// is `.standBy` for now.
    public func action(_ node: String, own: LampHearing?, ownSlots: Int, at now: Instant) -> HolderAction {
        let rs = reports(node, own: own, ownSlots: ownSlots, at: now)
        let a = policy.rule.action(for: me, lamp: node, reports: rs, lastHolder: holderRecord[node])
        if policy.rule.holder(lamp: node, reports: rs, lastHolder: holderRecord[node]) != nil {
            unheldSince[node] = nil
        } else if unheldSince[node] == nil {
            unheldSince[node] = now
        }
        if case let .connect(afterMs) = a {
            let since = unheldSince[node] ?? now
            return UInt64(max(0, now.msSince(since))) >= afterMs + policy.gatherMs ? .connect(afterMs: 0) : .standBy
        }
        return a
    }

    /// Whether this gateway serves `node` on demand: no gateway holds it, none
    /// has a free slot for it, and this one ranks first when slots are left
    /// out. One gateway in the whole house then connects it for each command
    /// (the keeper's on-demand links), as a lone gateway does beyond its slots.
    public func onDemandTurn(_ node: String, own: LampHearing?, ownSlots: Int, at now: Instant) -> Bool {
        // With a free slot of its own, the rule's ranking decides, not this.
        guard let own, !own.holding, ownSlots <= 0 else { return false }
        let withSlots = reports(node, own: own, ownSlots: ownSlots, at: now)
        let rule = policy.rule, last = holderRecord[node]
        guard rule.holder(lamp: node, reports: withSlots, lastHolder: last) == nil,
              rule.ranking(lamp: node, reports: withSlots, lastHolder: last).isEmpty else { return false }
        // Gathered first, as for a connect.
        guard let since = unheldSince[node], UInt64(max(0, now.msSince(since))) >= policy.gatherMs else { return false }
        let slotBlind = withSlots.map { r -> HolderReport in var r = r; r.freeSlots = 1; return r }
        return rule.ranking(lamp: node, reports: slotBlind, lastHolder: last).first?.gateway == me
    }

    /// Whether another gateway holds `node`, or is eligible to connect to it.
    public func othersMayTake(_ node: String, at now: Instant) -> Bool {
        let rs = reports(node, own: nil, ownSlots: 0, at: now)
        let last = holderRecord[node]
        return policy.rule.holder(lamp: node, reports: rs, lastHolder: last) != nil
            || !policy.rule.ranking(lamp: node, reports: rs, lastHolder: last).isEmpty
    }

    /// The live holder of `node` by the rule (this gateway included).
    public func holder(_ node: String, own: LampHearing?, ownSlots: Int, at now: Instant) -> String? {
        policy.rule.holder(lamp: node, reports: reports(node, own: own, ownSlots: ownSlots, at: now), lastHolder: holderRecord[node])
    }

    /// The lamps whose recorded holder is another gateway that is no longer
    /// live (offline, or its reports stale) and which no live gateway holds,
    /// while their availability still says "online": someone must say
    /// "offline" for them, since their holder cannot.
    public func orphans(ownHolding: Set<String>, at now: Instant) -> [String] {
        var out: [String] = []
        for (node, g) in holderRecord where g != me && !ownHolding.contains(node) && availability[node] == "online" {
            let alive = online(g) && (peers[g].map { UInt64(max(0, now.msSince($0.receivedAt))) <= policy.rule.maxReportAgeMs } ?? false)
            if alive { continue }
            if holder(node, own: nil, ownSlots: 0, at: now) != nil { continue }
            out.append(node)
        }
        return out.sorted()
    }

    /// Every lamp any gateway (this one included, through `ownLamps`) reports.
    public func lampNodes(ownLamps: some Sequence<String>) -> [String] {
        var s = Set(ownLamps)
        for p in peers.values { s.formUnion(p.hearing.lamps.keys) }
        return s.sorted()
    }

    /// Whether another gateway has reported within `ms`: one that is alone on
    /// its broker has nobody to hand its lamps to, and does not fence itself.
    public func othersSeen(withinMs ms: Int, at now: Instant) -> Bool {
        peers.values.contains { now.msSince($0.receivedAt) <= ms }
    }

    /// A name for `node` from any report.
    public func name(of node: String) -> String? {
        for p in peers.values { if let n = p.hearing.lamps[node]?.name { return n } }
        return nil
    }
}

/// A command's digest: which command a holder says it carried out (FNV-1a
/// 64 over the payload, as 16 hex digits). Not for secrecy: the gateways
/// only compare them.
public func commandDigest(_ payload: [UInt8]) -> String {
    var h: UInt64 = 0xcbf2_9ce4_8422_2325
    for b in payload {
        h ^= UInt64(b)
        h = h &* 0x0000_0100_0000_01b3
    }
    let hex = String(h, radix: 16)
    return String(repeating: "0", count: 16 - hex.count) + hex
}
