import Attled
import AttledLED
import MQTT
import AttledHomeAssistant

/// A gateway: keeps links to the LED lamps around it (a `DeviceKeeper`) and
/// bridges them to an MQTT broker with Home Assistant's discovery convention.
///
/// One thread, one loop: the stack's `EventLoop`, which the HCI host drives
/// while there is a controller and which runs on its own while there is
/// none. The broker's socket and the signal pipe are registered with it, so
/// a command from the broker is handled as soon as it arrives and a write to
/// one lamp never waits for another lamp or for the broker.
public final class Gateway {
    public let config: GatewayConfig
    public let topics: HATopics
    /// The links (the current stack is `keeper.stack`).
    public let keeper: DeviceKeeper
    /// The lamps' claims on the keeper.
    public let owner: KeeperOwner
    /// A link quiet for this long moves to the `idle` parameters.
    static let idleAfterMs = 10_000
    /// Where log lines go (default: stderr, "gateway: ...").
    public var log: (String) -> Void = { Console.err($0) }
    /// Set once `run` ended on a signal after the clean shutdown.
    public private(set) var stopped = false
    let bonds: BondStore?
    let resolver: LEDResolver
    var loop: EventLoop { keeper.loop }
    private(set) var mqtt: MQTTClient?
    var mqttBackoff = Backoff(initialMs: 500, maxMs: 30_000)
    /// The broker reconnect timer, on the loop (it outlives a controller reset).
    var mqttRetry: EventLoop.Token?
    /// A SIGHUP asked for a reconnect: the disconnect that follows is ours.
    var hupReconnect = false
    /// The lamps, by address (each with its keeper device).
    var lamps: [BDAddress: GatewayLamp] = [:]

    // Several gateways on one broker (GatewaySharing.swift).
    /// What this gateway knows of the others and of the lamps' holders.
    let shared: SharedView
    /// What this gateway hears of each lamp, by node id.
    var hearing: [String: OwnHearing] = [:]
    /// Commands no holder has confirmed yet, by node id.
    var pending: [String: PendingCommand] = [:]
    /// The `heard` messages' count.
    var beat = 0
    var heartbeatTimer: EventLoop.Token?
    var decideTimer: EventLoop.Token?
    var heardSoon: EventLoop.Token?
    var fenceTimer: EventLoop.Token?
    /// Since when the broker has been away (nil: connected).
    var brokerDownSince: Instant?
    /// When the broker last sent anything (this gateway's own report comes back every heartbeat).
    var lastFromBroker: Instant?
    /// Away from the broker for longer than `fenceAfterMs`: holds nothing.
    var fenced = false
    /// Decisions wait until then after connecting to the broker.
    var settledAt: Instant?
    var sharedCounters = SharingCounters()
    /// Whether the lamp configs last published were the lone gateway's (nil: none yet).
    var announcedLone: Bool?
    /// systemd's notification socket (nil outside systemd): ready, the
    /// watchdog's keep-alive from the loop (a hung loop stops it, and
    /// systemd kills and restarts the gateway), stopping.
    let systemd = SystemdNotify()
    /// For the figures logged at the end.
    let startedAt = Instant.now()

