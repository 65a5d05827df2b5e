#if ATTLED_GATEWAY
#if canImport(Glibc)
import Glibc
#endif
import Attled
import BLEMQTT
import CEpoll

/// `attled gateway`: keeps links to the LED devices around it and bridges
/// them to an MQTT broker with Home Assistant's discovery convention.
///
/// One thread, one loop: the HCI host's `pump`. The broker's socket and the
/// signal pipe are registered in an epoll set whose descriptor is the loop's
/// wake-up source, so a command from the broker is handled as soon as it
/// arrives and a write to one device never waits for another device or for
/// the broker.
final class Gateway {
    let s: Session
    let opts: Options
    let topics: HATopics
    let resolver: LEDResolver
    private(set) var mqtt: MQTTClient?
    private let epfd: Int32
    private var registeredFD: Int32 = -1
    private var registeredEvents: UInt32 = 0
    private var mqttBackoff = Backoff(initialMs: 500, maxMs: 30_000)
    private var mqttRetry: HostToken?
    private var devices: [BDAddress: GatewayDevice] = [:]
    private var connecting: GatewayDevice?
    private var stopping = false
    /// The loop's wake-up source: the epoll set (signals and the broker).
    var wake: Wake {
        Wake(fd: epfd, drain: { [weak self] in self?.drainEpoll() }, interruption: { SignalWatch.received })
    }

    /// - Throws: `RunError` (usage) for bad prefixes or an unreadable password file.
    init(_ s: Session) throws {
        self.s = s
        self.opts = s.opts
        do {
            topics = try HATopics(topicPrefix: opts.topicPrefix, discoveryPrefix: opts.discoveryPrefix, gatewayID: opts.gatewayID)
        } catch {
            throw RunError("\(error)", .usage)
        }
        resolver = LEDResolver(cache: s.cache, explicitProfile: nil, trustCache: false)
        // Read when used: Session.open may move the bonds after dropping privileges.
        resolver.identity = { [weak s] a in s?.bonds.bond(for: a)?.identity ?? a }
        epfd = epoll_create1(Int32(EPOLL_CLOEXEC))
        if epfd < 0 { throw RunError("epoll_create1: \(String(cString: strerror(errno)))", .failure) }
        // Session.run installed the signal pipe before making the gateway.
        if SignalWatch.wakeFD >= 0 { add(SignalWatch.wakeFD, UInt32(EPOLLIN.rawValue)) }
        SignalWatch.installHangup()
    }

    deinit { close(epfd) }

    // MARK: run

    /// Set when the controller stopped answering a command: the loop ends
    /// and the controller is reset and initialised again.
    private var resetReason: String?
    /// The last scan failure logged (logged again only when it changes).
    private var scanError: String?
    private var controllerBackoff = Backoff(initialMs: 500, maxMs: 30_000)

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
                stopping = true
                log("gateway: stopping")
                shutdownMQTT(stack.host)
                s.sigintIsSuccess = true
                s.quietSuccess = true
                throw HCIError.interrupted(signal: SIGINT)
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
    private func attach(_ stack: BLEStack) {
        stack.central.onDeviceUpdate = { [weak self] d, _ in self?.heard(d) }
        stack.central.onDisconnection = { [weak self] c in self?.linkDown(c.peer, reason: nil) }
        // A connection that completes after its attempt was given up (a
        // controller that kept it pending, as Bumble's does after a cancel):
        // adopt it when it is a device we want and have no link to.
        stack.central.onUnrequestedConnection = { [weak self] c in
            guard let self, let dev = self.devices[c.peer.address], dev.link == nil, self.connecting !== dev else { return false }
            self.log("gateway: \(dev.label): a connection given up earlier completed: adopting it")
            self.linkUp(dev, stack.attach(c))
            return true
        }
        mqttRetry = nil
        if let c = mqtt, c.state == .disconnected { scheduleBrokerRetry() }
        schedulePeriodic(stack.host)
        ensureScanning()
    }

