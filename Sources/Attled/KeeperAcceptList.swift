/// How the keeper reconnects the devices it keeps.
public enum ReconnectPath: Equatable, Sendable {
    /// Not decided yet: the controller's accept list is being read.
    case unknown
    /// One LE Create Connection from the Filter Accept List stays pending for
    /// every kept device that is down; the controller connects each on the
    /// first advertisement it hears. `scanBeside`: the controller scans and
    /// initiates at once (LE Supported States bit 22 or 23), so scanning for
    /// new devices goes on meanwhile; otherwise scanning pauses while the
    /// connect is pending.
    case acceptList(size: Int, scanBeside: Bool)
    /// Scan, hear the device, then connect to it (one advertising interval later).
    case scanning(why: String)
}

/// Where the keeper's accept-list connect stands (the devices it waits for
/// are the Central's `acceptListConnect`).
enum AcceptListConnect: Equatable {
    /// None pending.
    case idle
    /// Being armed: the scan stopping before it, or a cancelled one ending
    /// before the next (the list may not change while a connect uses it).
    case arming
    /// Pending on the controller.
    case armed
    /// The last one failed: none before `until` (backoff).
    case failed(until: Instant)
}

/// The keeper's reconnection from the controller's Filter Accept List.
///
/// A device the owner has set up once is "kept": when its link goes down it
/// joins the accept-list connect, at once (backoff only after a failed setup).
/// New devices and on-demand writes take the scan path: the pending
/// accept-list connect is cancelled for them and armed again after. A
/// controller that ignores the accept list (it connects only to Peer_Address,
/// as Bumble's does) is found out when a kept device is heard advertising for
/// `Policy.acceptIgnoredAfterMs` while the connect is pending: the keeper logs it
/// and reconnects by scanning from then on. Peer_Address names the device
/// that went down first, so even such a controller reconnects that one at once.
extension DeviceKeeper {
    /// Reads the accept list's size of a (new) stack (its LE states came
    /// with the initialisation), then logs the path and arms the connect.
    func chooseReconnectPath(_ stack: BLEStack) {
        reconnectPath = .unknown
        let info = stack.info
        if case let .off(why) = policy.acceptList { return setPath(.scanning(why: why)) }
        if let why = acceptListIgnored { return setPath(.scanning(why: why)) }
        guard info.supportsAcceptList else {
            return setPath(.scanning(why: "the controller lists no Filter Accept List commands"))
        }
        stack.host.submit(HCI.LEReadFilterAcceptListSize().command)
            .whenComplete { [weak self, weak stack] r in
                guard let self, let stack, self.stack === stack else { return }
                switch r {
                case .failure(let e):
                    self.noteControllerError(e)
                    self.setPath(.scanning(why: "LE Read Filter Accept List Size failed (\(e))"))
                case .success(let rp):
                    let size = rp.count >= 2 ? Int(rp[1]) : 0
                    if size == 0 { return self.setPath(.scanning(why: "the controller's Filter Accept List holds no entry")) }
                    self.setPath(.acceptList(size: size, scanBeside: info.scansWhileInitiating))
                }
            }
    }

    func setPath(_ p: ReconnectPath) {
        reconnectPath = p
        switch p {
        case .unknown: return
        case let .acceptList(size, beside):
            log("reconnects: from the controller's Filter Accept List (\(size) entries; "
                + (beside ? "scanning beside it)" : "no scan while it is pending: the controller cannot scan and initiate at once)"))
        case let .scanning(why):
            log("reconnects: by scanning (\(why))")
        }
        armAcceptList()
        ensureScanning()
    }

    /// Whether the pending accept-list connect names `dev` (it is connected
    /// the next time it advertises).
    public func waitsFromAcceptList(_ dev: KeptDevice) -> Bool {
        stack?.central.acceptListConnect?.contains(dev.address) ?? false
    }

    /// Whether scanning waits for the pending accept-list connect.
    var scanPausedForAcceptList: Bool {
        guard case let .acceptList(_, beside) = reconnectPath, !beside, let stack = self.stack else { return false }
        return stack.central.acceptListConnect != nil || acceptList == .arming
    }

