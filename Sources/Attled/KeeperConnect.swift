/// The keeper's connections: which device is adopted, connected (one
/// attempt at a time), set up, let go; the slots the controller holds and the
/// devices connected on demand beyond them; scanning.
extension DeviceKeeper {

    /// A connectable report of a wanted device: adopt it, connect it.
    func heard(_ d: DiscoveredDevice) {
        guard !stopping, d.connectable else { return }
        let dev: KeptDevice
        if let known = devices[d.address.address] {
            guard known.state != .gone else { return }
            dev = known
        } else {
            guard wants(d) else { return }
            dev = adopt(d.address)
        }
        if let n = d.name { dev.name = n }
        dev.advertised = d.serviceUUIDs
        tryConnect(dev)
        // The last target heard while a connect is pending (scanning beside
        // it): nothing is left to find.
        if connecting != nil { stopUnwantedScan() }
    }

    /// How many links may be kept up: `maxLinks`, or what the controller
    /// was found to hold, less one slot kept free for devices connected on
    /// demand once there are any.
    var permanentLimit: Int? {
        guard let l = slotLimit, devices.values.contains(where: { $0.mode == .onDemand }) else { return slotLimit }
        return max(0, l - 1)
    }

    /// The slots for links at all (permanent and on demand).
    var slotLimit: Int? {
        if let c = capacity { return min(policy.maxLinks ?? c, c) }
        return policy.maxLinks
    }

    /// Connects `dev` when the keeper may: no other attempt, no link, its
    /// backoff over, a slot free (on demand: only with work for it).
    func tryConnect(_ dev: KeptDevice) {
        guard let st = stack, !stopping, connecting == nil, dev.link == nil, dev.state != .gone else { return }
        // A kept device comes back through the pending accept-list connect.
        if reconnectsFromAcceptList(dev), heardWhileAccepting(dev) { return armAcceptList() }
        guard Instant.now() >= dev.notBefore else { return }
        if policy.gatherMs > 0 {
            if gathering(dev) { return }
            // The wanted device whose next advertisement comes first goes first.
            if let next = nextByPhase(), next !== dev { return tryConnect(next) }
        }
        if dev.mode == .onDemand {
            guard hasWork(dev) else { return }
            if let l = slotLimit, linkCount >= l { return }
        } else if let l = permanentLimit, linkCount >= l {
            if slotLimit != nil, policy.onDemandBeyondSlots {
                becomeOnDemand(dev, because: "\(linkCount) link(s) are all the controller or --max-links allow")
            }
            return
        }
        connecting = dev
        dev.state = .connecting
        dev.attempts += 1
        // The controller initiates one connection at a time: this one goes
        // after the accept-list connect, which is armed again once it is done.
        if st.central.acceptListConnect != nil { st.central.cancelAcceptListConnect() }
        // One connection attempt at a time. A controller that scans and
        // initiates at once goes on scanning for the devices not yet heard
        // (a scan no longer wanted is stopped after the connect is sent, off
        // the critical path); any other stops scanning first.
        let beside = scansBesideConnect
        let scanStop: Future<Void> = !beside && scanOnOrStarting(st) ? st.central.stopScanning() : .done
        scanStop.recover { _ in .done }
            .flatMap { [policy, deadline, weak self] () -> Future<Link?> in
                var timeoutMs = dev.connectTimeoutMs ?? policy.connectTimeoutMs
                if let d = deadline { timeoutMs = max(1, min(timeoutMs, Instant.now().msUntil(d))) }
                // A connection given up earlier may have completed while the
                // scan stopped (adopted through adoptUnrequested): no second one.
                if dev.link != nil { return Future(value: nil) }
                let f = st.startConnect(to: dev.address, timeoutMs: timeoutMs, parameters: policy.parameters).map { Optional($0) }
                self?.stopUnwantedScan()
                return f
            }
            .whenComplete { [weak self] r in
                guard let self else { return }
                self.connecting = nil
                switch r {
                case .success(let link): if let link { self.linkUp(dev, link) }
                case .failure(let e):
                    self.noteControllerError(e)
                    if Self.isFull(e), self.linkCount > 0, self.policy.onDemandBeyondSlots {
                        // The controller holds no more links: that is its capacity.
                        self.capacity = self.linkCount
                        self.log("controller: it holds \(self.linkCount) link(s) (\(e))")
                        self.becomeOnDemand(dev, because: "the controller is full")
                        self.makeRoomForOnDemand()
                        break
                    }
                    if !self.policy.reconnect {
                        dev.state = .gone
                        self.log("\(dev.label): connect failed (\(e))")
                    } else {
                        dev.state = .backingOff(until: Instant.now().adding(ms: dev.backoff.next()))
                        self.log("\(dev.label): connect failed (\(e)); next try not before \(dev.notBefore.msUntilNowString)")
                    }
                    self.emit(.connectFailed(dev, error: e))
                }
                self.connectNextWanted()
                self.ensureScanning()
            }
    }

    /// A refusal that means "no room for another link": Connection Limit
    /// Exceeded (0x09), Memory Capacity Exceeded (0x07), Connection Rejected
    /// due to Limited Resources (0x0D).
    public static func isFull(_ e: any Error) -> Bool {
        var st: HCIStatus?
        if case let HCIError.commandFailed(_, s) = e { st = s }
        if case let GAPError.connectFailed(_, s) = e { st = s }
        guard let st else { return false }
        return [0x07, 0x09, 0x0D].contains(st.rawValue)
    }

