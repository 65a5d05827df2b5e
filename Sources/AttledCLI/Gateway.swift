#if ATTLED_GATEWAY
#if canImport(Glibc)
import Glibc
#endif
import Attled
import AttledLED
import BLEMQTT

/// `attled gateway`: keeps links to the LED devices around it and bridges
/// them to an MQTT broker with Home Assistant's discovery convention.
///
/// One thread, one loop: the session's `EventLoop`, which the HCI host
/// drives while there is a controller and which runs on its own while there
/// is none. The broker's socket (MQTTClient.attach) and the signal pipe are
/// registered with it, so a command from the broker is handled as soon as it
/// arrives and a write to one device never waits for another device or for
/// the broker.
final class Gateway {
    let s: Session
    let opts: Options
    let topics: HATopics
    /// Made at first use, after Session.open (which may move the cache and the bonds).
    lazy var resolver = s.makeResolver(explicitProfile: nil, trustCache: false)
    private(set) var mqtt: MQTTClient?
    var mqttBackoff = Backoff(initialMs: 500, maxMs: 30_000)
    /// The broker reconnect timer, on the loop (it outlives a controller reset).
    var mqttRetry: EventLoop.Token?
    var loop: EventLoop { s.loop }
    /// The gateway's subscriptions to the current stack's Central.
    var centralSubscriptions: [Central.Subscription] = []
    var devices: [BDAddress: GatewayDevice] = [:]
    var connecting: GatewayDevice?
    var stopping = false
    /// - Throws: `RunError` (usage) for bad prefixes or an unreadable password file.
    init(_ s: Session) throws {
        self.s = s
        self.opts = s.opts
        do {
            topics = try HATopics(topicPrefix: opts.topicPrefix, discoveryPrefix: opts.discoveryPrefix, gatewayID: opts.gatewayID)
        } catch {
            throw RunError("\(error)", .usage)
        }
        s.loop.watchSignals(hangup: true)
        s.loop.onHangup = { [weak self] in self?.hangup() }
    }

    // MARK: run

    /// Set when the controller stopped answering a command: the loop ends
    /// and the controller is reset and initialised again.
    var resetReason: String?
    /// The last scan failure logged (logged again only when it changes).
    var scanError: String?
    var controllerBackoff = Backoff(initialMs: 500, maxMs: 30_000)

    /// Runs until SIGINT or SIGTERM (exit 0). A Hardware Error, a command the
    /// controller never answers, or a lost transport do not end it: the
    /// transport is reopened (with backoff), the controller reset and
    /// initialised again, and the links restored as the devices are heard.
    /// - Throws: `HCIError.interrupted` (after the clean shutdown), `RunError`.
    func run() throws {
        guard var stack = s.stack else { return }
        try startMQTT()
        log("gateway: started on \(s.transport?.name ?? "?"), broker \(opts.mqttHost):\(opts.mqttPort), topics \(topics.topicPrefix)/…, discovery \(topics.discoveryPrefix)/…")
        while true {
            attach(stack)
            do {
                _ = try stack.host.pump(until: .distantFuture) { resetReason != nil }
            } catch HCIError.interrupted {
                throw stop()
            } catch {
                resetReason = "\(classify(error).message)"
            }
            log("gateway: controller: \(resetReason ?? "failed"); resetting it and restoring the links")
            resetReason = nil
            stack = try recover(stack)
        }
    }

    /// Hooks the gateway into a (new) stack: scan reports, disconnections,
    /// late connections, the periodic tick, scanning.
    func attach(_ stack: BLEStack) {
        // New or changed advertising data: adopt the device if it is wanted.
        centralSubscriptions = [
            stack.central.onDeviceUpdate { [weak self] d, _ in self?.heard(d) },
        // Every report of an adopted device: one back after a drop (or whose
        // backoff ended) is connected the next time it is heard.
            stack.central.onDeviceSeen { [weak self] d in
                guard let self, !self.stopping, let dev = self.devices[d.address.address] else { return }
                self.tryConnect(dev)
            },
            stack.central.onDisconnection { [weak self] c in self?.linkDown(c.peer, reason: nil) },
        // A connection that completes after its attempt was given up (a
        // controller that kept it pending, as Bumble's does after a cancel):
        // adopt it when it is a device we want and have no link to. That
        // includes the device being connected right now: the Central has no
        // attempt for it yet (it would have taken the completion), so the
        // scan is still stopping, and tryConnect then makes no second link.
            stack.central.adoptUnrequested { [weak self] c in
                guard let self, !self.stopping, let dev = self.devices[c.peer.address], dev.link == nil else { return false }
                self.log("gateway: \(dev.label): a connection given up earlier completed: adopting it")
                self.linkUp(dev, stack.attach(c))
                return true
            },
        ]
        schedulePeriodic(stack.host)
        ensureScanning()
        chooseReconnectPath(stack)
    }