    /// A kept device whose address is known from a link it had, whatever
    /// phase that link was lost in (set up or not), not on demand.
    func reconnectsFromAcceptList(_ dev: KeptDevice) -> Bool {
        guard dev.claim.kind == .keep, !dev.released, case .acceptList = reconnectPath else { return false }
        return (dev.connectedAt != nil || dev.downAt != nil) && dev.mode == .kept
    }

    /// Brings the pending accept-list connect in line with the kept devices
    /// that are down: starts it, or cancels it to start it again with
    /// another set (the list may not change while a connect uses it).
    func armAcceptList() {
        guard case let .acceptList(size, beside) = reconnectPath, let stack = self.stack, !stopping,
              connecting == nil, acceptList != .arming else { return }
        if case let .failed(until) = acceptList, Instant.now() < until { return }
        let now = Instant.now()
        var want = devices.values.filter { $0.link == nil && reconnectsFromAcceptList($0) && now >= $0.notBefore }
            .sorted { ($0.downAt ?? now, $0.address.address.description) < ($1.downAt ?? now, $1.address.address.description) }
        if let l = permanentLimit, linkCount >= l { want = [] }
        let peers = Array(want.prefix(size)).map(\.address)
        if let current = stack.central.acceptListConnect {
            if Set(current) == Set(peers) { return }
            acceptList = .arming  // until the cancelled connect ends; then armed again
            stack.central.cancelAcceptListConnect()
            return
        }
        guard !peers.isEmpty else { return }
        acceptList = .arming
        let scanStop: Future<Void> = !beside && stack.central.isScanning ? stack.central.stopScanning().recover { _ in .done } : .done
        scanStop.whenComplete { [weak self, weak stack] _ in
            guard let self, let stack, self.stack === stack else { return }
            guard self.connecting == nil, !self.stopping else { self.acceptList = .idle; return }
            self.acceptWatch.reset()
            let labels = peers.map { self.devices[$0.address]?.label ?? $0.address.description }
            self.log("waiting for \(labels.joined(separator: ", ")) from the Filter Accept List")
            let f = stack.central.startAcceptListConnect(peers, parameters: .oneShot)
            // Armed once the connect is queued: a change of the set cancels it from now on.
            self.acceptList = .armed
            self.emit(.waitingFromAcceptList(peers.compactMap { self.devices[$0.address] }))
            f.whenComplete { [weak self] r in
                guard let self, self.stack === stack else { return }
                self.acceptList = .idle
                switch r {
                case .success(let c):
                    self.acceptBackoff.reset()
                    if let dev = self.devices[c.peer.address], dev.link == nil {
                        dev.attempts += 1
                        self.linkUp(dev, stack.attach(c))
                    } else {
                        _ = stack.central.startDisconnect(c)
                    }
                case .failure(GAPError.connectAborted):
                    break  // cancelled to change the set, or for a scan-path connect
                case .failure(let e):
                    self.noteControllerError(e)
                    let until = Instant.now().adding(ms: self.acceptBackoff.next())
                    self.acceptList = .failed(until: until)
                    self.log("accept-list connect failed (\(e)); again \(until.msUntilNowString)")
                }
                self.armAcceptList()
                self.ensureScanning()
            }
        }
    }

    /// A kept device heard while the accept-list connect waits for it. On a
    /// controller that scans beside the connect, one heard for
    /// `acceptIgnoredAfterMs` without being connected means the controller
    /// ignores its accept list: reconnect by scanning from now on.
    /// - Returns: true when the accept list still handles the device.
    func heardWhileAccepting(_ dev: KeptDevice) -> Bool {
        guard reconnectsFromAcceptList(dev), let stack = self.stack else { return false }
        guard let pending = stack.central.acceptListConnect, pending.contains(dev.address) else {
            return dev.link == nil  // not armed for it yet (backoff, or being armed): the next tick arms it
        }
        guard let ms = acceptWatch.heard(dev.address, pending: pending) else { return true }
        let why = "the controller did not connect \(dev.label) from its Filter Accept List in \(ms) ms of advertisements: it ignores the list"
        acceptListIgnored = why
        stack.central.cancelAcceptListConnect()
        setPath(.scanning(why: why))
        return false
    }
}
