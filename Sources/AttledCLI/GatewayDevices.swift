#if ATTLED_GATEWAY
#if canImport(Glibc)
import Glibc
#endif
import Attled
import AttledLED
import BLEMQTT

/// The gateway's devices: which are adopted, connecting (one attempt at a
/// time), setting up, going down, and the ones connected on demand.
extension Gateway {

    // MARK: devices

    /// Whether the gateway adopts `d`: one of the targets, or (without
    /// targets) any device advertising a known LED service.
    func wanted(_ d: DiscoveredDevice) -> Bool {
        if opts.names.isEmpty && opts.addresses.isEmpty { return LEDProfile.detect(d.serviceUUIDs) != nil }
        if opts.addresses.contains(where: { $0.address == d.address.address }) { return true }
        guard let n = d.name else { return false }
        return opts.names.contains(n)
    }

    func heard(_ d: DiscoveredDevice) {
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


    /// How many links may be kept up: `--max-links`, or what the controller
    /// was found to hold, less one slot kept free for devices connected on
    /// demand once there are any.
    var permanentLimit: Int? {
        guard let l = slotLimit, devices.values.contains(where: { $0.onDemand }) else { return slotLimit }
        return max(0, l - 1)
    }

    /// The slots for links at all (permanent and on demand).
    var slotLimit: Int? {
        if let c = capacity { return min(opts.maxLinks ?? c, c) }
        return opts.maxLinks
    }

    func tryConnect(_ dev: GatewayDevice) {
        guard let stack = s.stack, connecting == nil, dev.link == nil else { return }
        // A kept device comes back through the pending accept-list connect.
        if reconnectsFromAcceptList(dev), heardWhileAccepting(dev) { return armAcceptList() }
        guard Instant.now() >= dev.notBefore else { return }
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
        // The controller initiates one connection at a time: this one goes
        // after the accept-list connect, which is armed again once it is done.
        if stack.central.acceptListConnect != nil { stack.central.cancelAcceptListConnect() }
        // One connection attempt at a time, and no scan beside it.
        let scanStop: Future<Void> = stack.central.isScanning ? stack.central.stopScanning() : .done
        scanStop.recover { _ in .done }
            .flatMap { () -> Future<Link?> in
                // A connection given up earlier may have completed while the scan
                // stopped (adopted by onUnrequestedConnection): no second one.
                if dev.link != nil { return Future(value: nil) }
                return stack.startConnect(to: dev.address, timeoutMs: 3000, parameters: .oneShot).map { Optional($0) }
            }
            .whenComplete { [weak self] r in
                guard let self else { return }
                self.connecting = nil
                switch r {
                case .success(let link): if let link { self.linkUp(dev, link) }
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
    func becomeOnDemand(_ dev: GatewayDevice, because why: String) {
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
    func makeRoomForOnDemand() {
        guard let limit = permanentLimit, linkCount > limit else { return }
        let held = devices.values.filter { $0.link != nil && !$0.onDemand }.sorted { ($0.connectedAt ?? Instant.now()) > ($1.connectedAt ?? Instant.now()) }
        for dev in held.prefix(linkCount - limit) {
            becomeOnDemand(dev, because: "a slot is kept free for on-demand writes")
            dev.plannedDisconnect = true
            _ = dev.link?.startDisconnect()
        }
    }

    /// An on-demand link is let go once idle.
    func releaseWhenIdle(_ dev: GatewayDevice) {
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
    func noteControllerError(_ e: any Error) {
        if case HCIError.commandTimeout = e, resetReason == nil { resetReason = "\(e)" }
    }

    /// Scans while some wanted device may be out there and no connection is pending.
    func ensureScanning() {
        guard let stack = s.stack, !stopping, connecting == nil, !stack.central.isScanning, !scanPausedForAcceptList else { return }
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

    func linkUp(_ dev: GatewayDevice, _ link: Link) {
        dev.link = link
        link.bearer.transactionTimeoutMs = 3000
        log("gateway: \(dev.label): connected (handle 0x\(Hex.int(link.connection.handle, width: 4)))")
        let report = Report(prefix: "gateway: \(dev.label): ", quiet: !(opts.trace != .off))
        let sec = Securer(policy: opts.securityPolicy, store: s.bonds, report: report)
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
    func prepare(_ dev: GatewayDevice, _ link: Link, _ led: ResolvedLED, _ sec: Securer) -> Future<Void> {
        let kind: HADevice.Kind = led.profile.isRGB ? .light : .harness
        do { dev.ha = try HADevice(id: dev.address.address.description, name: dev.name ?? dev.address.address.description, model: led.profile.name, kind: kind) }
        catch { return Future(error: RunError("\(error)", .failure)) }
        if led.profile.isRGB {
            guard led.rgb?.allSatisfy({ $0.properties.contains(.read) }) == true else { return .done }
            return sec.retrying(link) { LEDOperations.startReadColour(link.gatt, led) }.map { rgb in
                // The state reports what the device has: a device that lost
                // power (or was set by someone else) is believed, not the
                // state from before; one that still shows it keeps its split
                // into colour and brightness.
                let has = LightColor(rgb.r, rgb.g, rgb.b)
                if dev.light?.deviceColor != has { dev.light = LightState.readBack(has) }
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
    func announce(_ dev: GatewayDevice) {
        guard let ha = dev.ha else { return }
        for m in HomeAssistant.configs(ha, topics: topics) { publish(m) }
        publish(topics.availability(ha), dev.link != nil && dev.led != nil ? HomeAssistant.online : HomeAssistant.offline, retain: true)
        if let l = dev.light { publish(l.stateMessage(ha, topics: topics), qos: .atMostOnce) }
    }

    func linkDown(_ peer: DeviceAddress, reason: HCIStatus?, force: Bool = false) {
        guard let dev = devices[peer.address], dev.link != nil else { return }
        if force { dev.link?.l2cap.close() }
        dev.link = nil
        dev.led = nil
        dev.writing = false
        dev.idle = false
        if let t = dev.idleTimer, let h = s.host { h.cancel(t) }
        dev.idleTimer = nil
        dev.notBefore = Instant.now().adding(ms: dev.backoff.next())
        dev.downAt = Instant.now()
        // From the accept list a device that was ready comes back at once:
        // a pending connect costs nothing until it advertises (backoff only
        // after a setup that failed).
        if reconnectsFromAcceptList(dev), dev.attempts == 0 { dev.notBefore = Instant.now() }
        if dev.plannedDisconnect {
            // An on-demand link let go: the device stays available.
            dev.plannedDisconnect = false
            dev.notBefore = Instant.now()
            log("gateway: \(dev.label): released (on demand)")
            ensureScanning()
            return
        }
        if stopping {
            // Its offline message went out before the broker was left.
            log("gateway: \(dev.label): disconnected (stopping)")
            return
        }
        log("gateway: \(dev.label): disconnected; unavailable until it advertises again")
        if let ha = dev.ha { publish(topics.availability(ha), HomeAssistant.offline, retain: true) }
        armAcceptList()
        ensureScanning()
    }

}
#endif