    /// Drops the old stack (every link is gone with it), then reopens the
    /// transport and initialises the controller, with backoff, serving the
    /// broker meanwhile.
    func recover(_ old: BLEStack) throws -> BLEStack {
        // No accept-list connect on the controller being dropped: decided anew on the next.
        reconnectPath = .unknown
        acceptArming = false
        for d in devices.values where d.link != nil { linkDown(d.address, reason: nil, force: true) }
        connecting = nil
        for t in centralSubscriptions { old.central.cancel(t) }
        centralSubscriptions = []
        s.closeStack()
        while true {
            try serveBrokerOnly(ms: controllerBackoff.next())
            do {
                let stack = try s.reopenStack()
                controllerBackoff.reset()
                log("gateway: controller: \(stack.transport.name) initialised again")
                return stack
            } catch HCIError.interrupted {
                throw HCIError.interrupted(signal: SIGINT)
            } catch {
                log("gateway: controller: \(classify(error).message); retrying")
            }
        }
    }

    /// Waits `ms` with no controller: the loop runs on its own, still
    /// serving the broker (and signals).
    func serveBrokerOnly(ms: Int) throws {
        if let c = mqtt, c.state == .disconnected, mqttRetry == nil { scheduleBrokerRetry() }
        do {
            try loop.sleep(until: Instant.now().adding(ms: ms))
        } catch EventLoopError.interrupted {
            throw stop()
        }
    }

    func log(_ line: String) { Console.err("attled: " + line) }

    // MARK: MQTT

    func startMQTT() throws {
        var password: String? = nil
        if let f = opts.mqttPasswordFile {
            guard let raw = SystemIO.readFile(f, limit: 4096) else {
                throw RunError("cannot read --mqtt-password-file \(f): \(String(cString: strerror(errno)))", .usage)
            }
            var text = String(decoding: raw, as: UTF8.self)
            while text.hasSuffix("\n") || text.hasSuffix("\r") { text.removeLast() }
            password = text
        }
        let will = MQTTWill(topic: topics.gatewayAvailability, payload: Array(HomeAssistant.offline.utf8), qos: .atLeastOnce, retain: true)
        let o = MQTTOptions(host: opts.mqttHost, port: opts.mqttPort, clientID: "attled-\(topics.gatewayID)-\(getpid())",
                            username: opts.mqttUser, password: password, tlsCAFile: opts.mqttTLSCA, keepalive: 30, will: will)
        let c: MQTTClient
        do { c = try MQTTClient(o) } catch { throw RunError("MQTT: \(error)", .usage) }
        mqtt = c
        c.attach(to: loop)
        c.onConnect = { [weak self] ack in self?.brokerConnected(ack) }
        c.onDisconnect = { [weak self] code in self?.brokerLost(code) }
        c.onMessage = { [weak self] topic, payload, _ in self?.message(topic, payload) }
        connectBroker(first: true)
    }

    func connectBroker(first: Bool) {
        guard let c = mqtt, !stopping else { return }
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
        guard let c = mqtt, !stopping else { return }
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
        guard mqttRetry == nil, !stopping else { return }
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
        log("gateway: MQTT: connected to \(opts.mqttHost):\(opts.mqttPort)")
        // The gateway's own device (every lamp's via_device) before the lamps.
        publish(HomeAssistant.gatewayConfig(topics: topics))
        publish(topics.gatewayAvailability, HomeAssistant.online, retain: true)
        for t in [topics.homeAssistantStatus, "\(topics.topicPrefix)/+/set", "\(topics.topicPrefix)/+/button1", "\(topics.topicPrefix)/+/button2"] {
            do { try mqtt?.subscribe(topic: t, qos: .atLeastOnce) } catch { log("gateway: MQTT: subscribe \(t): \(error)") }
        }
        // Everything again: the broker may have lost retained messages.
        for d in devices.values where d.ha != nil { announce(d) }
    }