    /// Drops the old stack (every link is gone with it), then reopens the
    /// transport and initialises the controller, with backoff, serving the
    /// broker meanwhile.
    private func recover(_ old: BLEStack) throws -> BLEStack {
        for d in devices.values where d.link != nil { linkDown(d.address, reason: nil, force: true) }
        connecting = nil
        old.central.onDeviceUpdate = nil
        old.central.onDisconnection = nil
        old.central.onUnrequestedConnection = nil
        // close() disconnects what it still can (after a Hardware Error too); a
        // controller that stopped answering costs each command 500 ms at most.
        old.host.commandTimeoutMs = 500
        old.close()
        s.stack = nil
        s.transport = nil
        let spec = opts.transport ?? .userChannel(index: 0)
        while true {
            let ms = controllerBackoff.next()
            try serveBrokerOnly(ms: ms)
            do {
                let t = try spec.open()
                let observers: [PacketObserver] = [s.tracer as PacketObserver?, s.snoop as PacketObserver?].compactMap { $0 }
                let stack: BLEStack
                do { stack = try BLEStack(transport: t, wake: wake, observers: observers) } catch { t.close(); throw error }
                stack.central.useExtendedCommands = opts.extendedScan && stack.info.supportsExtendedScanning
                s.transport = t
                s.stack = stack
                controllerBackoff.reset()
                log("gateway: controller: \(t.name) initialised again")
                return stack
            } catch HCIError.interrupted {
                throw HCIError.interrupted(signal: SIGINT)
            } catch {
                log("gateway: controller: \(classify(error).message); retrying")
            }
        }
    }

    /// Waits `ms` with no controller, still serving the broker (and signals).
    private func serveBrokerOnly(ms: Int) throws {
        let until = Instant.now().adding(ms: ms)
        var lastMisc = Instant.now()
        while Instant.now() < until {
            if SignalWatch.received != nil {
                stopping = true
                log("gateway: stopping")
                if let c = mqtt, c.state == .connected {
                    for d in devices.values { if let ha = d.ha { publishQoS0(c, topics.availability(ha), HomeAssistant.offline) } }
                    publishQoS0(c, topics.gatewayAvailability, HomeAssistant.offline)
                    _ = c.runUntil(Instant.now().adding(ms: 500)) { !c.wantsWrite }
                    try? c.disconnect()
                    _ = c.runUntil(Instant.now().adding(ms: 1000)) { c.socket < 0 || c.state != .connected }
                }
                s.sigintIsSuccess = true
                s.quietSuccess = true
                throw HCIError.interrupted(signal: SIGINT)
            }
            var ev = [epoll_event](repeating: epoll_event(), count: 1)
            let slice = Int32(max(1, min(100, Instant.now().msUntil(until))))
            if epoll_wait(epfd, &ev, 1, slice) > 0 { drainEpoll() }
            if lastMisc.msUntil(Instant.now()) >= 500 {
                lastMisc = Instant.now()
                mqtt?.periodic()
                if let c = mqtt, c.state == .disconnected, mqttRetry == nil { connectBroker(first: false) }
                syncEpoll()
            }
        }
    }

    func log(_ line: String) { Console.err("attled: " + line) }

    // MARK: MQTT