    /// - Parameters:
    ///   - config: broker, topics, lamps, policies.
    ///   - stack: an initialised stack (its loop is the gateway's).
    ///   - bonds: where pairing keys are kept (nil: pairing keeps none).
    ///   - cache: the GATT cache the lamps' characteristics are resolved through.
    ///   - reopen: opens the controller again after a fault (nil: a fault ends `run`).
    ///   - close: closes a failed stack (default: `BLEStack.close`).
    /// - Throws: `GatewayError.configuration`.
    public init(config: GatewayConfig, stack: BLEStack, bonds: BondStore? = nil, cache: GATTCache? = nil,
                reopen: (() throws -> BLEStack)? = nil, close: ((BLEStack) -> Void)? = nil) throws {
        self.config = config
        topics = try config.topics()
        self.bonds = bonds
        let r = LEDResolver(cache: cache, explicitProfile: nil, trustCache: false)
        if let bonds { r.identity = { a in bonds.bond(for: a)?.identity ?? a } }
        resolver = r
        shared = SharedView(me: topics.gatewayID, policy: config.sharing)
        keeper = DeviceKeeper(stack: stack, policy: config.keeper, reopen: reopen, close: close)
        owner = keeper.owner("lamps")
        // Kept links: the short interval for set-up and writes, the idle one
        // after `idleAfterMs` without commands (PROTOCOL.md, "Connection parameters").
        let claim = Claim(.keep, parameters: .oneShot, idle: Claim.Idle(afterMs: Self.idleAfterMs, parameters: .idle))
        // A lamp is adopted when the holder rule picks this gateway (GatewaySharing.swift).
        owner.wants = { [weak self, config] d in
            guard config.wants(d), let self, self.mayConnect(d) else { return nil }
            return claim
        }
        owner.hasWork = { [weak self] d in self?.lamps[d.address.address]?.hasWork ?? false }
        keeper.log = { [weak self] line in self?.log("gateway: " + line) }
        if config.verbose { keeper.trace = { [weak self] line in self?.log("gateway: " + line) } }
        owner.subscribe { [weak self] e in self?.keeperEvent(e) }
        keeper.subscribeCentral { [weak self] e in if case let .deviceSeen(d) = e { self?.seen(d) } }
    }

    // MARK: run

    /// Runs until SIGINT or SIGTERM, then publishes every lamp and the
    /// gateway offline and leaves the broker cleanly. A Hardware Error, a
    /// command the controller never answers, or a lost transport do not end
    /// it (with `reopen`): the keeper reopens the controller, with backoff,
    /// and the links are restored as the lamps are heard.
    /// - Throws: `HCIError.interrupted` after the clean shutdown (`stopped`
    ///   is then true); `GatewayError`; a controller error without `reopen`.
    public func run() throws {
        loop.watchSignals(hangup: true)
        loop.onHangup = { [weak self] in self?.hangup() }
        try startMQTT()
        startSharing()
        systemd?.ready("gateway \(topics.gatewayID) started")
        if let ms = systemd?.watchdogIntervalMs { keepWatchdog(everyMs: ms) }
        log("gateway: started on \(keeper.stack?.transport.name ?? "?"), broker \(config.brokerHost):\(config.brokerPort), topics \(topics.topicPrefix)/…, discovery \(topics.discoveryPrefix)/…")
        do {
            try keeper.run()
        } catch HCIError.interrupted {
            throw stop()
        }
    }

    /// `WATCHDOG=1` from the loop every `ms`: sent while the loop turns.
    func keepWatchdog(everyMs ms: Int) {
        systemd?.alive()
        _ = loop.schedule(afterMs: ms) { [weak self] in
            guard let self, !self.keeper.stopping else { return }
            self.keepWatchdog(everyMs: ms)
        }
    }

    func keeperEvent(_ e: DeviceKeeper.Event) {
        switch e {
        case let .linkUp(d, link): lampUp(lamp(for: d), link)
        case let .linkDown(d, _, planned):
            lampDown(lamp(for: d), planned: planned)
            lostHearing(d)
            publishHeardSoon()
        case let .becameOnDemand(d, _): announceOnDemand(lamp(for: d))
        case .controllerLost:
            // The broker is still served while there is no controller.
            if let c = mqtt, c.state == .disconnected, mqttRetry == nil { scheduleBrokerRetry() }
        case let .connectFailed(d, _): connectFailed(d)
        case .controllerBack, .waitingFromAcceptList, .notAtRememberedAddress, .scanFailed, .stateChanged: break
        }
    }

    /// The lamp is this gateway's now: adopted by its keeper (a link, or on demand).
    func owns(_ l: GatewayLamp) -> Bool { keeper.devices[l.device.address.address] === l.device }

