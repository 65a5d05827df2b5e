/// Keeps links to devices for the owners that claim them: the one place
/// where attled decides when to scan, when and how to connect (a scan, or a
/// pending LE Create Connection from the controller's Filter Accept List), how
/// long to back off after a failure, what to do with a connection that
/// completes after its attempt was given up, how many links the controller
/// holds and who gets them, which parameters a quiet link moves to, and when
/// to reopen a controller that stopped answering.
///
/// Owners (`owner(_:priority:)`: a one-shot job, the UI, the gateway, the
/// proxy) claim devices (`KeeperOwner.wants` returns a `Claim` for a report,
/// or `reach` one at a known address): keep connected, reach once, or
/// connect on demand. Each owner hears its own devices' events (`Event.linkUp`:
/// set the link up, then call `ready` or `setupFailed`) and the
/// controller's; it asks for an on-demand device's link when it has work
/// (`need`), says when it is `busy` with a link and when `idle`.
///
/// Slots: at most `Policy.maxLinks` links, or what the controller was found
/// to hold. Owners are served by priority, then in the order their devices
/// were adopted. A claim that finds every slot taken may take one held by an
/// owner of lower priority: an on-demand link without work first, then the
/// newest ready kept link (never a link being set up); the device let go is
/// connected on demand from then on when its owner allows, else it waits for
/// a slot. Between owners of one priority nothing is taken: a kept device
/// beyond the slots is connected on demand (`KeeperOwner.onDemandBeyondSlots`)
/// or waits. One thread, the stack's event loop, as everything else.
///
///     let keeper = DeviceKeeper(stack: stack, reopen: { try BLEStack.open(spec, loop: loop) })
///     let lamps = keeper.owner("lamps")
///     lamps.wants = { $0.name == "CassarTech" ? .keep : nil }
///     lamps.subscribe { event in
///         if case let .linkUp(device, link) = event { ...; keeper.ready(device) }
///     }
///     try keeper.run()   // until SIGINT/SIGTERM (HCIError.interrupted) or stop()
public final class DeviceKeeper {
    /// Whether kept devices come back from the Filter Accept List; off says
    /// why in the app's words (the keeper's "reconnects: by scanning (WHY)").
    public enum AcceptListUse: Sendable, Equatable {
        case whenSupported
        case off(because: String)
    }

    /// How the keeper paces and bounds its work (for every owner).
    public struct Policy: Sendable {
        /// At most this many links (nil: what the controller holds).
        public var maxLinks: Int?
        /// Reconnect kept devices from the controller's Filter Accept List when it has one.
        public var acceptList = AcceptListUse.whenSupported
        /// `acceptList` as a switch (off: "turned off").
        public var useAcceptList: Bool {
            get { acceptList == .whenSupported }
            set { acceptList = newValue ? .whenSupported : .off(because: "turned off") }
        }
        /// Active scanning (scan requests: names in scan responses are heard).
        public var activeScan = true
        /// One connection attempt's bound.
        public var connectTimeoutMs = 3_000
        /// Pacing of a device's reconnections after a failure.
        public var deviceBackoff = Backoff(initialMs: 500, maxMs: 30_000)
        /// Pacing of the controller's reopening.
        public var controllerBackoff = Backoff(initialMs: 500, maxMs: 30_000)
        /// An on-demand link is let go after this long without work.
        public var onDemandIdleMs = 2_000
        /// A kept device heard this long while the accept-list connect waits for it: the list is ignored.
        public var acceptIgnoredAfterMs = 1_500
        /// The period of the housekeeping tick (scanning, the accept list).
        public var tickMs = 500
        /// A remembered address (an earlier run's) is tried this long before
        /// the device is looked for by scanning instead.
        public var rememberedAddressMs = 1_000

        public init() {}
    }

    /// What the keeper tells its subscribers.
    public enum Event {
        /// A link to `device` is up: set it up, then `ready(device)` or `setupFailed(device)`.
        case linkUp(KeptDevice, Link)
        /// `device`'s link ended (`planned`: an on-demand link the keeper let go).
        case linkDown(KeptDevice, reason: HCIStatus?, planned: Bool)
        /// `device` is connected only when there is work for it from now on.
        case becameOnDemand(KeptDevice, because: String)
        /// The controller failed (`why`); links are gone and it is being reopened.
        case controllerLost(why: String)
        /// The controller was opened again.
        case controllerBack(BLEStack)
        /// A pending LE Create Connection from the Filter Accept List waits for these devices.
        case waitingFromAcceptList([KeptDevice])
        /// A connection attempt failed (the device backs off, or is gone
        /// when the policy does not reconnect).
        case connectFailed(KeptDevice, error: any Error)
        /// `device` did not answer at its remembered address: the keeper
        /// forgot it, and a report from it is judged by the owners again.
        case notAtRememberedAddress(KeptDevice, error: any Error)
        /// A scan could not be started (tried again on the next tick).
        case scanFailed(any Error)
        /// `device`'s state changed (from `from`); the keeper's one setter emits it.
        case stateChanged(KeptDevice, from: KeptDevice.Phase)

