import Attled
import AttledLED

/// `attled ui`'s state, without a terminal: the sliders (or the harness's
/// buttons and notifications), what the UI is doing, and the writes to the
/// device. Sliders stay disabled until their characteristics are found, take
/// the device's values on connect, write as they move (one write per
/// characteristic in flight, the latest value wins), reset and disable on
/// disconnect. The harness gets two buttons and its notifications.
///
/// Event-driven on the library's `DeviceKeeper` (one device at a time): it
/// finds the device, connects, brings it back from the controller's Filter
/// Accept List after a drop (or by scanning), backs off after failures, takes
/// a connection that completes after its attempt was given up, and reopens a
/// controller that failed. `UIApp` draws it and feeds it keys (UIKeys.swift).
final class UIModel {
    let keeper: DeviceKeeper
    let owner: KeeperOwner
    let resolver: LEDResolver
    let transportName: String
    /// Called after anything shown changed (the app redraws).
    var onChange: (() -> Void)?
    static let rgbNames = ["Red", "Green", "Blue"]
    var names = UIModel.rgbNames
    var desired = [0, 0, 0]
    var onDevice: [Int?] = [nil, nil, nil]
    /// A write in flight per characteristic (the latest value goes next).
    var inFlight = [false, false, false]
    var enabled = false
    var selected = 0
    var typed = ""
    /// Where the UI stands, read from the keeper (never kept apart from it).
    enum State: Equatable {
        case starting, scanning, connecting, discovering, connected
        /// A connect from the Filter Accept List is pending for the lamp.
        case waitingForAdvertisement
        /// The lamp's link is down and no connect is pending; `retryMs`: the
        /// keeper's backoff before the next attempt (nil: when it is heard).
        case disconnected(retryMs: Int?)
    }
    var started = false
    /// The lamp the UI drives, once it had a link (the keeper's own record).
    var device: KeptDevice?
    var status = ""
    var deviceLine = "-"
    var profileName = "-"
    var led: ResolvedLED?
    var link: Link?
    /// The lamp's session on `link`.
    var session: LampSession?
    var writes = 0
    /// A failure that ends the UI (no LED service on the device).
    var fatal: RunError?
    // harness
    var pressed = [false, false]
    var lastKey: [Instant?] = [nil, nil]
    var commandQueue: [[UInt8]] = []
    var sendingCommand = false
    var notifications: [String] = []
    static let holdMs = HarnessButton.holdMs

    /// - Parameters:
    ///   - reopen: opens the controller again after a fault (nil: a fault ends the UI).
    ///   - close: closes a failed stack.
    init(stack: BLEStack, resolver: LEDResolver, filter: DeviceFilter, passive: Bool, connectTimeoutMs: Int,
         noAcceptList: Bool = false, reopen: (() throws -> BLEStack)? = nil, close: ((BLEStack) -> Void)? = nil) {
        var p = DeviceKeeper.Policy()
        if noAcceptList { p.acceptList = .off(because: "--no-accept-list") }
        p.activeScan = !passive
        p.connectTimeoutMs = connectTimeoutMs
        p.deviceBackoff = Backoff(initialMs: 500, maxMs: 8_000)
        p.controllerBackoff = Backoff(initialMs: 500, maxMs: 8_000)
        keeper = DeviceKeeper(stack: stack, policy: p, reopen: reopen, close: close)
        self.resolver = resolver
        transportName = stack.transport.name
        // One lamp at a time, kept; another is taken only when this one is down.
        owner = keeper.owner("ui")
        owner.maxLinks = 1
        owner.onDemandBeyondSlots = false
        owner.wants = { d in filter.matches(d) ? .keep : nil }
        owner.subscribe { [weak self] e in self?.event(e) }
    }

    var state: State {
        guard started else { return .starting }
        guard let d = device else { return .scanning }
        switch d.phase {
        case .connecting: return .connecting
        case .settingUp: return .discovering
        case .ready: return .connected
        case .wanted, .backingOff, .idleOnDemand, .releasing, .gone:
            if keeper.waitsFromAcceptList(d) { return .waitingForAdvertisement }
            if case let .backingOff(until) = d.state, Instant.now() < until {
                return .disconnected(retryMs: Instant.now().msUntil(until))
            }
            return .disconnected(retryMs: nil)
        }
    }

    /// The screen's State line: what the keeper knows, and the link's interval while it is up.
    var stateLine: String {
        var st: String
        switch state {
        case .starting: st = "starting"
        case .scanning: st = "scanning"
        case .connecting: st = "connecting"
        case .discovering: st = "discovering"
        case .connected: st = "connected"
        case .waitingForAdvertisement: st = "disconnected, waiting for an advertisement (Filter Accept List)"
        case let .disconnected(ms?): st = "disconnected, next attempt in \(ms) ms"
        case .disconnected(nil): st = "disconnected, scanning"
        }
        if let c = link?.connection, c.isConnected, [.discovering, .connected].contains(state) {
            st += ", interval \(formatMs(us: c.intervalMicroseconds, decimals: 2)) ms"
        }
        return st + ", profile \(profileName)"
    }

    var isHarness: Bool { led.map { !$0.profile.isRGB } ?? false }

    var host: HCIHost? { keeper.stack?.host }

    /// Runs the keeper until quit, a signal, or a fatal error.
    /// - Throws: `RunError` (no LED service), `HCIError.interrupted`.
    func run() throws {
        begin()
        try keeper.run()
        if let f = fatal { throw f }
    }

    /// The UI starts: it scans (the keeper's run begins that).
    func begin() {
        started = true
        changed()
    }

    /// Quits: the keeper's run ends at its next turn (the session's clean-up disconnects).
    func quit() { keeper.stop() }
    var quitting: Bool { keeper.stopping }

