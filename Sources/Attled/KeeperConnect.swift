/// The keeper's connections: which device is adopted and by whom, connected
/// (one attempt at a time), set up, let go; the slots the controller holds,
/// who gets them, and the devices connected on demand beyond them; scanning.
extension DeviceKeeper {

    /// A connectable report: adopt the device for the first owner (by
    /// priority) that claims it, connect it.
    func heard(_ d: DiscoveredDevice) {
        guard !stopping, d.connectable else { return }
        let dev: KeptDevice
        if let known = devices[d.address.address] {
            guard known.phase != .gone else { return }
            dev = known
        } else {
            guard let (owner, claim) = claimant(d) else { return }
            dev = adopt(d.address, owner: owner, claim: claim)
        }
        if let n = d.name { dev.name = n }
        dev.advertised = d.serviceUUIDs
        tryConnect(dev)
        // The last target heard while a connect is pending (scanning beside
        // it): nothing is left to find.
        if connecting != nil { stopUnwantedScan() }
    }

    /// The first owner, by priority, that claims a report.
    private func claimant(_ d: DiscoveredDevice) -> (KeeperOwner, Claim)? {
        for o in owners { if let c = o.wants(d) { return (o, c) } }
        return nil
    }

    /// How many links may be kept up: the slots, less one kept free for
    /// devices connected on demand once there are any.
    var permanentLimit: Int? { permanentLimit(for: nil) }

    /// The same for `owner`'s kept devices: the slot kept free is for
    /// on-demand devices of its priority or higher (a lower owner's on-demand
    /// device does not hold a slot against it).
    func permanentLimit(for owner: KeeperOwner?) -> Int? {
        let p = owner?.priority ?? Int.min
        guard let l = slotLimit, devices.values.contains(where: { $0.mode == .onDemand && $0.owner.priority >= p }) else { return slotLimit }
        return max(0, l - 1)
    }

    /// The slots for links at all (permanent and on demand): `maxLinks`, or
    /// what the controller was found to hold.
    var slotLimit: Int? {
        if let c = capacity { return min(policy.maxLinks ?? c, c) }
        return policy.maxLinks
    }

