import Attled
import AttledLED
import MQTT
import AttledHomeAssistant

/// What this gateway hears of one lamp on its own radio.
struct OwnHearing {
    var address: DeviceAddress
    /// The last report (the keeper is offered it again when the lamp's turn comes).
    var report: DiscoveredDevice
    /// Exponentially smoothed RSSI (a quarter of each new report).
    var rssi: Double
    var lastHeard: Instant
    var name: String?
    /// When connect attempts failed (kept for `SharePolicy.failureWindowMs`).
    var failures: [Instant] = []
}

/// A command the holder has not yet confirmed (`<node>/applied`): a gateway
/// that becomes the lamp's holder carries it out.
struct PendingCommand {
    var payload: [UInt8]
    var digest: String
}

/// Several gateways on one broker (Sharing.swift for the messages): each
/// says what it hears, every one runs the holder rule on the same retained
/// inputs, the one the rule picks connects, the others stand by; a gateway
/// away from the broker drops its links; a survivor marks a dead holder's
/// lamps offline.
extension Gateway {

    // MARK: hearing

    /// A report of a device (every one: the keeper's `subscribeCentral`).
    func seen(_ d: DiscoveredDevice) {
        guard d.connectable, config.wants(d), let node = HATopics.nodeID(d.address.address.description) else { return }
        let now = Instant.now()
        var h = hearing[node] ?? OwnHearing(address: d.address, report: d, rssi: Double(d.rssi), lastHeard: now)
        h.report = d
        // Not heard within the window (or never, or not since a link ended): the smoothing starts again.
        let fresh = hearing[node] == nil || now.msSince(h.lastHeard) > config.sharing.heardWindowMs
        h.rssi = fresh ? Double(d.rssi) : h.rssi * 0.75 + Double(d.rssi) * 0.25
        h.lastHeard = now
        h.address = d.address
        if let n = d.name { h.name = n }
        hearing[node] = h
        shared.advertised(node, at: now)
        // A lamp newly heard: the others learn it at once, not at the next heartbeat.
        if fresh { publishHeardSoon() }
        // Its turn may have come since the keeper last asked (a rank delay
        // over, a holder gone): judged again on every report.
        if keeper.devices[d.address.address] == nil { keeper.consider(d) }
    }

    /// This gateway's report of `node` (nil: it neither hears nor holds it).
    func ownHearing(_ node: String, at now: Instant) -> LampHearing? {
        let holding = heldLamp(node) != nil
        guard let h = hearing[node] else { return nil }
        guard holding || now.msSince(h.lastHeard) <= config.sharing.heardWindowMs else { return nil }
        let fails = h.failures.filter { now.msSince($0) <= config.sharing.failureWindowMs }.count
        return LampHearing(rssi: Int(h.rssi.rounded()), failures: fails, holding: holding, name: h.name)
    }

    /// The lamp `node` when this gateway has a link to it.
    func heldLamp(_ node: String) -> GatewayLamp? {
        guard let h = hearing[node], let l = lamps[h.address.address], l.link != nil, l.device.mode != .onDemand || l.link != nil else { return nil }
        return l
    }

    /// Free connection slots: what the controller (or `--max-links`) holds
    /// less the links up; 1 while neither is known (the controller says how
    /// many it holds only by refusing one more).
    var freeSlots: Int {
        guard let limit = keeper.slotCount else { return 1 }
        return max(0, limit - keeper.linkCount)
    }

    /// A link ended: what this gateway heard of the lamp dates from before
    /// it (a lamp with a link does not advertise), so it reports the lamp
    /// again only once it hears it again: a holder that lost its lamp out of
    /// range does not rank first on its old signal and its hysteresis.
    func lostHearing(_ d: KeptDevice) {
        guard let node = HATopics.nodeID(d.address.address.description) else { return }
        hearing[node]?.lastHeard = .distantPast
    }

    func connectFailed(_ d: KeptDevice) {
        guard let node = HATopics.nodeID(d.address.address.description), hearing[node] != nil else { return }
        let now = Instant.now()
        hearing[node]?.failures.removeAll { now.msSince($0) > config.sharing.failureWindowMs }
        hearing[node]?.failures.append(now)
    }