        /// The device the event is about (nil: the controller's, for every owner).
        var device: KeptDevice? {
            switch self {
            case let .linkUp(d, _), let .linkDown(d, _, _), let .becameOnDemand(d, _), let .connectFailed(d, _),
                 let .notAtRememberedAddress(d, _), let .stateChanged(d, _):
                return d
            case .controllerLost, .controllerBack, .waitingFromAcceptList, .scanFailed:
                return nil
            }
        }
    }

    /// A subscription, for `cancel`.
    public typealias Subscription = Subscribers<Event>.Token

    public internal(set) var policy: Policy
    /// The current stack (a new one after the controller was reopened; nil meanwhile).
    public private(set) var stack: BLEStack?
    /// The event loop every stack runs on.
    public let loop: EventLoop
    /// The owners, by priority (highest first), then in the order they came.
    public private(set) var owners: [KeeperOwner] = []
    /// No connection attempt runs past this (a one-shot run's deadline):
    /// an attempt's timeout is cut to what is left.
    public var deadline: Instant?
    /// Log lines (what the keeper decided and why).
    public var log: (String) -> Void = { _ in }
    /// Every state change of a device and every parameter change of a link,
    /// as a line (nil: not traced; a gateway's --verbose).
    public var trace: ((String) -> Void)?
    /// The devices adopted so far, by address.
    public internal(set) var devices: [BDAddress: KeptDevice] = [:]

    private let reopen: (() throws -> BLEStack)?
    private let close: (BLEStack) -> Void
    private var subscribers = Subscribers<Event>()
    /// Owners' handlers of the current stack's Central events (`subscribeCentral`).
    private var centralWatchers = Subscribers<Central.Event>()
    var centralSubscriptions: [Central.Subscription] = []
    /// Devices adopted so far (their `order`).
    var adopted = 0
    /// The device whose connection attempt is under way (one at a time).
    var connecting: KeptDevice?
    /// Learned when the controller refuses a link for want of room.
    public internal(set) var capacity: Int?
    /// The controller as the keeper sees it: working, or failed and to be
    /// closed and opened again (a command it never answered, a transport error).
    enum ControllerState: Equatable { case working, failed(why: String) }
    var controller = ControllerState.working
    var controllerFailed: Bool { controller != .working }
    /// The last scan start failed (logged once until a scan starts again).
    var scanFailing = false
    var controllerBackoff: Backoff
    public private(set) var stopping = false
    /// How kept devices are reconnected, per stack (KeeperAcceptList.swift).
    public internal(set) var reconnectPath: ReconnectPath = .unknown
    /// Set once this controller was seen to ignore its accept list (kept across reopenings).
    var acceptListIgnored: String?
    /// The accept-list connect (KeeperAcceptList.swift).
    var acceptList = AcceptListConnect.idle
    var acceptBackoff = Backoff(initialMs: 500, maxMs: 30_000)
    var acceptWatch: AcceptListWatch
    /// The gathering of targets before the first connect (KeeperGather.swift).
    var gather = Gather.notStarted

    /// - Parameters:
    ///   - stack: the stack to start on.
    ///   - policy: pacing and bounds.
    ///   - reopen: opens the controller again after a failure (nil: a
    ///     controller failure ends `run` with its error).
    ///   - close: closes a failed stack (default: `close()` with 500 ms per command).
    public init(stack: BLEStack, policy: Policy = Policy(), reopen: (() throws -> BLEStack)? = nil,
                close: ((BLEStack) -> Void)? = nil) {
        self.stack = stack
        self.loop = stack.host.loop
        self.policy = policy
        self.reopen = reopen
        self.close = close ?? { s in s.close(commandTimeoutMs: 500) }
        controllerBackoff = policy.controllerBackoff
        acceptWatch = AcceptListWatch(deadlineMs: policy.acceptIgnoredAfterMs)
    }

    // MARK: owners and subscribers

