/// What owners tell the keeper about their devices: a link set up or not,
/// a device at a known address, work to do, a quiet link; and the claim's
/// connection parameters carried out (the short ones for set-up and work,
/// the idle ones for a quiet kept link: PROTOCOL.md, "Connection parameters").
extension DeviceKeeper {
    /// The owner set `device`'s link up: it counts as kept from now on (it
    /// comes back from the accept list), and its backoff starts over.
    public func ready(_ device: KeptDevice) {
        guard let link = device.link else { return }
        device.attempts = 0
        device.backoff.reset()
        device.connectedAt = Instant.now()
        set(device, .ready(link))
        idle(device)
    }

    /// The owner could not set `device`'s link up: it is disconnected and
    /// tried again after the backoff. A set-up that failed because the link
    /// was lost under it (its Disconnection Complete already in) is no
    /// refusal: `linkDown` reconnects it at once.
    public func setupFailed(_ device: KeptDevice) {
        guard let link = device.link, link.isConnected else { return }
        device.setupRefused = true
        _ = link.startDisconnect()
    }

    /// A device at a known address, claimed by `owner` and connected at the
    /// keeper's next chance without waiting for a report; `timeoutMs` bounds
    /// its attempts instead of the policy's. An address `remembered` from
    /// before (a cache) is tried for `policy.rememberedAddressMs` at most;
    /// when the device does not answer there, the keeper forgets it and
    /// emits `.notAtRememberedAddress` (the owner looks for it by scanning).
    @discardableResult
    public func reach(_ address: DeviceAddress, for owner: KeeperOwner, claim: Claim = .once, name: String? = nil,
                      timeoutMs: Int? = nil, remembered: Bool = false) -> KeptDevice {
        let dev = devices[address.address] ?? adopt(address, owner: owner, claim: claim)
        if let name { dev.name = name }
        dev.atRememberedAddress = remembered
        dev.connectTimeoutMs = remembered ? min(timeoutMs ?? policy.connectTimeoutMs, policy.rememberedAddressMs) : timeoutMs
        if dev.phase == .gone { set(dev, .wanted, "reached again") }
        tryConnect(dev)
        return dev
    }

    /// A new device of `owner`'s, numbered in the order it was adopted.
    func adopt(_ address: DeviceAddress, owner: KeeperOwner, claim: Claim) -> KeptDevice {
        adopted += 1
        let dev = KeptDevice(address: address, owner: owner, claim: claim, backoff: policy.deviceBackoff, order: adopted)
        devices[address.address] = dev
        return dev
    }

    /// Judges a report by the owners' `wants` again, as if its data had
    /// changed: for an owner whose answer changes with time (a gateway
    /// sharing lamps with others claims one only when its turn comes).
    public func consider(_ d: DiscoveredDevice) {
        guard devices[d.address.address] == nil else { return }
        heard(d)
    }

    /// Forgets a device that has no link (an address that did not answer):
    /// a report from it is judged by the owners' `wants` again.
    public func forget(_ device: KeptDevice) {
        guard device.link == nil, devices[device.address.address] === device, connecting !== device else { return }
        devices[device.address.address] = nil
    }

    /// The owner has work for `device`: an on-demand device without a link is
    /// connected; a kept link at its idle parameters goes back to the claim's.
    public func need(_ device: KeptDevice) {
        if device.link == nil { tryConnect(device) } else { busy(device) }
    }

    /// The owner is about to use `device`'s link: its quiet timer stops and a
    /// link at the idle parameters is asked for the claim's (writes go on
    /// meanwhile).
    public func busy(_ device: KeptDevice) {
        if let t = device.quietTimer { stack?.host.cancel(t) }
        device.quietTimer = nil
        guard device.atIdleParameters else { return }
        update(device, to: device.claim.parameters, idle: false)
    }

    /// The owner finished a piece of work on `device`: an on-demand link is
    /// let go after `onDemandIdleMs` without more (its owner's `hasWork`
    /// false); a kept link whose claim has `idle` parameters moves to them
    /// after `idle.afterMs`.
    public func idle(_ device: KeptDevice) {
        guard let h = stack?.host else { return }
        if let t = device.quietTimer { h.cancel(t) }
        device.quietTimer = nil
        if device.mode == .onDemand {
            device.quietTimer = h.schedule(afterMs: policy.onDemandIdleMs) { [weak self, weak device] in
                guard let self, let device else { return }
                device.quietTimer = nil
                guard device.mode == .onDemand, !device.owner.hasWork(device), let link = device.link else { return }
                self.set(device, .releasing(link), "idle")
                self.log("\(device.label): idle: releasing the on-demand link")
                _ = link.startDisconnect()
            }
        } else if let quiet = device.claim.idle, !device.atIdleParameters {
            device.quietTimer = h.schedule(afterMs: quiet.afterMs) { [weak self, weak device] in
                guard let self, let device else { return }
                device.quietTimer = nil
                if device.phase == .ready { self.update(device, to: quiet.parameters, idle: true) }
            }
        }
    }

    /// LE Connection Update of `device`'s link to `p`; a refusal is logged.
    func update(_ device: KeptDevice, to p: ConnectionParameters, idle: Bool) {
        guard let link = device.link, let h = stack?.host else { return }
        device.atIdleParameters = idle
        h.submit(LEConnectionUpdate(handle: link.connection.handle, parameters: p).command).whenFailure { [weak self] e in
            self?.log("\(device.label): connection update to \(idle ? "idle" : "active") parameters refused: \(e)")
        }
        trace?("\(device.label): " + (idle ? "quiet: relaxing the connection interval" : "active: short connection interval"))
    }

    /// How many devices have a link now.
    public var linkCount: Int { devices.values.filter { $0.link != nil }.count }

    /// The slots for links at all: `Policy.maxLinks`, or what the controller
    /// was found to hold (nil: not known yet).
    public var slotCount: Int? { slotLimit }

    /// Scans with scan requests (active) or without (passive) from now on:
    /// a scan under way is stopped and started again in the new mode.
    public func setActiveScan(_ active: Bool) {
        guard policy.activeScan != active else { return }
        policy.activeScan = active
        log("scan: \(active ? "active" : "passive") from now on")
        guard let st = stack, st.central.isScanning else { return }
        st.central.stopScanning().whenComplete { [weak self] _ in self?.ensureScanning() }
    }

    /// A scan is under way.
    public var isScanning: Bool { stack?.central.isScanning ?? false }
}