    // MARK: the heartbeat

    /// The `heard` message now: beat, free slots, every lamp heard or held.
    func hearingMessage(at now: Instant) -> GatewayHearing {
        var lamps: [String: LampHearing] = [:]
        for node in hearing.keys { if let l = ownHearing(node, at: now) { lamps[node] = l } }
        return GatewayHearing(beat: beat, slots: freeSlots, lamps: lamps)
    }

    func publishHeard() {
        guard let c = mqtt, c.state == .connected else { return }
        beat += 1
        let m = hearingMessage(at: Instant.now())
        do {
            _ = try c.publish(topic: topics.heard, payload: m.json.serializedBytes, qos: .atMostOnce, retain: true,
                              expirySeconds: config.sharing.heardExpirySeconds)
            sharedCounters.published += 1
        } catch { log("gateway: MQTT: publish \(topics.heard): \(error)") }
    }

    /// The report goes out on the next turn of the loop (changes coalesce).
    func publishHeardSoon() {
        guard heardSoon == nil else { return }
        heardSoon = loop.schedule(afterMs: 0) { [weak self] in
            self?.heardSoon = nil
            self?.publishHeard()
        }
    }

    /// The heartbeat and the rule's clock: the report every `heartbeatMs`,
    /// the decisions every 250 ms.
    func startSharing() {
        if heartbeatTimer == nil { scheduleHeartbeat() }
        if decideTimer == nil { scheduleDecisions() }
    }

    private func scheduleHeartbeat() {
        heartbeatTimer = loop.schedule(afterMs: config.sharing.heartbeatMs) { [weak self] in
            guard let self, !self.keeper.stopping else { return }
            self.publishHeard()
            self.scheduleHeartbeat()
        }
    }

    private func scheduleDecisions() {
        decideTimer = loop.schedule(afterMs: 250) { [weak self] in
            guard let self, !self.keeper.stopping else { return }
            self.decide()
            self.scheduleDecisions()
        }
    }

    // MARK: decisions

    /// Whether this gateway may decide at all: on the broker, not fenced, and
    /// long enough after connecting to have read the others' retained reports.
    var sharingSettled: Bool {
        guard let c = mqtt, c.state == .connected, !fenced, let t = settledAt else { return false }
        return Instant.now() >= t
    }

    /// Whether this gateway connects to the lamp `d` now (the keeper asks on
    /// each report of a lamp it has not adopted).
    func mayConnect(_ d: DiscoveredDevice) -> Bool {
        guard sharingSettled, let node = HATopics.nodeID(d.address.address.description) else { return false }
        let now = Instant.now()
        return turnCame(node, own: ownHearing(node, at: now), at: now)
    }

    /// The rule lets this gateway connect to `node` now: it ranks first (its
    /// delay over), or it serves the lamp on demand.
    func turnCame(_ node: String, own: LampHearing?, at now: Instant) -> Bool {
        shared.action(node, own: own, ownSlots: freeSlots, at: now) == .connect(afterMs: 0)
            || shared.onDemandTurn(node, own: own, ownSlots: freeSlots, at: now)
    }

    /// The rule applied to every lamp: links released where another gateway
    /// holds the lamp, attempts given up where this gateway no longer ranks;
    /// a dead holder's lamps marked offline.
    func decide() {
        let now = Instant.now()
        checkBrokerSilence(at: now)
        guard sharingSettled else { return }
        announceIfLonenessChanged()
        var holding = Set<String>()
        for node in hearing.keys {
            let own = ownHearing(node, at: now)
            if own?.holding == true { holding.insert(node) }
            let a = shared.action(node, own: own, ownSlots: freeSlots, at: now)
            guard let h = hearing[node] else { continue }
            guard let l = lamps[h.address.address], keeper.devices[h.address.address] === l.device else {
                // Its turn came (a rank delay over, a holder gone, the start-up
                // settled) since it was last heard: offered now, not at its next
                // advertisement.
                if own != nil, keeper.devices[h.address.address] == nil, turnCame(node, own: own, at: now) {
                    keeper.consider(h.report)
                }
                continue
            }
            switch a {
            case .release:
                let keeps = shared.holder(node, own: own, ownSlots: freeSlots, at: now) ?? "?"
                log("gateway: \(l.label): \(keeps) holds it too and keeps it: releasing")
                sharedCounters.released += 1
                keeper.release(l.device)
            case .standBy where l.link == nil && !shared.onDemandTurn(node, own: own, ownSlots: freeSlots, at: now):
                // Adopted while it ranked first; another gateway holds it now
                // or ranks above. A lamp this gateway lost and no longer hears
                // (it reports it again only once heard again) stays claimed
                // (the controller's accept list takes it back at its first
                // advertisement) unless another gateway holds it or may take it.
                if own == nil && !shared.othersMayTake(node, at: now) { break }
                keeper.release(l.device)
            case .standBy, .keep, .connect: break
            }
        }
        for node in shared.orphans(ownHolding: holding, at: now) {
            let holder = shared.holderRecord[node] ?? "?"
            log("gateway: \(shared.name(of: node) ?? node): its holder \(holder) is gone: offline until a gateway takes it")
            shared.availability(node, HomeAssistant.offline)
            publish("\(topics.topicPrefix)/\(node)/availability", HomeAssistant.offline, retain: true)
        }
    }

