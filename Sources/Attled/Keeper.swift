#if canImport(Glibc)
import Glibc
#endif

/// Keeps links to a set of devices: the one place where attled decides when
/// to scan, when and how to connect (a scan, or a pending LE Create
/// Connection from the controller's Filter Accept List), how long to back off
/// after a failure, what to do with a connection that completes after its
/// attempt was given up, how many links the controller holds (devices beyond
/// them are connected on demand), and when to reopen a controller that
/// stopped answering.
///
/// The owner says which devices it wants (`wants`), hears of each link as it
/// comes up (`Event.linkUp`: set it up, then call `ready` or `setupFailed`)
/// and goes down, and asks for an on-demand device's link when it has work
/// for it (`need`). Any number of subscribers; one thread, the stack's event
/// loop, as everything else.
///
///     let keeper = DeviceKeeper(stack: stack, reopen: { try BLEStack.open(spec, loop: loop) })
///     keeper.wants = { $0.name == "CassarTech" }
///     _ = keeper.subscribe { event in
///         if case let .linkUp(device, link) = event { ...; keeper.ready(device) }
///     }
///     try keeper.run()   // until SIGINT/SIGTERM (HCIError.interrupted) or stop()
public final class DeviceKeeper {
    /// How the keeper paces and bounds its work.
    public struct Policy: Sendable {
        /// At most this many links (nil: what the controller holds).
        public var maxLinks: Int?
        /// Reconnect kept devices from the controller's Filter Accept List when it has one.
        public var useAcceptList = true
        /// Active scanning (scan requests: names in scan responses are heard).
        public var activeScan = true
        /// One connection attempt's bound.
        public var connectTimeoutMs = 3_000
        /// The parameters links are made with.
        public var parameters: ConnectionParameters = .oneShot
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
        /// Devices beyond the slots are connected on demand (false: they wait
        /// until a slot is free, for an app that keeps one device at a time).
        public var onDemandBeyondSlots = true
        /// Whether a device is tried again: false for one-shot jobs, where a
        /// failed attempt or a dropped link is the device's end (`.gone`,
        /// with `Event.connectFailed` or `Event.linkDown`) and nothing is
        /// reconnected from the accept list.
        public var reconnect = true
        /// Several targets on a controller that cannot scan while initiating
        /// (one-shot jobs): after the first is heard, connects wait while the
        /// scan goes on, until every target is heard, one is heard advertising
        /// again, or this many ms passed (KeeperGather.swift); 0: at once.
        public var gatherMs = 0

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
        /// A scan could not be started (tried again on the next tick).
        case scanFailed(any Error)
    }

    /// A subscription, for `cancel`.
    public typealias Subscription = Subscribers<Event>.Token

    public let policy: Policy
    /// The current stack (a new one after the controller was reopened; nil meanwhile).
    public private(set) var stack: BLEStack?
    /// The event loop every stack runs on.
    public let loop: EventLoop
    /// Which devices to keep: called for every connectable report not yet adopted.
    public var wants: (DiscoveredDevice) -> Bool = { _ in false }
    /// Whether the owner has work for an on-demand device (it is connected
    /// for it, and released only without it).
    public var hasWork: (KeptDevice) -> Bool = { _ in false }
    /// No connection attempt runs past this (a one-shot run's deadline):
    /// an attempt's timeout is cut to what is left.
    public var deadline: Instant?
    /// Whether there is anything left to find: the keeper scans only while
    /// this says so (one-shot jobs: some target not yet heard).
    public var scanWanted: () -> Bool = { true }
    /// Log lines (what the keeper decided and why).
    public var log: (String) -> Void = { _ in }
    /// The devices adopted so far, by address.
    public internal(set) var devices: [BDAddress: KeptDevice] = [:]

    private let reopen: (() throws -> BLEStack)?
    private let close: (BLEStack) -> Void
    private var subscribers = Subscribers<Event>()
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
    var acceptArming = false
    var acceptNotBefore = Instant.now()
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

    // MARK: subscribers

    /// Calls `handler` with every event from now on, in subscription order.
    @discardableResult
    public func subscribe(_ handler: @escaping (Event) -> Void) -> Subscription {
        subscribers.add(handler)
    }

    public func cancel(_ s: Subscription) { subscribers.remove(s) }

    func emit(_ e: Event) { subscribers.emit(e) }

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
                guard let self, !self.stopping, let dev = self.devices[c.peer.address], dev.link == nil, dev.state != .gone else { return false }
                self.log("\(dev.label): a connection given up earlier completed: adopting it")
                self.linkUp(dev, st.attach(c))
                return true
            },
        ]
        scheduleTick(st.host)
        ensureScanning()
        chooseReconnectPath(st)
    }

    /// Unhooks from a failed stack: every link is gone with it.
    func detach(_ st: BLEStack) {
        // No accept-list connect on the controller being dropped: decided anew on the next.
        reconnectPath = .unknown
        acceptArming = false
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

    // MARK: what the owner tells the keeper

    /// The owner set `device`'s link up: it counts as kept from now on (it
    /// comes back from the accept list), and its backoff starts over.
    public func ready(_ device: KeptDevice) {
        guard device.link != nil else { return }
        device.attempts = 0
        device.backoff.reset()
        device.connectedAt = Instant.now()
        device.state = .ready
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

    /// A device at a known address (given, or remembered from an earlier
    /// run), connected at the keeper's next chance without waiting for a
    /// report; `timeoutMs` bounds its attempts instead of the policy's
    /// (a remembered address is tried briefly before a scan).
    @discardableResult
    public func reach(_ address: DeviceAddress, name: String? = nil, timeoutMs: Int? = nil) -> KeptDevice {
        let dev = devices[address.address] ?? adopt(address)
        devices[address.address] = dev
        if let name { dev.name = name }
        dev.connectTimeoutMs = timeoutMs
        if dev.state == .gone { dev.state = .wanted }
        tryConnect(dev)
        return dev
    }

    /// A new device, numbered in the order it was adopted.
    func adopt(_ address: DeviceAddress) -> KeptDevice {
        adopted += 1
        let dev = KeptDevice(address: address, backoff: policy.deviceBackoff, order: adopted)
        devices[address.address] = dev
        return dev
    }

    /// Forgets a device that has no link (an address that did not answer):
    /// a report from it is judged by `wants` again.
    public func forget(_ device: KeptDevice) {
        guard device.link == nil, devices[device.address.address] === device, connecting !== device else { return }
        devices[device.address.address] = nil
    }

    /// The owner has work for `device`: an on-demand device without a link is connected.
    public func need(_ device: KeptDevice) {
        if device.link == nil { tryConnect(device) }
    }

    /// The owner finished a piece of work on `device`: an on-demand link is
    /// let go after `onDemandIdleMs` without more (`hasWork` false).
    public func idle(_ device: KeptDevice) {
        guard device.mode == .onDemand, let h = stack?.host else { return }
        if let t = device.releaseTimer { h.cancel(t) }
        device.releaseTimer = h.schedule(afterMs: policy.onDemandIdleMs) { [weak self, weak device] in
            guard let self, let device else { return }
            device.releaseTimer = nil
            guard device.mode == .onDemand, !self.hasWork(device), let link = device.link else { return }
            device.state = .releasing
            self.log("\(device.label): idle: releasing the on-demand link")
            _ = link.startDisconnect()
        }
    }

    /// How many devices have a link now.
    public var linkCount: Int { devices.values.filter { $0.link != nil }.count }
}