    private func startMQTT() throws {
        var password: String? = nil
        if let f = opts.mqttPasswordFile {
            guard let raw = FileDescriptor.readFile(f, limit: 4096) else {
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
        c.onConnect = { [weak self] ack in self?.brokerConnected(ack) }
        c.onDisconnect = { [weak self] code in self?.brokerLost(code) }
        c.onMessage = { [weak self] topic, payload, _ in self?.message(topic, payload) }
        connectBroker(first: true)
    }

    private func connectBroker(first: Bool) {
        guard let c = mqtt, !stopping else { return }
        do {
            if first { try c.connect() } else { try c.reconnect() }
        } catch {
            log("gateway: MQTT: \(error)")
            scheduleBrokerRetry()
        }
        syncEpoll()
    }

    /// SIGHUP: drop the broker connection and connect again at once (after
    /// the broker's address moved, or its credentials were rotated).
    private func hangup() {
        guard let c = mqtt, !stopping else { return }
        log("gateway: SIGHUP: reconnecting to the broker")
        if let t = mqttRetry, let h = s.host { h.cancel(t) }
        mqttRetry = nil
        mqttBackoff.reset()
        if c.state == .connected {
            // Clean: the broker does not publish the will; onDisconnect then reconnects.
            hupReconnect = true
            try? c.disconnect()
            // Let the DISCONNECT go out (bounded; a SIGHUP is rare), then connect again.
            _ = c.runUntil(Instant.now().adding(ms: 500)) { c.state != .connected || c.socket < 0 }
            if hupReconnect {
                // The disconnect was never reported: connect again anyway.
                hupReconnect = false
                connectBroker(first: false)
            }
            syncEpoll()
        } else {
            connectBroker(first: false)
        }
    }

    private func scheduleBrokerRetry() {
        guard let h = s.host, mqttRetry == nil, !stopping else { return }
        let ms = mqttBackoff.next()
        log("gateway: MQTT: reconnecting in \(ms) ms")
        mqttRetry = h.schedule(afterMs: ms) { [weak self] in
            self?.mqttRetry = nil
            self?.connectBroker(first: false)
        }
    }

    private func brokerConnected(_ ack: MQTTConnack) {
        guard ack.isAccepted else {
            log("gateway: MQTT: the broker refused the connection: \(ack)")
            scheduleBrokerRetry()
            return
        }
        mqttBackoff.reset()
        log("gateway: MQTT: connected to \(opts.mqttHost):\(opts.mqttPort)")
        publish(topics.gatewayAvailability, HomeAssistant.online, retain: true)
        for t in [topics.homeAssistantStatus, "\(topics.topicPrefix)/+/set", "\(topics.topicPrefix)/+/button1", "\(topics.topicPrefix)/+/button2"] {
            do { try mqtt?.subscribe(topic: t, qos: .atLeastOnce) } catch { log("gateway: MQTT: subscribe \(t): \(error)") }
        }
        // Everything again: the broker may have lost retained messages.
        for d in devices.values where d.ha != nil { announce(d) }
        syncEpoll()
    }

    private func brokerLost(_ code: MosquittoCode) {
        guard !stopping else { return }
        syncEpoll()
        if hupReconnect {
            // Not from inside libmosquitto's callback: it still closes the old
            // connection after this returns. Next turn of the loop.
            hupReconnect = false
            if let h = s.host {
                mqttRetry = h.schedule(afterMs: 0) { [weak self] in
                    self?.mqttRetry = nil
                    self?.connectBroker(first: false)
                }
            }
            return
        }
        log("gateway: MQTT: connection lost (\(code))")
        scheduleBrokerRetry()
    }

    /// A SIGHUP asked for a reconnect: the disconnect that follows is ours.
    private var hupReconnect = false

    private func publish(_ topic: String, _ text: String, retain: Bool) {
        guard let c = mqtt, c.state == .connected else { return }
        do { _ = try c.publish(topic: topic, text: text, qos: .atLeastOnce, retain: retain) } catch { log("gateway: MQTT: publish \(topic): \(error)") }
        syncEpoll()
    }

    /// Publishes `m`: QoS 1 for configs and availability, QoS 0 for states,
    /// whose PUBACK would only add a round trip (and, with Nagle on the
    /// broker's side, hold the next command back by a delayed ACK).
    private func publish(_ m: HAMessage, qos: MQTTQoS = .atLeastOnce) {
        guard let c = mqtt, c.state == .connected else { return }
        do { _ = try c.publish(topic: m.topic, payload: m.payloadBytes, qos: qos, retain: m.retain) } catch { log("gateway: MQTT: publish \(m.topic): \(error)") }
        syncEpoll()
    }

    /// Publishes `offline` for every device and the gateway, then sends
    /// DISCONNECT so the broker does not also publish the will. The offline
    /// messages go at QoS 0: a PUBACK still unread when the socket closes
    /// would make the kernel reset the connection, and the broker would then
    /// treat it as lost and publish the will on top.
    private func shutdownMQTT(_ h: HCIHost) {
        guard let c = mqtt, c.state == .connected else { return }
        for d in devices.values { if let ha = d.ha { publishQoS0(c, topics.availability(ha), HomeAssistant.offline) } }
        publishQoS0(c, topics.gatewayAvailability, HomeAssistant.offline)
        _ = c.runUntil(Instant.now().adding(ms: 500)) { !c.wantsWrite }
        try? c.disconnect()
        // Let libmosquitto write the DISCONNECT (bounded), then take the
        // broker's socket out of the wake-up set: the clean-up that follows
        // waits for the controller only.
        _ = c.runUntil(Instant.now().adding(ms: 1000)) { c.socket < 0 || c.state != .connected }
        if registeredFD >= 0 { _ = epoll_ctl(epfd, EPOLL_CTL_DEL, registeredFD, nil); registeredFD = -1 }
    }

    private func publishQoS0(_ c: MQTTClient, _ topic: String, _ text: String) {
        do { _ = try c.publish(topic: topic, text: text, qos: .atMostOnce, retain: true) } catch { log("gateway: MQTT: publish \(topic): \(error)") }
    }

    // MARK: the epoll set

    private func add(_ fd: Int32, _ events: UInt32) {
        var ev = epoll_event(events: events, data: epoll_data_t(fd: fd))
        _ = epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev)
    }

    /// Keeps the broker's socket (it changes on reconnect) and its POLLOUT
    /// interest in the epoll set.
    func syncEpoll() {
        let fd = stopping ? -1 : (mqtt?.socket ?? -1)
        let want = UInt32(EPOLLIN.rawValue) | ((mqtt?.wantsWrite ?? false) ? UInt32(EPOLLOUT.rawValue) : 0)
        if fd != registeredFD {
            if registeredFD >= 0 { _ = epoll_ctl(epfd, EPOLL_CTL_DEL, registeredFD, nil) }
            registeredFD = fd
            registeredEvents = 0
            if fd >= 0 { add(fd, want); registeredEvents = want }
        } else if fd >= 0 && want != registeredEvents {
            var ev = epoll_event(events: want, data: epoll_data_t(fd: fd))
            _ = epoll_ctl(epfd, EPOLL_CTL_MOD, fd, &ev)
            registeredEvents = want
        }
    }

    private func drainEpoll() {
        var events = [epoll_event](repeating: epoll_event(), count: 8)
        let n = epoll_wait(epfd, &events, 8, 0)
        guard n > 0 else { return }
        for e in events.prefix(Int(n)) {
            let fd = e.data.fd
            if fd == SignalWatch.wakeFD {
                SignalWatch.drain()
                if SignalWatch.takeHangup() { hangup() }
                continue
            }
            guard let c = mqtt, fd == c.socket else { continue }
            if e.events & UInt32(EPOLLIN.rawValue | EPOLLERR.rawValue | EPOLLHUP.rawValue) != 0 { c.handleReadable() }
            if e.events & UInt32(EPOLLOUT.rawValue) != 0, c.socket >= 0 { c.handleWritable() }
        }
        syncEpoll()
    }

    private func schedulePeriodic(_ h: HCIHost) {
        _ = h.schedule(afterMs: 500) { [weak self] in
            guard let self else { return }
            self.mqtt?.periodic()
            self.syncEpoll()
            self.ensureScanning()
            self.retryHeard()
            self.schedulePeriodic(h)
        }
    }

    // MARK: devices

    /// Whether the gateway adopts `d`: one of the targets, or (without
    /// targets) any device advertising a known LED service.
    private func wanted(_ d: DiscoveredDevice) -> Bool {
        if opts.names.isEmpty && opts.addresses.isEmpty { return LEDProfile.detect(d.serviceUUIDs) != nil }
        if opts.addresses.contains(where: { $0.address == d.address.address }) { return true }
        guard let n = d.name else { return false }
        return opts.names.contains(n)
    }

    private func heard(_ d: DiscoveredDevice) {
        guard !stopping, d.connectable, wanted(d) else { return }
        let dev = devices[d.address.address] ?? {
            let g = GatewayDevice(address: d.address)
            devices[d.address.address] = g
            return g
        }()
        if let n = d.name { dev.name = n }
        dev.advertised = d.serviceUUIDs
        tryConnect(dev)
    }

    /// Devices without a link whose backoff is over and that were heard
    /// again since they went down: the scan reports a known device only when
    /// its advertising data changes, so the periodic tick looks at
    /// `lastSeen` instead.
    private func retryHeard() {
        guard let stack = s.stack, !stopping, connecting == nil else { return }
        let now = Instant.now()
        for dev in devices.values where dev.link == nil && now >= dev.notBefore {
            guard let d = stack.central.devices[dev.address], d.lastSeen.adding(ms: 1000) >= now,
                  dev.downAt.map({ d.lastSeen > $0 }) ?? true else { continue }
            tryConnect(dev)
            if connecting != nil { return }
        }
    }

    private var linkCount: Int { devices.values.filter { $0.link != nil }.count }

    /// How many links may be kept up: `--max-links`, or what the controller
    /// was found to hold, less one slot kept free for devices connected on
    /// demand once there are any.
    private var permanentLimit: Int? {
        var limit = opts.maxLinks
        if let c = capacity { limit = min(limit ?? c, c) }
        if let l = limit, devices.values.contains(where: { $0.onDemand }) { return max(0, l - 1) }
        return limit
    }

    /// The slots for links at all (permanent and on demand).
    private var slotLimit: Int? {
        if let c = capacity { return min(opts.maxLinks ?? c, c) }
        return opts.maxLinks
    }

    private func tryConnect(_ dev: GatewayDevice) {
        guard let stack = s.stack, connecting == nil, dev.link == nil, Instant.now() >= dev.notBefore else { return }
        if dev.onDemand {
            // Only when there is something to write, and a slot.
            guard dev.wanted != nil || dev.pendingPress != nil else { return }
            if let l = slotLimit, linkCount >= l { return }
        } else if let l = permanentLimit, linkCount >= l {
            if slotLimit != nil || opts.maxLinks != nil {
                becomeOnDemand(dev, because: "\(linkCount) link(s) are all the controller or --max-links allow")
            }
            return
        }
        connecting = dev
        dev.attempts += 1
        // One connection attempt at a time, and no scan beside it.
        let scanStop: Future<Void> = stack.central.isScanning ? stack.central.stopScanning() : .done
        scanStop.recover { _ in .done }
            .flatMap { stack.startConnect(to: dev.address, timeoutMs: 3000, parameters: .oneShot) }
            .whenComplete { [weak self] r in
                guard let self else { return }
                self.connecting = nil
                switch r {
                case .success(let link): self.linkUp(dev, link)
                case .failure(let e):
                    self.noteControllerError(e)
                    if Self.isFull(e), self.linkCount > 0 {
                        // The controller holds no more links: that is its capacity.
                        self.capacity = self.linkCount
                        self.log("gateway: controller: it holds \(self.linkCount) link(s) (\(e))")
                        self.becomeOnDemand(dev, because: "the controller is full")
                        self.makeRoomForOnDemand()
                        break
                    }
                    dev.notBefore = Instant.now().adding(ms: dev.backoff.next())
                    self.log("gateway: \(dev.label): connect failed (\(e)); next try not before \(dev.notBefore.msUntilNowString)")
                }
                self.ensureScanning()
            }
    }

    /// Learned when the controller refuses a link for want of room.
    private var capacity: Int?

    /// A refusal that means "no room for another link": Connection Limit
    /// Exceeded (0x09), Memory Capacity Exceeded (0x07), Connection Rejected
    /// due to Limited Resources (0x0D).
    static func isFull(_ e: any Error) -> Bool {
        var st: HCIStatus?
        if case let HCIError.commandFailed(_, s) = e { st = s }
        if case let GAPError.connectFailed(_, s) = e { st = s }
        guard let st else { return false }
        return [0x07, 0x09, 0x0D].contains(st.rawValue)
    }

    /// Devices beyond the links the controller holds are connected when a
    /// command comes, written, and disconnected after a short idle.
    private func becomeOnDemand(_ dev: GatewayDevice, because why: String) {
        guard !dev.onDemand else { return }
        dev.onDemand = true
        log("gateway: \(dev.label): connected on demand from now on (\(why))")
        if dev.ha == nil, let p = LEDProfile.detect(dev.advertised) {
            dev.ha = try? HADevice(id: dev.address.address.description, name: dev.name ?? dev.address.address.description,
                                   model: p.name, kind: p.isRGB ? .light : .harness)
        }
        if let ha = dev.ha {
            for m in HomeAssistant.configs(ha, topics: topics) { publish(m) }
            publish(topics.availability(ha), HomeAssistant.online, retain: true)
        }
    }

    /// Keeps one slot free for the devices connected on demand: the most
    /// recently connected permanent link is released and joins them.
    private func makeRoomForOnDemand() {
        guard let limit = permanentLimit, linkCount > limit else { return }
        let held = devices.values.filter { $0.link != nil && !$0.onDemand }.sorted { ($0.connectedAt ?? Instant.now()) > ($1.connectedAt ?? Instant.now()) }
        for dev in held.prefix(linkCount - limit) {
            becomeOnDemand(dev, because: "a slot is kept free for on-demand writes")
            dev.plannedDisconnect = true
            _ = dev.link?.startDisconnect()
        }
    }

    /// An on-demand link is let go once idle.
    private func releaseWhenIdle(_ dev: GatewayDevice) {
        guard dev.onDemand, let h = s.host else { return }
        if let t = dev.releaseTimer { h.cancel(t) }
        dev.releaseTimer = h.schedule(afterMs: Self.onDemandIdleMs) { [weak self] in
            dev.releaseTimer = nil
            guard let self, dev.onDemand, !dev.writing, dev.wanted == nil, let link = dev.link else { return }
            dev.plannedDisconnect = true
            self.log("gateway: \(dev.label): idle: releasing the on-demand link")
            _ = link.startDisconnect()
        }
    }

    /// How long an on-demand link stays up after its last write.
    static let onDemandIdleMs = 2_000

    /// A command the controller never answered: reset it (the loop ends and
    /// `recover` runs). Rejections (Command Disallowed after a cancel, say)
    /// are not: the attempt is retried with backoff.
    private func noteControllerError(_ e: any Error) {
        if case HCIError.commandTimeout = e, resetReason == nil { resetReason = "\(e)" }
    }

    /// Scans while some wanted device may be out there and no connection is pending.
    func ensureScanning() {
        guard let stack = s.stack, !stopping, connecting == nil, !stack.central.isScanning else { return }
        if let max = opts.maxLinks, linkCount >= max { return }
        stack.central.startScanning(active: true).whenComplete { [weak self] r in
            guard let self else { return }
            guard case .failure(let e) = r else { self.scanError = nil; return }
            if "\(e)" != self.scanError { self.log("gateway: scan: \(e)") }  // once per kind, not every tick
            self.scanError = "\(e)"
            self.noteControllerError(e)
            // A controller still scanning for a host that went away (Bumble's
            // keeps its scan across HCI Reset): stop it; the next tick scans again.
            if case HCIError.commandFailed(_, .commandDisallowed) = e {
                _ = stack.host.submit(.leSetScanEnable(false, filterDuplicates: false))
            }
        }
    }

    private func linkUp(_ dev: GatewayDevice, _ link: Link) {
        dev.link = link
        link.bearer.transactionTimeoutMs = 3000
        log("gateway: \(dev.label): connected (handle 0x\(Hex.int(link.connection.handle, width: 4)))")
        let report = Report(prefix: "gateway: \(dev.label): ", quiet: !(opts.trace != .off))
        let sec = Securer(opts: opts, store: s.bonds, report: report)
        sec.attach(link)
        dev.securer = sec
        sec.upFront(link)
            .flatMap { [self] in resolver.start(link.gatt, peer: link.peer, advertised: dev.advertised, deviceName: dev.label, report: report) }
            .flatMap { [self] (led, _) -> Future<Void> in
                dev.led = led
                return prepare(dev, link, led, sec)
            }
            .whenComplete { [weak self] r in
                guard let self else { return }
                switch r {
                case .success:
                    dev.attempts = 0
                    dev.backoff.reset()
                    dev.connectedAt = Instant.now()
                    self.armIdle(dev)
                    if let b = dev.pendingPress { dev.pendingPress = nil; self.press(dev, b) }
                    self.releaseWhenIdle(dev)
                    self.log("gateway: \(dev.label): ready (\(dev.led?.profile.name ?? "?"))")
                    self.announce(dev)
                    self.flush(dev)
                case .failure(let e):
                    self.log("gateway: \(dev.label): setup failed: \(classify(e).message); disconnecting")
                    _ = link.startDisconnect()
                }
            }
    }

    /// Reads the colour back (lights) or subscribes to notifications (harness).
    private func prepare(_ dev: GatewayDevice, _ link: Link, _ led: ResolvedLED, _ sec: Securer) -> Future<Void> {
        let kind: HADevice.Kind = led.profile.isRGB ? .light : .harness
        do { dev.ha = try HADevice(id: dev.address.address.description, name: dev.name ?? dev.address.address.description, model: led.profile.name, kind: kind) }
        catch { return Future(error: RunError("\(error)", .failure)) }
        if led.profile.isRGB {
            guard led.rgb?.allSatisfy({ $0.properties.contains(.read) }) == true else { return .done }
            return sec.retrying(link) { LEDOperations.startReadColour(link.gatt, led) }.map { rgb in
                if dev.light == nil { dev.light = LightState.readBack(LightColor(rgb.r, rgb.g, rgb.b)) }
            }
        }
        guard let n = led.notifier, n.properties.contains(.notify) || n.properties.contains(.indicate) else { return .done }
        link.bearer.onNotification = { [weak self] hv in
            guard let self, hv.handle == n.valueHandle, let ha = dev.ha else { return }
            self.publish(self.topics.notifications(ha), HomeAssistant.notificationText(hv.value), retain: false)
        }
        return sec.retrying(link) { link.gatt.startSubscribe(n, indications: !n.properties.contains(.notify)) }
    }

    /// Discovery configs, availability and state of a ready device.
    private func announce(_ dev: GatewayDevice) {
        guard let ha = dev.ha else { return }
        for m in HomeAssistant.configs(ha, topics: topics) { publish(m) }
        publish(topics.availability(ha), dev.link != nil && dev.led != nil ? HomeAssistant.online : HomeAssistant.offline, retain: true)
        if let l = dev.light { publish(l.stateMessage(ha, topics: topics), qos: .atMostOnce) }
    }

    private func linkDown(_ peer: DeviceAddress, reason: HCIStatus?, force: Bool = false) {
        guard let dev = devices[peer.address], dev.link != nil else { return }
        if force { dev.link?.l2cap.close() }
        dev.link = nil
        dev.led = nil
        dev.writing = false
        dev.idle = false
        dev.downAt = Instant.now()
        if let t = dev.idleTimer, let h = s.host { h.cancel(t) }
        dev.idleTimer = nil
        dev.notBefore = Instant.now().adding(ms: dev.backoff.next())
        if dev.plannedDisconnect {
            // An on-demand link let go: the device stays available.
            dev.plannedDisconnect = false
            dev.notBefore = Instant.now()
            log("gateway: \(dev.label): released (on demand)")
            ensureScanning()
            return
        }
        log("gateway: \(dev.label): disconnected; unavailable until it advertises again")
        if let ha = dev.ha { publish(topics.availability(ha), HomeAssistant.offline, retain: true) }
        ensureScanning()
    }

    // MARK: connection interval policy (PROTOCOL.md, "Connection parameters")

    /// A link quiet for this long moves to the `idle` parameters.
    static let idleAfterMs = 10_000

    /// (Re)starts the quiet timer; when it fires, LE Connection Update to `idle`.
    private func armIdle(_ dev: GatewayDevice) {
        guard let h = s.host else { return }
        if let t = dev.idleTimer { h.cancel(t) }
        dev.idleTimer = h.schedule(afterMs: Self.idleAfterMs) { [weak self] in
            dev.idleTimer = nil
            self?.setInterval(dev, idle: true)
        }
    }

    /// Asks the controller for the `idle` or `oneShot` parameters; writes go on meanwhile.
    private func setInterval(_ dev: GatewayDevice, idle: Bool) {
        guard let link = dev.link, let h = s.host, dev.idle != idle else { return }
        dev.idle = idle
        let p: ConnectionParameters = idle ? .idle : .oneShot
        h.submit(LEConnectionUpdate(handle: link.connection.handle, parameters: p).command).whenFailure { [weak self] e in
            self?.log("gateway: \(dev.label): connection update to \(idle ? "idle" : "active") parameters refused: \(e)")
        }
        if opts.trace != .off { log("gateway: \(dev.label): \(idle ? "quiet: relaxing the connection interval" : "active: short connection interval")") }
    }

    // MARK: commands

    private func message(_ topic: String, _ payload: [UInt8]) {
        if topic == topics.homeAssistantStatus {
            if HomeAssistant.isBirth(payload) {
                log("gateway: Home Assistant is online: publishing the discovery configs again")
                publish(topics.gatewayAvailability, HomeAssistant.online, retain: true)
                for d in devices.values where d.ha != nil { announce(d) }
            }
            return
        }
        guard let dev = devices.values.first(where: { d in d.ha.map { topic.hasPrefix(topics.base($0) + "/") } ?? false }),
              let ha = dev.ha else {
            log("gateway: ignored a message on \(topic): no such device")
            return
        }
        if topic == topics.command(ha) {
            guard ha.kind == .light else { return }
            let cmd: LightCommand
            do { cmd = try LightCommand.parse(payload) } catch {
                log("gateway: \(dev.label): ignored a command: \(error)")
                return
            }
            let base = dev.wanted ?? dev.light ?? .initial
            dev.wanted = base.applying(cmd)
            dev.commandAt = Instant.now()
            flush(dev)
        } else if let button = HomeAssistant.buttonPress(topic: topic, payload: payload, device: ha, topics: topics) {
            press(dev, button)
        }
    }

    /// Writes the latest wanted state, one write in flight per device.
    private func flush(_ dev: GatewayDevice) {
        if dev.onDemand, dev.link == nil, dev.wanted != nil { tryConnect(dev); return }
        guard let link = dev.link, let led = dev.led, !dev.writing, let want = dev.wanted, let ha = dev.ha else { return }
        setInterval(dev, idle: false)
        armIdle(dev)
        dev.wanted = nil
        dev.writing = true
        let c = want.deviceColor
        let started = dev.commandAt
        let op: () -> Future<Void> = { LEDOperations.startSetColour(link.gatt, led, RGB(c.r, c.g, c.b)).map { _ in } }
        (dev.securer?.retrying(link, op) ?? op()).whenComplete { [weak self] r in
            guard let self else { return }
            dev.writing = false
            switch r {
            case .success:
                dev.light = want
                self.publish(want.stateMessage(ha, topics: self.topics), qos: .atMostOnce)
                self.releaseWhenIdle(dev)
                if self.opts.trace != .off, let t = started {
                    self.log("gateway: \(dev.label): wrote \(c) in \(formatMs(us: Instant.now().usSince(t))) ms after the command")
                }
            case .failure(let e):
                self.log("gateway: \(dev.label): write failed: \(classify(e).message)")
                if dev.wanted == nil { dev.wanted = want } // retried when the link is back
            }
            self.flush(dev)
        }
    }

    private func press(_ dev: GatewayDevice, _ b: HarnessButton) {
        guard let link = dev.link, let led = dev.led, let cmd = led.command, let h = s.host else {
            if dev.onDemand {
                dev.pendingPress = b
                tryConnect(dev)
                return
            }
            log("gateway: \(dev.label): button \(b.rawValue) pressed while not connected: ignored")
            return
        }
        log("gateway: \(dev.label): button \(b.rawValue)")
        setInterval(dev, idle: false)
        armIdle(dev)
        _ = LEDOperations.startWrite(link.gatt, cmd, [b.pressByte])
        _ = h.schedule(afterMs: HarnessButton.holdMs) { [weak self] in
            guard dev.link === link else { return }
            LEDOperations.startWrite(link.gatt, cmd, [b.releaseByte]).whenComplete { r in
                if case .failure(let e) = r { self?.log("gateway: \(dev.label): release of button \(b.rawValue) failed: \(e)") }
                self?.releaseWhenIdle(dev)
            }
        }
    }
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
    /// When the link last went down (a report heard before it is stale).
    var downAt: Instant?
    /// Beyond the links the controller holds: connected only to write.
    var onDemand = false
    var plannedDisconnect = false
    var releaseTimer: HostToken?
    var connectedAt: Instant?
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