    func changed() { onChange?() }

    // MARK: the keeper's events

    func event(_ e: DeviceKeeper.Event) {
        switch e {
        case let .linkUp(d, l): linkUp(d, l)
        case let .linkDown(_, reason, _):
            reset()
            if !quitting { status = "disconnected (\(reason?.description ?? "link lost")); scanning again" }
        case .becameOnDemand, .stateChanged, .notAtRememberedAddress: break
        case let .controllerLost(why):
            reset()
            status = "controller: \(why); reopening it"
        case .controllerBack:
            status = "controller initialised again"
        case let .connectFailed(d, e):
            status = "\(d.label): connect failed (\(e)); trying again"
        case let .scanFailed(e):
            status = "scan: \(e); trying again"
        case let .waitingFromAcceptList(ds):
            status = "waiting for \(ds.map { $0.name ?? $0.address.description }.joined(separator: ", ")) to advertise (Filter Accept List)"
        }
        changed()
    }

    /// Lost the device: disable and reset (the slider names too: the next
    /// device may be of the other kind).
    func reset() {
        enabled = false
        names = Self.rgbNames
        desired = [0, 0, 0]; onDevice = [nil, nil, nil]; inFlight = [false, false, false]
        pressed = [false, false]; commandQueue.removeAll(); sendingCommand = false
        link = nil; led = nil; session = nil
    }

    /// A link is up: the lamp's session finds the LED characteristics and
    /// takes the device's values (or subscribes to the harness); then the
    /// sliders are enabled.
    func linkUp(_ d: KeptDevice, _ l: Link) {
        link = l
        device = d
        let rssi = l.stack.central.devices[d.address]?.rssi
        deviceLine = "\(d.name ?? "(no name)")  \(d.address)" + (rssi.map { "  RSSI \($0) dBm" } ?? "")
        let lamp = LampSession(link: l, resolver: resolver, securer: nil, advertised: d.advertised,
                               deviceName: d.name ?? d.address.description, report: Report(prefix: "", quiet: true))
        session = lamp
        lamp.onResolved = { [weak self] r, _ in
            guard let self else { return }
            self.led = r
            self.profileName = r.profile.name
            if !r.profile.isRGB { self.names = ["Button 1", "Button 2", ""] }
        }
        lamp.onValue = { [weak self] hv in
            guard let self, self.isHarness else { return }
            self.notifications.append(Hex.string(hv.value))
            if self.notifications.count > 12 { self.notifications.removeFirst() }
            self.changed()
        }
        lamp.startPrepared().whenComplete { [weak self] r in
            guard let self, self.link === l else { return }
            switch r {
            case .success(.colour(let values)):
                for (i, v) in values.enumerated() { if let v { self.desired[i] = Int(v); self.onDevice[i] = Int(v) } }
                self.status = "read \(self.desired[0]),\(self.desired[1]),\(self.desired[2]) from the device"
                self.ready(d)
            case .success(.subscribed):
                self.status = "subscribed to notifications"
                self.ready(d)
            case .failure(let e as GATTError):
                self.fail(classify(e))
            case .failure(let e as LEDOperations.Failure):
                self.fail(classify(e))
            case .failure(let e):
                if case ATTError.disconnected = e {} else { self.status = "\(e)" }
                self.keeper.setupFailed(d)
            }
            self.changed()
        }
    }

    private func ready(_ d: KeptDevice) {
        enabled = true
        keeper.ready(d)
    }

    /// No LED service: the UI ends with that error.
    func fail(_ e: RunError) {
        status = e.message
        fatal = e
        quit()
    }

    // MARK: writes

    /// Writes what changed: one write per characteristic in flight, the
    /// latest value next; the harness's commands one at a time, in order.
    func flushWrites() {
        guard let led, enabled, let l = link, l.isConnected, let lamp = session else { return }
        if let chars = led.rgb {
            for i in 0..<3 where onDevice[i] != desired[i] && !inFlight[i] {
                let v = desired[i]
                inFlight[i] = true
                lamp.startWrite(chars[i], [UInt8(v)])
                    .whenComplete { [weak self] r in
                        guard let self, self.link === l else { return }
                        self.inFlight[i] = false
                        if case .failure(let e) = r { self.status = "\(e)"; self.changed(); return }
                        self.onDevice[i] = v
                        self.writes += 1
                        self.status = "\(self.names[i].lowercased()) \(v) written (\(self.writes) write(s))"
                        self.flushWrites()
                        self.changed()
                    }
            }
        } else if let c = led.command, !sendingCommand, !commandQueue.isEmpty {
            let cmd = commandQueue.removeFirst()
            sendingCommand = true
            lamp.startWrite(c, cmd).whenComplete { [weak self] r in
                guard let self, self.link === l else { return }
                self.sendingCommand = false
                if case .failure(let e) = r { self.status = "\(e)"; self.changed(); return }
                self.writes += 1
                self.status = "sent \(Hex.string(cmd))"
                self.flushWrites()
                self.changed()
            }
        }
    }

    /// A held harness button is released `holdMs` after its last key repeat.
    func scheduleRelease(_ i: Int) {
        guard let h = host, let t = lastKey[i] else { return }
        _ = h.schedule(at: t.adding(ms: Self.holdMs)) { [weak self] in
            guard let self, self.pressed[i], let last = self.lastKey[i] else { return }
            if Instant.now() < last.adding(ms: Self.holdMs) { return self.scheduleRelease(i) }
            self.pressed[i] = false
            if let b = HarnessButton(rawValue: i + 1) { self.commandQueue.append([b.releaseByte]) }
            self.flushWrites()
            self.changed()
        }
    }
}
