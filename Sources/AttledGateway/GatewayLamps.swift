import Attled
import AttledLED
import MQTT
import AttledHomeAssistant

/// One lamp the gateway bridges: the keeper's device (its link and where
/// the keeper stands with it) and what the gateway adds on top: its LED
/// characteristics, its Home Assistant device, its light state and writes.
final class GatewayLamp {
    /// The keeper's device (a new one when the lamp is adopted again after a release).
    var device: KeptDevice
    /// The lamp's session on its link (set-up, writes, security).
    var session: LampSession?
    /// Its LED characteristics, once the session resolved them.
    var led: ResolvedLED? { session?.led }
    var ha: HADevice?
    /// What the lamp has (read back on connect, then what was written).
    var light: LightState?
    /// The latest state asked for and not yet written (commands coalesce here).
    var wanted: LightState?
    /// The digest of the newest command in `wanted` (confirmed on `<node>/applied` once written).
    var wantedDigest: String?
    /// When the newest command came (for the "wrote in N ms" line).
    var commandAt: Instant?
    /// One write in flight per lamp.
    enum Write { case none, writing(LightState) }
    var write = Write.none
    /// A harness button pressed while an on-demand lamp was not connected.
    var pendingPress: HarnessButton?

    init(_ device: KeptDevice) { self.device = device }

    var label: String { device.label }
    var link: Link? { device.link }
    var isWriting: Bool { if case .writing = write { return true } else { return false } }
    /// The state being written now (the base for a partial command meanwhile).
    var inFlight: LightState? { if case let .writing(s) = write { return s } else { return nil } }
    /// Work for an on-demand link: it is connected for it, and let go only without it.
    var hasWork: Bool { isWriting || wanted != nil || pendingPress != nil }
}

/// The lamps' lives: set up when the keeper brings a link up, announced to
/// Home Assistant, marked offline when the link goes down.
extension Gateway {

    /// A link is up: the lamp's session sets it up (security, the LED
    /// characteristics from the cache or by discovery, the colour read back
    /// or the harness subscribed); then ready.
    func lampUp(_ lamp: GatewayLamp, _ link: Link) {
        let report = Report(prefix: "gateway: \(lamp.label): ", quiet: !config.verbose)
        report.output = { [weak self] line in self?.log(line) }
        let sec = Securer(policy: config.security, store: bonds, report: report)
        let d = lamp.device
        let session = LampSession(link: link, resolver: resolver, securer: sec, advertised: d.advertised, deviceName: lamp.label, report: report)
        lamp.session = session
        session.onResolved = { [weak self] led, _ in
            lamp.ha = try? self?.haDevice(lamp, led.profile)
        }
        session.onValue = { [weak self] hv in
            guard let self, hv.handle == lamp.led?.notifier?.valueHandle, let ha = lamp.ha else { return }
            self.publish(self.topics.notifications(ha), HomeAssistant.notificationText(hv.value), retain: false)
        }
        session.startPrepared().whenComplete { [weak self] r in
            guard let self else { return }
            switch r {
            case .success where lamp.ha == nil:
                self.log("gateway: \(lamp.label): setup failed: no Home Assistant device for \(lamp.device.address); disconnecting")
                self.keeper.setupFailed(d)
            case .success(let prepared):
                if case let .colour(values) = prepared, values.count == 3, let r = values[0], let g = values[1], let b = values[2] {
                    // The state reports what the lamp has: one that lost power (or
                    // was set by someone else) is believed, not the state from
                    // before; one that still shows it keeps its split into colour
                    // and brightness.
                    let has = LightColour(r, g, b)
                    if lamp.light?.deviceColour != has { lamp.light = LightState.readBack(has) }
                }
                self.keeper.ready(d)
                if let b = lamp.pendingPress { lamp.pendingPress = nil; self.press(lamp, b) }
                self.log("gateway: \(lamp.label): ready (\(lamp.led?.profile.name ?? "?"))")
                if let ha = lamp.ha { self.becameHolder(lamp, ha) }
                self.announce(lamp)
                self.flush(lamp)
            case .failure(let e):
                self.log("gateway: \(lamp.label): setup failed: \(e); disconnecting")
                self.keeper.setupFailed(d)
            }
        }
    }

    /// The Home Assistant device of a lamp with this profile.
    func haDevice(_ lamp: GatewayLamp, _ profile: LEDProfile) throws -> HADevice {
        try HADevice(id: lamp.device.address.address.description, name: lamp.device.name ?? lamp.device.address.address.description,
                     model: profile.name, kind: profile.isRGB ? .light : .harness)
    }

    /// Discovery configs, availability and state of a lamp.
    func announce(_ lamp: GatewayLamp) {
        guard let ha = lamp.ha else { return }
        for m in HomeAssistant.configs(ha, topics: topics, lone: lone) { publish(m) }
        publish(topics.availability(ha), lamp.link != nil && lamp.led != nil ? HomeAssistant.online : HomeAssistant.offline, retain: true)
        if let l = lamp.light { publish(l.stateMessage(ha, topics: topics), qos: .atMostOnce) }
    }

    /// A lamp connected on demand from now on is available to Home
    /// Assistant even while it has no link.
    func announceOnDemand(_ lamp: GatewayLamp) {
        if lamp.ha == nil, let p = LEDProfile.detect(lamp.device.advertised) { lamp.ha = try? haDevice(lamp, p) }
        if let ha = lamp.ha {
            for m in HomeAssistant.configs(ha, topics: topics, lone: lone) { publish(m) }
            publish(topics.availability(ha), HomeAssistant.online, retain: true)
        }
    }

    /// The link went down: nothing more is written on it; the lamp is
    /// offline until it is back, except an on-demand lamp let go.
    func lampDown(_ lamp: GatewayLamp, planned: Bool) {
        lamp.session = nil
        lamp.write = .none
        if planned { return }
        if keeper.stopping {
            // Its offline message went out before the broker was left.
            log("gateway: \(lamp.label): disconnected (stopping)")
            return
        }
        log("gateway: \(lamp.label): disconnected; unavailable until it advertises again")
        if let ha = lamp.ha { publish(topics.availability(ha), HomeAssistant.offline, retain: true) }
    }
}