    func brokerLost(_ code: MosquittoCode) {
        guard !stopping else { return }
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
        scheduleBrokerRetry()
    }

    /// A SIGHUP asked for a reconnect: the disconnect that follows is ours.
    var hupReconnect = false

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
        do { _ = try c.publish(topic: topic, payload: payload, qos: qos, retain: retain) } catch { log("gateway: MQTT: publish \(topic): \(error)") }
    }

    /// SIGINT or SIGTERM: publishes `offline` for every device and the
    /// gateway, then sends DISCONNECT so the broker does not also publish the
    /// will, and marks the run a success (Session's clean-up disconnects the
    /// links). The offline messages go at QoS 0: a PUBACK still unread when
    /// the socket closes would make the kernel reset the connection, and the
    /// broker would then treat it as lost and publish the will on top.
    /// - Returns: the error that ends `run()`.
    func stop() -> HCIError {
        stopping = true
        log("gateway: stopping")
        if let c = mqtt, c.state == .connected {
            for d in devices.values { if let ha = d.ha { publish(topics.availability(ha), HomeAssistant.offline, qos: .atMostOnce) } }
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
        s.sigintIsSuccess = true
        s.quietSuccess = true
        return HCIError.interrupted(signal: SIGINT)
    }

    func schedulePeriodic(_ h: HCIHost) {
        _ = h.schedule(afterMs: 500) { [weak self] in
            guard let self else { return }
            self.armAcceptList()
            self.ensureScanning()
            self.schedulePeriodic(h)
        }
    }

    // MARK: state kept by the extensions (GatewayDevices.swift, GatewayCommands.swift)

    var linkCount: Int { devices.values.filter { $0.link != nil }.count }
    /// Learned when the controller refuses a link for want of room.
    var capacity: Int?
    /// How kept devices are reconnected (GatewayAcceptList.swift), per stack.
    var reconnectPath: ReconnectPath = .unknown
    /// Set once this controller was seen to ignore its accept list (kept across resets).
    var acceptListIgnored: String?
    /// An accept-list connect is being started, or cancelled to start again.
    var acceptArming = false
    var acceptNotBefore = Instant.now()
    var acceptBackoff = Backoff(initialMs: 500, maxMs: 30_000)
    /// Kept devices heard while the pending connect waited for them.
    var acceptWatch = AcceptListWatch(deadlineMs: Gateway.acceptIgnoredAfterMs)
}

/// One LED device the gateway looks after.
final class GatewayDevice {
    let address: DeviceAddress
    var name: String?
    var advertised: [BluetoothUUID] = []
    var link: Link?
    var led: ResolvedLED?
    var securer: Securer?
    var ha: HADevice?
    /// What the device has (read back on connect, then what was written).
    var light: LightState?
    /// The latest state asked for and not yet written (commands coalesce here).
    var wanted: LightState?
    /// The state being written now (the base for a partial command meanwhile).
    var inFlight: LightState?
    var commandAt: Instant?
    var writing = false
    /// The link has the `idle` connection parameters.
    var idle = false
    var idleTimer: HostToken?
    var attempts = 0
    /// Paces reconnection: scan with backoff, not a storm.
    var backoff = Backoff(initialMs: 500, maxMs: 30_000)
    /// No connection attempt before this (backoff after a failure or a disconnection).
    var notBefore = Instant.now()
    /// Beyond the links the controller holds: connected only to write.
    var onDemand = false
    var plannedDisconnect = false
    var releaseTimer: HostToken?
    var connectedAt: Instant?
    /// When its link last went down (the accept list waits for the longest-gone first).
    var downAt: Instant?
    /// A harness button pressed while an on-demand device was not connected.
    var pendingPress: HarnessButton?

    init(address: DeviceAddress) { self.address = address }

    var label: String { name.map { "\($0) (\(address.address))" } ?? address.address.description }
}

extension Instant {
    /// "in 1234 ms" from now, for log lines.
    var msUntilNowString: String { "in \(Instant.now().msUntil(self)) ms" }
}
#endif
