import Attled
import AttledLED
import MQTT
import AttledHomeAssistant

/// The gateway's commands: Home Assistant's light commands and button
/// presses, coalesced writes (the keeper carries out the connection
/// interval policy: `busy` before a write, `idle` after).
extension Gateway {

    // MARK: commands

    func message(_ topic: String, _ payload: [UInt8]) {
        if topic == topics.homeAssistantStatus {
            if HomeAssistant.isBirth(payload) {
                log("gateway: Home Assistant is online: publishing the discovery configs again")
                announceGateway()
                for l in lamps.values where l.ha != nil && owns(l) { announce(l) }
            }
            return
        }
        if sharedMessage(topic, payload) { return }
        // Every gateway hears every command; the lamp's holder carries it out,
        // the others keep the newest until the holder confirms it, to carry it
        // out should they become the holder first (GatewaySharing.swift).
        let prefix = topics.topicPrefix + "/"
        let parts = topic.hasPrefix(prefix) ? topic.dropFirst(prefix.count).split(separator: "/") : []
        let node = parts.count == 2 ? String(parts[0]) : ""
        if parts.count == 2, parts[1] == "set", !payload.isEmpty {
            pending[node] = PendingCommand(payload: payload, digest: commandDigest(payload))
        }
        guard let dev = lamps.values.first(where: { $0.ha?.nodeID == node && owns($0) }),
              let ha = dev.ha else { return }
        if topic == topics.command(ha) {
            guard ha.kind == .light else { return }
            let cmd: LightCommand
            do { cmd = try LightCommand.parse(payload) } catch {
                log("gateway: \(dev.label): ignored a command: \(error)")
                pending[node] = nil
                return
            }
            // On top of the newest state: not yet written, being written, or on the device.
            let base = dev.wanted ?? dev.inFlight ?? dev.light ?? .initial
            dev.wanted = base.applying(cmd)
            dev.wantedDigest = pending[node]?.digest
            dev.commandAt = Instant.now()
            flush(dev)
        } else if let button = HomeAssistant.buttonPress(topic: topic, payload: payload, device: ha, topics: topics) {
            press(dev, button)
        }
    }

    /// Writes the latest wanted state, one write in flight per device.
    func flush(_ dev: GatewayLamp) {
        if dev.device.mode == .onDemand, dev.link == nil, dev.wanted != nil { keeper.need(dev.device); return }
        // A link whose connection just ended is torn down layer by layer before
        // the gateway hears of it (the failed write's completion comes first):
        // nothing is written on it; linkDown follows and the link is made again.
        guard let link = dev.link, link.isConnected, let session = dev.session, dev.led != nil, !dev.isWriting, let want = dev.wanted, let ha = dev.ha else { return }
        keeper.busy(dev.device)
        let digest = dev.wantedDigest
        dev.wanted = nil
        dev.wantedDigest = nil
        dev.write = .writing(want)
        let c = want.deviceColour
        let started = dev.commandAt
        session.act { _ in session.startSetColour(RGB(c.r, c.g, c.b)).map { _ in } }.whenComplete { [weak self] r in
            guard let self else { return }
            dev.write = .none
            switch r {
            case .success:
                dev.light = want
                self.publish(want.stateMessage(ha, topics: self.topics), qos: .atMostOnce)
                if let digest { self.applied(ha, digest: digest) }
                self.keeper.idle(dev.device)
                if self.config.verbose, let t = started {
                    self.log("gateway: \(dev.label): wrote \(c) in \(formatMs(us: Instant.now().usSince(t))) ms after the command")
                }
            case .failure(let e):
                self.log("gateway: \(dev.label): write failed: \(e)")
                // A link that no longer completes what is sent is dead: end it, so it is made again.
                if e is ACLDrainTimeout, link.isConnected { _ = link.startDisconnect() }
                if dev.wanted == nil { dev.wanted = want; dev.wantedDigest = digest } // retried when the link is back
            }
            self.flush(dev)
        }
    }

    func press(_ dev: GatewayLamp, _ b: HarnessButton) {
        guard let link = dev.link, link.isConnected, let session = dev.session, let cmd = dev.led?.command, let h = keeper.stack?.host else {
            if dev.device.mode == .onDemand {
                dev.pendingPress = b
                keeper.need(dev.device)
                return
            }
            log("gateway: \(dev.label): button \(b.rawValue) pressed while not connected: ignored")
            return
        }
        log("gateway: \(dev.label): button \(b.rawValue)")
        keeper.busy(dev.device)
        _ = session.act { _ in session.startWrite(cmd, [b.pressByte]).map { _ in } }
        _ = h.schedule(afterMs: HarnessButton.holdMs) { [weak self] in
            guard dev.link === link else { return }
            session.act { _ in session.startWrite(cmd, [b.releaseByte]).map { _ in } }.whenComplete { r in
                if case .failure(let e) = r { self?.log("gateway: \(dev.label): release of button \(b.rawValue) failed: \(e)") }
                self?.keeper.idle(dev.device)
            }
        }
    }
}