    /// Connects `dev` when the keeper may: no other attempt, no link, its
    /// backoff over, a slot free (taken from a lower priority if need be),
    /// its owner under its own bound (on demand: only with work for it).
    func tryConnect(_ dev: KeptDevice) {
        guard let st = stack, !stopping, connecting == nil, dev.link == nil, dev.phase != .gone, !dev.released,
              devices[dev.address.address] === dev else { return }
        // A kept device comes back through the pending accept-list connect.
        if reconnectsFromAcceptList(dev), heardWhileAccepting(dev) { return armAcceptList() }
        guard Instant.now() >= dev.notBefore else { return }
        if dev.owner.gatherMs > 0 {
            if gathering(dev) { return }
            // The wanted device whose next advertisement comes first goes first.
            if let next = nextByPhase(of: dev.owner), next !== dev { return tryConnect(next) }
        }
        if let m = dev.owner.maxLinks, links(of: dev.owner) >= m { return }
        if dev.mode == .onDemand {
            guard dev.owner.hasWork(dev) else { return }
            if let l = slotLimit, linkCount >= l { takeSlot(for: dev); return }
        } else if let l = permanentLimit(for: dev.owner), linkCount >= l {
            if takeSlot(for: dev) { return }
            if slotLimit != nil, dev.owner.onDemandBeyondSlots {
                becomeOnDemand(dev, because: "\(linkCount) link(s) are all the controller or the link limit allow")
            }
            return
        }
        connecting = dev
        set(dev, .connecting)
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
                let f = st.startConnect(to: dev.address, timeoutMs: timeoutMs, parameters: dev.claim.parameters).map { Optional($0) }
                self?.stopUnwantedScan()
                return f
            }
            .whenComplete { [weak self] r in
                guard let self else { return }
                self.connecting = nil
                switch r {
                case .success(let link):
                    guard let link else { break }
                    // Released while it was being connected: let the link go.
                    if dev.released {
                        self.devices[dev.address.address] = nil
                        _ = link.startDisconnect()
                        break
                    }
                    self.linkUp(dev, link)
                case .failure(let e): self.attemptFailed(dev, e)
                }
                self.connectNextWanted()
                self.ensureScanning()
            }
    }

    /// An attempt failed: the controller full (its capacity learned), a
    /// one-shot claim's end, or backoff.
    private func attemptFailed(_ dev: KeptDevice, _ e: any Error) {
        noteControllerError(e)
        if Self.isFull(e), linkCount > 0, dev.owner.onDemandBeyondSlots {
            // The controller holds no more links: that is its capacity.
            capacity = linkCount
            log("controller: it holds \(linkCount) link(s) (\(e))")
            becomeOnDemand(dev, because: "the controller is full")
            makeRoomForOnDemand()
            return
        }
        if dev.atRememberedAddress, e is GAPError {
            // Not there (any more): forgotten, so a report from it is judged afresh.
            set(dev, .gone, "not at its remembered address")
            log("\(dev.label): not at its remembered address (\(e))")
            if devices[dev.address.address] === dev { devices[dev.address.address] = nil }
            emit(.notAtRememberedAddress(dev, error: e))
            return
        }
        if dev.claim.kind == .once {
            set(dev, .gone, "connect failed")
            log("\(dev.label): connect failed (\(e))")
        } else {
            set(dev, .backingOff(until: Instant.now().adding(ms: dev.backoff.next())), "connect failed")
            log("\(dev.label): connect failed (\(e)); next try not before \(dev.notBefore.msUntilNowString)")
        }
        emit(.connectFailed(dev, error: e))
    }

    /// Refusals that mean "no room for another link" (Core Vol 1 Part F):
    /// Memory Capacity Exceeded, Connection Limit Exceeded, Connection
    /// Rejected due to Limited Resources.
    static let fullStatuses: Set<HCIStatus> = [.memoryFull, .connectionLimitExceeded, .connectionRejectedLimitedResources]

    /// A refusal that means "no room for another link" (`fullStatuses`).
    public static func isFull(_ e: any Error) -> Bool {
        var st: HCIStatus?
        if case let HCIError.commandFailed(_, s) = e { st = s }
        if case let GAPError.connectFailed(_, s) = e { st = s }
        guard let st else { return false }
        return fullStatuses.contains(st)
    }

    /// Every slot is taken and `dev`'s owner outranks the holder of one: that
    /// link is let go (an on-demand link without work first, then the newest
    /// ready kept link; never one being set up), and `dev` is connected once
    /// it is down. - Returns: whether a slot is being freed for `dev`.
    @discardableResult
    func takeSlot(for dev: KeptDevice) -> Bool {
        let p = dev.owner.priority
        if devices.values.contains(where: { $0.phase == .releasing && $0.owner.priority < p }) { return true }  // one is coming
        let now = Instant.now()
        let lower = devices.values.filter { $0.phase == .ready && $0.owner.priority < p }
        let idleOnDemand = lower.filter { $0.mode == .onDemand && !$0.owner.hasWork($0) }
        let kept = lower.filter { $0.mode == .kept }.sorted { ($0.connectedAt ?? now) > ($1.connectedAt ?? now) }
        guard let victim = (idleOnDemand.sorted { $0.owner.priority < $1.owner.priority } + kept).first,
              let link = victim.link else { return false }
        log("\(victim.label): its slot goes to \(dev.owner.name) (priority \(p) over \(victim.owner.priority))")
        if victim.mode == .kept, victim.owner.onDemandBeyondSlots {
            becomeOnDemand(victim, because: "its slot went to \(dev.owner.name)")
        }
        set(victim, .releasing(link), "slot taken by \(dev.owner.name)")
        _ = link.startDisconnect()
        return true
    }

    /// Devices beyond the links the controller holds are connected when
    /// there is work for them, and let go after a short idle.
    func becomeOnDemand(_ dev: KeptDevice, because why: String) {
        guard dev.mode != .onDemand else { return }
        dev.mode = .onDemand
        if dev.link == nil, dev.phase != .connecting { set(dev, .idleOnDemand, why) }
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
            if let link = dev.link {
                set(dev, .releasing(link), "a slot kept free")
                _ = link.startDisconnect()
            }
        }
    }

    /// After an attempt (or a link let go): the next device to connect, by
    /// owner priority, then the longest wanted: a device heard meanwhile
    /// (its reports came while the scan was stopped), an on-demand one with
    /// work, before the scan starts again.
    func connectNextWanted() {
        let next = devices.values.filter { d in
            d.link == nil && (d.phase == .wanted || (d.phase == .idleOnDemand && d.owner.hasWork(d)))
        }.sorted { ($0.owner.priority, -$0.order) > ($1.owner.priority, -$1.order) }
        for dev in next {
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

    /// Scans while some owner looks for a device and no connection is
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
                _ = st.host.submit(HCI.LESetScanEnable(enable: false, filterDuplicates: false).command)
            }
        }
    }

    /// A link is up: the owner sets it up (`Event.linkUp`).
    func linkUp(_ dev: KeptDevice, _ link: Link) {
        set(dev, .settingUp(link))
        dev.atIdleParameters = false
        link.bearer.transactionTimeoutMs = 3000
        log("\(dev.label): connected (handle 0x\(Hex.int(link.connection.handle, width: 4)))")
        emit(.linkUp(dev, link))
    }

    /// A link went down (or its stack did, `force`): backoff, the accept list, scanning.
    func linkDown(_ peer: DeviceAddress, reason: HCIStatus?, force: Bool = false) {
        guard let dev = devices[peer.address], let link = dev.link else { return }
        if force { link.l2cap.close() }
        if let t = dev.quietTimer { stack?.host.cancel(t) }
        dev.quietTimer = nil
        let planned = dev.phase == .releasing
        let wasSettingUp = dev.phase == .settingUp
        dev.downAt = Instant.now()
        let backoffUntil = Instant.now().adding(ms: dev.backoff.next())
        if dev.released {
            // Released by its owner: forgotten.
            devices[dev.address.address] = nil
            set(dev, .gone, "released")
            emit(.linkDown(dev, reason: reason, planned: true))
        } else if planned {
            // An on-demand link let go, or a slot given to a higher priority: the device stays available.
            set(dev, dev.mode == .onDemand ? .idleOnDemand : .wanted, "let go")
            log("\(dev.label): released (\(dev.mode == .onDemand ? "on demand" : "its slot taken"))")
            emit(.linkDown(dev, reason: reason, planned: true))
        } else if dev.claim.kind == .once {
            set(dev, .gone, "link lost")
            emit(.linkDown(dev, reason: reason, planned: false))
        } else {
            let lostInSetUp = wasSettingUp && !dev.setupRefused
            dev.setupRefused = false
            // From the accept list a device that was ready, or whose link was
            // lost while it was being set up (a lamp flickering at switch-on),
            // comes back at once: a pending connect costs nothing until it
            // advertises. Backoff after a setup the owner gave up, or after
            // `Self.setUpLossesBeforeBackoff` links in a row lost in set-up.
            let atOnce = reconnectsFromAcceptList(dev)
                && (dev.attempts == 0 || (lostInSetUp && dev.attempts <= Self.setUpLossesBeforeBackoff))
            set(dev, atOnce ? .wanted : .backingOff(until: backoffUntil), "link lost")
            emit(.linkDown(dev, reason: reason, planned: false))
        }
        if stopping || force { return }
        armAcceptList()
        connectNextWanted()
        ensureScanning()
    }
}