    /// A new owner of claims; owners of higher `priority` are served first
    /// when slots run short (see the type's "Slots").
    public func owner(_ name: String, priority: Int = 0) -> KeeperOwner {
        let o = KeeperOwner(name: name, priority: priority)
        owners.append(o)
        owners.sort { $0.priority > $1.priority }  // stable: equal priorities keep their order
        return o
    }

    /// The owner is done: its links are let go, its devices forgotten, and
    /// the slots they held go to the other owners.
    public func remove(_ owner: KeeperOwner) {
        guard owner.active else { return }
        owner.active = false
        owners.removeAll { $0 === owner }
        for d in devices.values where d.owner === owner { release(d) }
    }

    /// The owner gives up its claim on `device`: its link (if any) is let
    /// go and the device forgotten.
    public func release(_ device: KeptDevice) {
        guard devices[device.address.address] === device, !device.released else { return }
        device.released = true
        if let t = device.quietTimer { stack?.host.cancel(t) }
        device.quietTimer = nil
        if let link = device.link {
            set(device, .releasing(link), "released by \(device.owner.name)")
            _ = link.startDisconnect()
        } else if connecting !== device {
            // No link and no attempt under way: forgotten now (an attempt's
            // connection, if it comes, is let go by tryConnect).
            devices[device.address.address] = nil
            set(device, .gone, "released by \(device.owner.name)")
        }
        armAcceptList()
    }

    /// Calls `handler` with every event of the current stack's Central (every
    /// advertising report, ...) from the keeper's start on, on a reopened
    /// controller's too: for an owner that reads the reports themselves (the
    /// proxy passes them on, the gateway reports what it hears).
    @discardableResult
    public func subscribeCentral(_ handler: @escaping (Central.Event) -> Void) -> Subscribers<Central.Event>.Token {
        centralWatchers.add(handler)
    }

    /// Calls `handler` with every event of every owner from now on (a monitor).
    @discardableResult
    public func subscribe(_ handler: @escaping (Event) -> Void) -> Subscription {
        subscribers.add(handler)
    }

    public func cancel(_ s: Subscription) { subscribers.remove(s) }

    /// An event to the monitors, then to the owner of its device (the
    /// controller's events: to every owner).
    func emit(_ e: Event) {
        subscribers.emit(e)
        if let d = e.device {
            if d.owner.active { d.owner.subscribers.emit(e) }
        } else if case let .waitingFromAcceptList(ds) = e {
            for o in owners {
                let mine = ds.filter { $0.owner === o }
                if !mine.isEmpty { o.subscribers.emit(.waitingFromAcceptList(mine)) }
            }
        } else {
            for o in owners { o.subscribers.emit(e) }
        }
    }

    /// Changes a device's state: the one place that does, traced.
    func set(_ dev: KeptDevice, _ state: KeptDevice.State, _ why: String? = nil) {
        let was = dev.phase
        dev.state = state
        guard was != dev.phase else { return }
        trace?("\(dev.label): \(was.rawValue) -> \(dev.phase.rawValue)" + (why.map { " (\($0))" } ?? ""))
        emit(.stateChanged(dev, from: was))
    }

    /// Whether some owner still looks for devices it has not heard.
    func scanWanted() -> Bool {
        owners.contains { o in
            if let m = o.maxLinks, links(of: o) >= m { return false }
            return o.scanWanted()
        }
    }

    /// The links `owner`'s devices hold.
    func links(of owner: KeeperOwner) -> Int { devices.values.filter { $0.owner === owner && $0.link != nil }.count }

    // MARK: running

    /// Runs until `stop()` or a signal, outliving controller faults: a
    /// Hardware Error, a command never answered or a lost transport close
    /// the stack; it is reopened with backoff (the loop runs on its own
    /// meanwhile) and the links restored as the devices are heard.
    /// - Throws: `HCIError.interrupted` (SIGINT/SIGTERM); a controller
    ///   error when there is no `reopen`.
    public func run() throws {
        while !stopping {
            guard let st = stack else { try reopenController(); continue }
            attach(st)
            do {
                _ = try st.host.pump(until: .distantFuture) { controllerFailed || stopping }
            } catch let e as HCIError {
                if case .interrupted = e { throw e }
                guard reopen != nil else { throw e }
                controller = .failed(why: "\(e)")
            }
            if stopping { return }
            let why: String
            if case let .failed(w) = controller { why = w } else { why = "failed" }
            controller = .working
            log("controller: \(why); resetting it and restoring the links")
            detach(st)
            emit(.controllerLost(why: why))
            try reopenController()
        }
    }