    func lamp(for d: KeptDevice) -> GatewayLamp {
        if let l = lamps[d.address.address] {
            // Adopted again after it was released: the same lamp, a new claim.
            if l.device !== d { l.device = d }
            return l
        }
        let l = GatewayLamp(d)
        lamps[d.address.address] = l
        return l
    }

    // MARK: MQTT

    func startMQTT() throws {
        let password = try config.brokerPassword()
        let will = MQTTWill(topic: topics.gatewayAvailability, payload: Array(HomeAssistant.offline.utf8), qos: .atLeastOnce, retain: true)
        // MQTT 5 for the reports' message expiry; a short keepalive, so the
        // broker publishes the will of a gateway gone silent within 1.5 of it.
        var o = MQTTOptions(host: config.brokerHost, port: config.brokerPort, clientID: "attled-\(topics.gatewayID)-\(SystemIO.processID)",
                            username: config.username, password: password, tlsCAFile: config.tlsCAFile, keepalive: config.keepaliveSeconds, will: will)
        o.version = .v5
        let c: MQTTClient
        do { c = try MQTTClient(o) } catch { throw GatewayError.broker("\(error)") }
        mqtt = c
        c.attach(to: loop)
        c.onConnect = { [weak self] ack in self?.brokerConnected(ack) }
        c.onDisconnect = { [weak self] code in self?.brokerLost(code) }
        c.onMessage = { [weak self] topic, payload, _ in
            self?.heardFromBroker()
            self?.message(topic, payload)
        }
        connectBroker(first: true)
    }

    func connectBroker(first: Bool) {
        guard let c = mqtt, !keeper.stopping else { return }
        do {
            if first { try c.connect() } else { try c.reconnect() }
        } catch {
            log("gateway: MQTT: \(error)")
            scheduleBrokerRetry()
        }
    }

    /// SIGHUP: drop the broker connection and connect again at once (after
    /// the broker's address moved, or its credentials were rotated).
    func hangup() {
        guard let c = mqtt, !keeper.stopping else { return }
        log("gateway: SIGHUP: reconnecting to the broker")
        if let t = mqttRetry { loop.cancel(t) }
        mqttRetry = nil
        mqttBackoff.reset()
        if c.state == .connected {
            // Clean: the broker does not publish the will; onDisconnect then
            // reconnects, once the loop has written the DISCONNECT.
            hupReconnect = true
            try? c.disconnect()
            // The disconnect never reported (bounded; a SIGHUP is rare): connect again anyway.
            mqttRetry = loop.schedule(afterMs: 500) { [weak self] in
                guard let self else { return }
                self.mqttRetry = nil
                guard self.hupReconnect else { return }
                self.hupReconnect = false
                self.connectBroker(first: false)
            }
        } else {
            connectBroker(first: false)
        }
    }

    func scheduleBrokerRetry() {
        guard mqttRetry == nil, !keeper.stopping else { return }
        let ms = mqttBackoff.next()
        log("gateway: MQTT: reconnecting in \(ms) ms")
        mqttRetry = loop.schedule(afterMs: ms) { [weak self] in
            self?.mqttRetry = nil
            self?.connectBroker(first: false)
        }
    }

    func brokerConnected(_ ack: MQTTConnack) {
        guard ack.isAccepted else {
            log("gateway: MQTT: the broker refused the connection: \(ack)")
            scheduleBrokerRetry()
            return
        }
        mqttBackoff.reset()
        log("gateway: MQTT: connected to \(config.brokerHost):\(config.brokerPort)")
        announceGateway()
        brokerBack()
        for t in [topics.homeAssistantStatus, "\(topics.topicPrefix)/+/set", "\(topics.topicPrefix)/+/button1", "\(topics.topicPrefix)/+/button2"] + sharedSubscriptions {
            do { try mqtt?.subscribe(topic: t, qos: .atLeastOnce) } catch { log("gateway: MQTT: subscribe \(t): \(error)") }
        }
        // Everything again: the broker may have lost retained messages.
        for l in lamps.values where l.ha != nil && owns(l) { announce(l) }
    }

