import Attled
import AttledLED
import MQTT
import AttledHomeAssistant

/// One lamp the gateway bridges: the keeper's device (its link and where
/// the keeper stands with it) and what the gateway adds on top: its LED
/// characteristics, its Home Assistant device, its light state and writes.
final class GatewayLamp {
    let device: KeptDevice
    var led: ResolvedLED?
    var securer: Securer?
    var ha: HADevice?
    /// What the lamp has (read back on connect, then what was written).
    var light: LightState?
    /// The latest state asked for and not yet written (commands coalesce here).
    var wanted: LightState?
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

    /// A link is up: security, the LED characteristics (cache or discovery),
    /// the colour read back or the harness subscribed; then ready.
    func lampUp(_ lamp: GatewayLamp, _ link: Link) {
        let report = Report(prefix: "gateway: \(lamp.label): ", quiet: !config.verbose)
        report.output = { [weak self] line in self?.log(line) }
        let sec = Securer(policy: config.security, store: bonds, report: report)
        sec.attach(link)
        lamp.securer = sec
        let d = lamp.device
        sec.upFront(link)
            .flatMap { [self] in resolver.start(link.gatt, peer: link.peer, advertised: d.advertised, deviceName: lamp.label, report: report) }
            .flatMap { [self] (led, _) -> Future<Void> in
                lamp.led = led
                return prepare(lamp, link, led, sec)
            }
            .whenComplete { [weak self] r in
                guard let self else { return }
                switch r {
                case .success:
                    self.keeper.ready(d)
                    if let b = lamp.pendingPress { lamp.pendingPress = nil; self.press(lamp, b) }
                    self.log("gateway: \(lamp.label): ready (\(lamp.led?.profile.name ?? "?"))")
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

    /// Reads the colour back (lights) or subscribes to notifications (harness).
    func prepare(_ lamp: GatewayLamp, _ link: Link, _ led: ResolvedLED, _ sec: Securer) -> Future<Void> {
        do { lamp.ha = try haDevice(lamp, led.profile) } catch { return Future(error: GatewayError.configuration("\(error)")) }
        if led.profile.isRGB {
            guard led.rgb?.allSatisfy({ $0.properties.contains(.read) }) == true else { return .done }
            return sec.retrying(link) { LEDOperations.startReadColour(link.gatt, led) }.map { rgb in
                // The state reports what the lamp has: one that lost power (or
                // was set by someone else) is believed, not the state from
                // before; one that still shows it keeps its split into colour
                // and brightness.
                let has = LightColour(rgb.r, rgb.g, rgb.b)
                if lamp.light?.deviceColour != has { lamp.light = LightState.readBack(has) }
            }
        }
        guard let n = led.notifier, n.properties.contains(.notify) || n.properties.contains(.indicate) else { return .done }
        link.bearer.onNotification = { [weak self] hv in
            guard let self, hv.handle == n.valueHandle, let ha = lamp.ha else { return }
            self.publish(self.topics.notifications(ha), HomeAssistant.notificationText(hv.value), retain: false)
        }
        return sec.retrying(link) { link.gatt.startSubscribe(n, indications: !n.properties.contains(.notify)) }
    }

    /// Discovery configs, availability and state of a lamp.
    func announce(_ lamp: GatewayLamp) {
        guard let ha = lamp.ha else { return }
        for m in HomeAssistant.configs(ha, topics: topics) { publish(m) }
        publish(topics.availability(ha), lamp.link != nil && lamp.led != nil ? HomeAssistant.online : HomeAssistant.offline, retain: true)
        if let l = lamp.light { publish(l.stateMessage(ha, topics: topics), qos: .atMostOnce) }
    }

    /// A lamp connected on demand from now on is available to Home
    /// Assistant even while it has no link.
    func announceOnDemand(_ lamp: GatewayLamp) {
        if lamp.ha == nil, let p = LEDProfile.detect(lamp.device.advertised) { lamp.ha = try? haDevice(lamp, p) }
        if let ha = lamp.ha {
            for m in HomeAssistant.configs(ha, topics: topics) { publish(m) }
            publish(topics.availability(ha), HomeAssistant.online, retain: true)
        }
    }

    /// The link went down: nothing more is written on it; the lamp is
    /// offline until it is back, except an on-demand lamp let go.
    func lampDown(_ lamp: GatewayLamp, planned: Bool) {
        lamp.led = nil
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