    /// Ends `run` at its next turn; no new connection is made from now on
    /// (the links stay up: the owner's clean-up closes the stack).
    public func stop() { stopping = true }

    /// For an owner that pumps the loop itself (one-shot jobs): hooks the
    /// keeper into its stack (reports, disconnections, the tick, scanning)
    /// without `run`'s controller recovery; `end` unhooks it.
    public func start() {
        guard let st = stack, centralSubscriptions.isEmpty else { return }
        attach(st)
    }

    /// Stops and unhooks a keeper `start`ed by its owner; the links stay up.
    public func end() {
        stopping = true
        if let st = stack { for t in centralSubscriptions { st.central.cancel(t) } }
        centralSubscriptions = []
    }

    /// Hooks the keeper into a (new) stack: reports, disconnections, late
    /// connections, the tick, scanning, the reconnect path.
    func attach(_ st: BLEStack) {
        centralSubscriptions = [
            // New or changed advertising data: adopt the device if it is wanted.
            st.central.onDeviceUpdate { [weak self] d, _ in self?.heard(d) },
            // Every report of an adopted device: one back after a drop (or
            // whose backoff ended) is connected the next time it is heard.
            st.central.onDeviceSeen { [weak self] d in
                guard let self, !self.stopping, let dev = self.devices[d.address.address] else { return }
                self.tryConnect(dev)
            },
            st.central.onDisconnection { [weak self] c in self?.linkDown(c.peer, reason: c.disconnectReason) },
            // A connection that completes after its attempt was given up (a
            // controller that kept it pending, as Bumble's does after a
            // cancel): adopted when it is a device we keep and have no link
            // to. That includes the device being connected right now: the
            // Central has no attempt for it yet (it would have taken the
            // completion), so the scan is still stopping, and tryConnect then
            // makes no second link.
            st.central.adoptUnrequested { [weak self] c in
                guard let self, !self.stopping, let dev = self.devices[c.peer.address], dev.link == nil, dev.phase != .gone, !dev.released else { return false }
                self.log("\(dev.label): a connection given up earlier completed: adopting it")
                self.linkUp(dev, st.attach(c))
                return true
            },
            // The owners that read the reports themselves.
            st.central.subscribe { [weak self] e in self?.centralWatchers.emit(e) },
        ]
        scheduleTick(st.host)
        ensureScanning()
        chooseReconnectPath(st)
    }

    /// Unhooks from a failed stack: every link is gone with it.
    func detach(_ st: BLEStack) {
        // No accept-list connect on the controller being dropped: decided anew on the next.
        reconnectPath = .unknown
        acceptList = .idle
        for d in devices.values where d.link != nil { linkDown(d.address, reason: nil, force: true) }
        connecting = nil
        for t in centralSubscriptions { st.central.cancel(t) }
        centralSubscriptions = []
    }

    /// Closes the failed stack and opens the controller again, with backoff;
    /// the loop runs on its own meanwhile (timers, the owner's descriptors, signals).
    func reopenController() throws {
        if let old = stack { close(old); stack = nil }
        guard let reopen else { throw HCIError.closed }
        while !stopping {
            do {
                // The loop serves the owner's descriptors and timers meanwhile; stop() ends the wait.
                _ = try loop.run(until: Instant.now().adding(ms: controllerBackoff.next())) { stopping }
            } catch EventLoopError.interrupted(let sig) {
                throw HCIError.interrupted(signal: sig)
            }
            if stopping { return }
            do {
                let st = try reopen()
                controllerBackoff.reset()
                stack = st
                log("controller: \(st.transport.name) initialised again")
                emit(.controllerBack(st))
                return
            } catch HCIError.interrupted(let sig) {
                throw HCIError.interrupted(signal: sig)
            } catch {
                log("controller: \(error); retrying")
            }
        }
    }

    func scheduleTick(_ h: HCIHost) {
        _ = h.schedule(afterMs: policy.tickMs) { [weak self, weak h] in
            guard let self, let h, !self.stopping else { return }
            self.armAcceptList()
            self.ensureScanning()
            self.scheduleTick(h)
        }
    }

    /// A command the controller never answered: reopen it (the run loop
    /// ends its turn). Rejections (Command Disallowed after a cancel, say)
    /// are not: the attempt is retried with backoff.
    func noteControllerError(_ e: any Error) {
        if case HCIError.commandTimeout = e, !controllerFailed { controller = .failed(why: "\(e)") }
    }
}