    // MARK: the broker

    /// Shared topics to subscribe to.
    var sharedSubscriptions: [String] {
        ["heard", "availability", "holder", "applied"].map { "\(topics.topicPrefix)/+/\($0)" }
    }

    /// A message on a shared topic; false: not one.
    func sharedMessage(_ topic: String, _ payload: [UInt8]) -> Bool {
        guard let m = shared.take(topic: topic, payload: payload, prefix: topics.topicPrefix, at: Instant.now()) else { return false }
        switch m {
        case let .availability(id, value):
            // Another gateway took this one's lamp for orphaned (it could not
            // see this one: a partition between brokers, now healed): it is not.
            if value == HomeAssistant.offline, let l = heldLamp(id), l.device.phase == .ready, let ha = l.ha, ha.nodeID == id {
                log("gateway: \(l.label): another gateway said it is offline; it is held here")
                shared.availability(id, HomeAssistant.online)
                publish(topics.availability(ha), HomeAssistant.online, retain: true)
                publish(topics.holder(ha), JSONValue.object([("holder", .string(topics.gatewayID))]).serialized, retain: true)
            }
        case let .applied(node, digest):
            if let d = digest, pending[node]?.digest == d { pending[node] = nil }
        case .heard, .holder:
            break
        }
        return true
    }

    /// The broker went away: after `fenceAfterMs` without it this gateway
    /// drops its links, since the others can no longer see what it holds.
    func brokerAway() {
        guard brokerDownSince == nil else { return }
        brokerDownSince = Instant.now()
        settledAt = nil
        fenceTimer = loop.schedule(afterMs: config.sharing.fenceAfterMs) { [weak self] in
            guard let self else { return }
            self.fenceTimer = nil
            guard self.brokerDownSince != nil else { return }
            self.fence("away from the broker for \(self.config.sharing.fenceAfterMs) ms")
        }
    }

    /// Drops every link and takes nothing until the broker is heard again:
    /// the others cannot see what this gateway holds.
    func fence(_ why: String) {
        guard !fenced, !keeper.stopping else { return }
        // Alone on the broker (no other gateway heard from in 10 minutes):
        // nobody could take the lamps, and dropping them would only cost their
        // links; they stay.
        guard shared.othersSeen(withinMs: Self.aloneAfterMs, at: Instant.now()) else { return }
        fenced = true
        let held = lamps.values.filter { $0.link != nil }
        log("gateway: \(why): dropping \(held.count) lamp(s), which another gateway may take")
        for l in held { keeper.release(l.device) }
    }

    /// A connection that has gone silent (a network lost without a word:
    /// TCP and MQTT notice only at their keepalive, 7.5 s and more): this
    /// gateway's own report comes back from the broker every heartbeat, so
    /// nothing from the broker for `fenceAfterMs` is the same as away.
    func checkBrokerSilence(at now: Instant) {
        guard let c = mqtt, c.state == .connected, !fenced, let last = lastFromBroker,
              now.msSince(last) > config.sharing.fenceAfterMs else { return }
        settledAt = nil
        fence("nothing from the broker for \(now.msSince(last)) ms (its own report did not come back)")
    }