    /// Devices beyond the links the controller holds are connected when
    /// there is work for them, and let go after a short idle.
    func becomeOnDemand(_ dev: KeptDevice, because why: String) {
        guard dev.mode != .onDemand else { return }
        dev.mode = .onDemand
        if dev.link == nil, dev.state != .connecting { dev.state = .idleOnDemand }
        log("\(dev.label): connected on demand from now on (\(why))")
        emit(.becameOnDemand(dev, because: why))
    }

    /// Keeps one slot free for the devices connected on demand: the most
    /// recently connected kept link is released and joins them.
    func makeRoomForOnDemand() {
        guard let limit = permanentLimit, linkCount > limit else { return }
        let now = Instant.now()
        let held = devices.values.filter { $0.link != nil && $0.mode == .kept }.sorted { ($0.connectedAt ?? now) > ($1.connectedAt ?? now) }
        for dev in held.prefix(linkCount - limit) {
            becomeOnDemand(dev, because: "a slot is kept free for on-demand writes")
            dev.state = .releasing
            _ = dev.link?.startDisconnect()
        }
    }

    /// After an attempt: a device heard meanwhile (its reports came while
    /// the scan was stopped for the attempt) is tried next, the longest
    /// wanted first, before the scan starts again.
    func connectNextWanted() {
        for dev in devices.values.filter({ $0.state == .wanted && $0.link == nil }).sorted(by: { $0.order < $1.order }) {
            guard connecting == nil else { return }
            tryConnect(dev)
        }
    }

    /// Whether the controller scans beside a pending connect (LE_States bit 22 or 23).
    var scansBesideConnect: Bool { stack?.info.scansWhileInitiating ?? false }

    func scanOnOrStarting(_ st: BLEStack) -> Bool { st.central.isScanning || st.central.scanStarting != nil }

    /// Stops a scan nobody wants any more (every target heard).
    func stopUnwantedScan() {
        guard let st = stack, scanOnOrStarting(st), !scanWanted() else { return }
        st.central.stopScanning().whenFailure { [weak self] e in self?.noteControllerError(e) }
    }

    /// Links lost in set-up, in a row, that are reconnected without backoff.
    static let setUpLossesBeforeBackoff = 3

    /// Scans while some wanted device may be out there and no connection is
    /// pending (beside a pending one, when the controller can).
    func ensureScanning() {
        guard let st = stack, !stopping, connecting == nil || scansBesideConnect, !scanOnOrStarting(st),
              !scanPausedForAcceptList, scanWanted() else { return }
        if let max = policy.maxLinks, linkCount >= max { return }
        st.central.startScanning(active: policy.activeScan).whenComplete { [weak self] r in
            guard let self else { return }
            guard case .failure(let e) = r else { self.scanFailing = false; return }
            if !self.scanFailing { self.log("scan: \(e)") }  // once until a scan starts again, not every tick
            self.scanFailing = true
            self.noteControllerError(e)
            self.emit(.scanFailed(e))
            // A controller still scanning for a host that went away (Bumble's
            // keeps its scan across HCI Reset): stop it; the next tick scans again.
            if case HCIError.commandFailed(_, .commandDisallowed) = e {
                _ = st.host.submit(.leSetScanEnable(false, filterDuplicates: false))
            }
        }
    }

    /// A link is up: the owner sets it up (`Event.linkUp`).
    func linkUp(_ dev: KeptDevice, _ link: Link) {
        dev.link = link
        dev.state = .settingUp
        link.bearer.transactionTimeoutMs = 3000
        log("\(dev.label): connected (handle 0x\(Hex.int(link.connection.handle, width: 4)))")
        emit(.linkUp(dev, link))
    }

    /// A link went down (or its stack did, `force`): backoff, the accept list, scanning.
    func linkDown(_ peer: DeviceAddress, reason: HCIStatus?, force: Bool = false) {
        guard let dev = devices[peer.address], let link = dev.link else { return }
        if force { link.l2cap.close() }
        dev.link = nil
        if let t = dev.releaseTimer { stack?.host.cancel(t) }
        dev.releaseTimer = nil
        let planned = dev.state == .releasing
        dev.downAt = Instant.now()
        if planned {
            // An on-demand link let go: the device stays available.
            dev.state = .idleOnDemand
            log("\(dev.label): released (on demand)")
            emit(.linkDown(dev, reason: reason, planned: true))
            ensureScanning()
            return
        }
        if !policy.reconnect {
            dev.state = .gone
            emit(.linkDown(dev, reason: reason, planned: false))
            if !stopping { ensureScanning() }
            return
        }
        let lostInSetUp = dev.state == .settingUp && !dev.setupRefused
        dev.setupRefused = false
        dev.state = .backingOff(until: Instant.now().adding(ms: dev.backoff.next()))
        // From the accept list a device that was ready, or whose link was
        // lost while it was being set up (a lamp flickering at switch-on),
        // comes back at once: a pending connect costs nothing until it
        // advertises. Backoff after a setup the owner gave up, or after
        // `Self.setUpLossesBeforeBackoff` links in a row lost in set-up.
        if reconnectsFromAcceptList(dev), dev.attempts == 0 || (lostInSetUp && dev.attempts <= Self.setUpLossesBeforeBackoff) {
            dev.state = .wanted
        }
        emit(.linkDown(dev, reason: reason, planned: false))
        if stopping { return }
        armAcceptList()
        ensureScanning()
    }
}