    /// The gateway's own device (every lamp's via_device), before the lamps.
    func announceGateway() {
        publish(HomeAssistant.gatewayConfig(topics: topics))
        publish(topics.gatewayAvailability, HomeAssistant.online, retain: true)
    }

    func brokerLost(_ code: MosquittoCode) {
        guard !keeper.stopping else { return }
        settledAt = nil
        if hupReconnect {
            // Not from inside libmosquitto's callback: it still closes the old
            // connection after this returns. Next turn of the loop.
            hupReconnect = false
            if let t = mqttRetry { loop.cancel(t) }
            mqttRetry = loop.schedule(afterMs: 0) { [weak self] in
                self?.mqttRetry = nil
                self?.connectBroker(first: false)
            }
            return
        }
        log("gateway: MQTT: connection lost (\(code))")
        brokerAway()
        scheduleBrokerRetry()
    }

    /// Publishes text: QoS 1 by default (configs, availability), QoS 0 for
    /// states and the shutdown's offline messages. Nothing while the broker
    /// is away: everything is published again when it is back.
    func publish(_ topic: String, _ text: String, qos: MQTTQoS = .atLeastOnce, retain: Bool = true) {
        publish(topic, Array(text.utf8), qos: qos, retain: retain)
    }

    /// Publishes `m`: QoS 1 for configs and availability, QoS 0 for states,
    /// whose PUBACK would only add a round trip (and, with Nagle on the
    /// broker's side, hold the next command back by a delayed ACK).
    func publish(_ m: HAMessage, qos: MQTTQoS = .atLeastOnce) {
        publish(m.topic, m.payloadBytes, qos: qos, retain: m.retain)
    }

    private func publish(_ topic: String, _ payload: [UInt8], qos: MQTTQoS, retain: Bool) {
        guard let c = mqtt, c.state == .connected else { return }
        do {
            _ = try c.publish(topic: topic, payload: payload, qos: qos, retain: retain)
            sharedCounters.published += 1
        } catch { log("gateway: MQTT: publish \(topic): \(error)") }
    }

    /// SIGINT or SIGTERM: publishes `offline` for every lamp and the
    /// gateway, then sends DISCONNECT so the broker does not also publish the
    /// will (the owner's clean-up disconnects the links). The offline
    /// messages go at QoS 0: a PUBACK still unread when the socket closes
    /// would make the kernel reset the connection, and the broker would then
    /// treat it as lost and publish the will on top.
    /// - Returns: the error that ends `run()`.
    func stop() -> HCIError {
        keeper.stop()
        systemd?.stopping()
        let ms = max(1, Instant.now().msSince(startedAt)), tenths = sharedCounters.published * 10_000 / ms
        log("gateway: stopping (\(sharedCounters.published) MQTT messages published in \(ms / 1000) s, \(tenths / 10).\(tenths % 10)/s; \(sharedCounters.replayed) command(s) carried out for a previous holder, \(sharedCounters.released) lamp(s) released to another holder)")
        if let c = mqtt, c.state == .connected {
            for l in lamps.values where owns(l) { if let ha = l.ha { publish(topics.availability(ha), HomeAssistant.offline, qos: .atMostOnce) } }
            publish(topics.gatewayAvailability, HomeAssistant.offline, qos: .atMostOnce)
            // The loop (not inside a run: stop() ends one) writes them, bounded.
            _ = try? loop.run(until: Instant.now().adding(ms: 500), interruptible: false) { !c.wantsWrite }
            try? c.disconnect()
            // Let libmosquitto write the DISCONNECT (bounded), then take the
            // broker's socket off the loop: the clean-up that follows waits
            // for the controller only.
            _ = try? loop.run(until: Instant.now().adding(ms: 1000), interruptible: false) { c.socket < 0 || c.state != .connected }
        }
        mqtt?.detach()
        stopped = true
        return HCIError.interrupted(signal: SignalWatch.interrupt)
    }
}