    /// Anything from the broker: a silent connection that speaks again lifts the fence.
    func heardFromBroker() {
        lastFromBroker = Instant.now()
        if fenced, brokerDownSince == nil, let c = mqtt, c.state == .connected {
            fenced = false
            settledAt = Instant.now().adding(ms: Self.settleMs)
            log("gateway: the broker answers again")
        }
    }

    /// Back on the broker: decisions resume once the others' retained reports are in.
    func brokerBack() {
        if let t = fenceTimer { loop.cancel(t) }
        fenceTimer = nil
        brokerDownSince = nil
        fenced = false
        lastFromBroker = Instant.now()
        settledAt = Instant.now().adding(ms: Self.settleMs)
        publishHeard()
        startSharing()
    }

    /// No other gateway heard from in `aloneAfterMs`: this one's lamp configs
    /// carry its own availability too (HomeAssistant.availability).
    var lone: Bool { !shared.othersSeen(withinMs: Self.aloneAfterMs, at: Instant.now()) }

    /// The lamp configs again when the gateway becomes lone or stops being so.
    func announceIfLonenessChanged() {
        let now = lone
        guard now != announcedLone else { return }
        let before = announcedLone
        announcedLone = now
        guard before != nil else { return }
        log("gateway: " + (now ? "no other gateway on the broker for 10 minutes: the lamps' configs name this gateway's availability too"
                              : "another gateway shares the broker: the lamps' configs are the shared ones"))
        for l in lamps.values where owns(l) {
            if let ha = l.ha { for m in HomeAssistant.configs(ha, topics: topics, lone: now) { publish(m) } }
        }
    }

    /// After connecting, the retained reports of the others arrive first.
    static let settleMs = 1_000
    /// A gateway that has heard no other for this long is alone, and does not fence itself.
    static let aloneAfterMs = 600_000

    // MARK: holding

    /// This gateway set a lamp up: its holder record, and the command the
    /// previous holder left unconfirmed.
    func becameHolder(_ lamp: GatewayLamp, _ ha: HADevice) {
        publish(topics.holder(ha), JSONValue.object([("holder", .string(topics.gatewayID))]).serialized, retain: true)
        shared.holderRecord(ha.nodeID, topics.gatewayID)
        publishHeardSoon()
        // What to write now is the newest command no holder confirmed (this
        // gateway's own included), on top of the colour read back; a write
        // left over from an earlier link is not: it may be older than what
        // another holder wrote since.
        let leftOver = lamp.wantedDigest
        lamp.wanted = nil
        lamp.wantedDigest = nil
        if let p = pending[ha.nodeID], ha.kind == .light, let cmd = try? LightCommand.parse(p.payload) {
            lamp.wanted = (lamp.light ?? .initial).applying(cmd)
            lamp.wantedDigest = p.digest
            if p.digest != leftOver { log("gateway: \(lamp.label): the last command, which no holder confirmed, is for this gateway to carry out") }
        }
        // The colour was read back on connect: a write the previous holder
        // (or this gateway, before its link dropped) made but had no time to
        // confirm is on the lamp already, and is not made twice.
        if let want = lamp.wanted, let shown = lamp.light?.deviceColour, want.deviceColour == shown {
            log("gateway: \(lamp.label): the lamp shows the colour asked for already: confirmed, not written again")
            lamp.light = want
            lamp.wanted = nil
            publish(want.stateMessage(ha, topics: topics), qos: .atMostOnce)
            if let d = lamp.wantedDigest { applied(ha, digest: d) }
            lamp.wantedDigest = nil
        } else if lamp.wanted != nil, lamp.wantedDigest != nil {
            sharedCounters.replayed += 1
        }
    }

    /// The holder carried out the command with `digest`: the others forget it.
    func applied(_ ha: HADevice, digest: String) {
        if pending[ha.nodeID]?.digest == digest { pending[ha.nodeID] = nil }
        publish(topics.applied(ha), JSONValue.object([("digest", .string(digest))]).serialized, retain: true)
    }
}

/// Counts for `--status` and the soak's figures.
struct SharingCounters {
    var published = 0
    var released = 0
    var replayed = 0
}
