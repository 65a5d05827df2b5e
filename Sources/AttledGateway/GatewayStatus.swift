import Attled
import MQTT
import AttledHomeAssistant

/// `attled gateway --status`: who holds which lamp and why, read from the
/// broker's retained messages (the gateways' availability and reports, the
/// holder records), judged by the same rule the gateways run. Needs no
/// controller.
public enum GatewayStatus {
    /// Connects, reads the retained state for `listenMs` after the
    /// subscription, and returns it as a view of a gateway that holds nothing.
    /// - Throws: `GatewayError.broker` when the broker cannot be reached or
    ///   refuses within `timeoutMs`.
    public static func read(_ config: GatewayConfig, loop: EventLoop, listenMs: Int = 1_200, timeoutMs: Int = 5_000) throws -> SharedView {
        let topics = try config.topics()
        let view = SharedView(me: "", policy: config.sharing)
        var o = MQTTOptions(host: config.brokerHost, port: config.brokerPort, clientID: "attled-status-\(SystemIO.processID)",
                            username: config.username, password: try config.brokerPassword(), tlsCAFile: config.tlsCAFile, keepalive: 10)
        o.version = .v5
        let c: MQTTClient
        do { c = try MQTTClient(o) } catch { throw GatewayError.broker("\(error)") }
        c.attach(to: loop)
        defer { c.detach() }
        var refused: String?
        var subscribedAt: Instant?
        c.onConnect = { ack in
            guard ack.isAccepted else { refused = "the broker refused the connection: \(ack)"; return }
            for leaf in ["heard", "availability", "holder"] { _ = try? c.subscribe(topic: "\(topics.topicPrefix)/+/\(leaf)", qos: .atLeastOnce) }
            subscribedAt = Instant.now()
        }
        c.onDisconnect = { code in if refused == nil, subscribedAt == nil { refused = "the connection to the broker failed: \(code)" } }
        c.onMessage = { topic, payload, _ in
            _ = view.take(topic: topic, payload: payload, prefix: topics.topicPrefix, at: Instant.now())
        }
        do { try c.connect() } catch { throw GatewayError.broker("\(error)") }
        let deadline = Instant.now().adding(ms: timeoutMs)
        _ = try? loop.run(until: deadline, interruptible: true) {
            if refused != nil { return true }
            guard let t = subscribedAt else { return false }
            return Instant.now().msSince(t) >= listenMs
        }
        if let r = refused { throw GatewayError.broker(r) }
        guard subscribedAt != nil else {
            throw GatewayError.broker("no answer from \(config.brokerHost):\(config.brokerPort) within \(timeoutMs) ms: is the broker running?")
        }
        try? c.disconnect()
        _ = try? loop.run(until: Instant.now().adding(ms: 300), interruptible: false) { c.socket < 0 }
        return view
    }

    /// The report: every gateway (online, its last report's age, free slots),
    /// then every lamp: its holder, or who takes it next and why not the others.
    public static func text(_ view: SharedView, at now: Instant = Instant.now()) -> String {
        let rule = view.policy.rule
        var out: [String] = []
        let peers = view.peerAges(at: now)
        out.append("gateways (\(peers.count)):")
        if peers.isEmpty { out.append("  none has reported (no gateway on this broker and topic prefix, or all gone quiet)") }
        for p in peers {
            let state = view.online(p.gateway) ? "online" : (view.availability[p.gateway] == "offline" ? "offline" : "unknown")
            let stale = p.ageMs > rule.maxReportAgeMs ? ", stale: not counted" : ""
            out.append("  \(p.gateway): \(state), report \(formatSeconds(p.ageMs)) old (beat \(p.hearing.beat))\(stale), \(p.hearing.slots) free slot(s), hears \(p.hearing.lamps.count) lamp(s)")
        }
        let nodes = view.lampNodes(ownLamps: [String]())
        out.append("lamps (\(nodes.count)):")
        for node in nodes {
            let label = view.name(of: node).map { "\($0) (\(node))" } ?? node
            let reports = view.reports(node, own: nil, ownSlots: 0, at: now)
            let last = view.holderRecord[node]
            let availability = view.availability[node].map { ", Home Assistant sees it \($0)" } ?? ""
            if let h = rule.holder(lamp: node, reports: reports, lastHolder: last) {
                out.append("  \(label): held by \(h)\(availability)")
            } else if let first = rule.ranking(lamp: node, reports: reports, lastHolder: last).first {
                out.append("  \(label): no holder; \(first.gateway) connects first\(availability)")
            } else {
                out.append("  \(label): no holder, and no gateway may take it\(availability)")
            }
            for r in reports.sorted(by: { rule.score($0, last) > rule.score($1, last) }) {
                var why: [String] = []
                if !r.online { why.append("offline") }
                if r.ageMs > rule.maxReportAgeMs { why.append("report stale") }
                if r.rssi < rule.rssiFloor { why.append("below \(rule.rssiFloor) dBm") }
                if r.freeSlots <= 0 && !r.holding { why.append("no free slot") }
                var score = "score \(rule.score(r, last))"
                if r.recentFailures > 0 { score += ", \(r.recentFailures) failed connect(s)" }
                if r.gateway == last { score += ", +\(rule.hysteresisDb) as the last holder" }
                let held = r.holding ? "holding, " : ""
                out.append("    \(r.gateway): \(r.rssi) dBm, \(held)\(score)" + (why.isEmpty ? "" : " (not eligible: \(why.joined(separator: ", ")))"))
            }
        }
        return out.joined(separator: "\n")
    }

    static func formatSeconds(_ ms: UInt64) -> String {
        "\(ms / 1000).\(ms % 1000 / 100) s"
    }
}
