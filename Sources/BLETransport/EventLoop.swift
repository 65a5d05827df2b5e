#if canImport(Glibc)
import Glibc
#endif
import BLEWire
import CEpoll

/// Why `EventLoop.run` ended other than by its condition or deadline.
public enum EventLoopError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A signal (SIGINT, SIGTERM) arrived and the run was interruptible.
    case interrupted(signal: Int32)
    /// `run` was called from inside a handler of the same loop: a blocking
    /// call made from a callback, which would starve everything else.
    case nested

    public var description: String {
        switch self {
        case .interrupted(let s): return "interrupted by signal \(s)"
        case .nested: return "the event loop was run from inside one of its own handlers (a blocking call in a callback): a bug in attled"
        }
    }
}

/// What the loop blocks in while it has one (the HCI host): the controller's
/// transport, which returns as soon as a packet or the loop's own descriptor
/// is ready. Without a driver the loop blocks in epoll itself, so it runs as
/// well with no controller at all.
public protocol EventLoopDriver: AnyObject {
    /// Work before blocking (queued commands and data go out, the driver's
    /// own deadlines run). Returns the earliest instant the driver must run
    /// again; throws to end the run (the driver failed).
    func prepare(now: Instant) throws -> Instant?
    /// Blocks up to `timeoutMs` for the driver's input or for `wakeFD`.
    /// - Returns: true when `wakeFD` became readable.
    func block(timeoutMs: Int, wakeFD: Int32) throws -> Bool
}

/// The one event loop of a process: descriptors, timers, signals and one
/// driver (the HCI host), on one thread. A library user creates one and hands
/// it to the stack (`HCIHost(transport:loop:)`); the MQTT client, the
/// terminal and the signal pipe register with the same loop, so a packet, a
/// broker message, a key press and a signal are each handled the moment they
/// arrive, with or without a controller. Handlers run inside `run` and must
/// not call `run` themselves (that is caught: `EventLoopError.nested`).
public final class EventLoop {
    /// One registration (a descriptor, a timer); pass it to `cancel(_:)`.
    public struct Token: Hashable, Sendable { let id: UInt64 }

    /// What a descriptor is watched for.
    public struct Events: OptionSet, Sendable {
        public let rawValue: UInt32
        public init(rawValue: UInt32) { self.rawValue = rawValue }
        public static let readable = Events(rawValue: UInt32(EPOLLIN.rawValue))
        public static let writable = Events(rawValue: UInt32(EPOLLOUT.rawValue))
        /// Reported with either: the peer closed or the descriptor failed.
        public static let hangup = Events(rawValue: UInt32(EPOLLHUP.rawValue | EPOLLERR.rawValue))
    }

    private struct Watch {
        var fd: Int32
        var events: Events
        var handler: (Events) -> Void
    }
    private struct Timer {
        var token: Token
        var due: Instant
        var action: () -> Void
    }

    private let epfd: Int32
    private var nextID: UInt64 = 1
    private var watches: [Token: Watch] = [:]
    private var byFD: [Int32: Token] = [:]
    private var timers: [Timer] = []
    private var depth = 0
    private var signalToken: Token?

    /// The driver the loop blocks in (the HCI host), if any.
    public weak var driver: EventLoopDriver?
    /// Called after SIGHUP (when `watchSignals()` installed it).
    public var onHangup: (() -> Void)?
    /// Called after SIGWINCH (when `watchSignals(resize:)` installed it).
    public var onResize: (() -> Void)?

    /// The descriptor that is readable whenever a watched one is ready (the
    /// driver's transport polls it beside its own).
    public var fd: Int32 { epfd }

    /// A loop with nothing registered. Should the kernel refuse an epoll set
    /// (descriptor limits), the loop still runs its driver and timers, and
    /// `watch` has no effect.
    public init() {
        epfd = epoll_create1(Int32(EPOLL_CLOEXEC))
    }

    deinit { if epfd >= 0 { Glibc.close(epfd) } }

    private func token() -> Token {
        defer { nextID += 1 }
        return Token(id: nextID)
    }

    // MARK: descriptors

    /// Calls `handler` whenever `fd` is ready for `events` (hang-ups and
    /// errors always count). One registration per descriptor.
    @discardableResult
    public func watch(_ fd: Int32, _ events: Events, _ handler: @escaping (Events) -> Void) -> Token {
        if let old = byFD[fd] { cancel(old) }
        let t = token()
        var ev = epoll_event(events: events.rawValue, data: epoll_data_t(fd: fd))
        _ = epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev)
        watches[t] = Watch(fd: fd, events: events, handler: handler)
        byFD[fd] = t
        return t
    }

    /// Changes what a watched descriptor is watched for.
    public func update(_ t: Token, _ events: Events) {
        guard var w = watches[t], w.events != events else { return }
        w.events = events
        watches[t] = w
        var ev = epoll_event(events: events.rawValue, data: epoll_data_t(fd: w.fd))
        _ = epoll_ctl(epfd, EPOLL_CTL_MOD, w.fd, &ev)
    }

    /// The events a registration is watched for (nil once cancelled).
    public func events(of t: Token) -> Events? { watches[t]?.events }

    // MARK: timers

    /// Runs `action` once at `due` (inside `run`).
    @discardableResult
    public func schedule(at due: Instant, _ action: @escaping () -> Void) -> Token {
        let t = token()
        timers.append(Timer(token: t, due: due, action: action))
        return t
    }

    /// Runs `action` once after `ms` milliseconds.
    @discardableResult
    public func schedule(afterMs ms: Int, _ action: @escaping () -> Void) -> Token {
        schedule(at: Instant.now().adding(ms: ms), action)
    }

    /// Cancels a descriptor watch or a timer; a spent or unknown token is ignored.
    public func cancel(_ t: Token) {
        if let w = watches.removeValue(forKey: t) {
            byFD[w.fd] = nil
            _ = epoll_ctl(epfd, EPOLL_CTL_DEL, w.fd, nil)
        }
        timers.removeAll { $0.token == t }
    }

    /// Live registrations (descriptors and timers), for leak checks in tests.
    public var registrationCount: Int { watches.count + timers.count }

    // MARK: signals

    /// Watches SIGINT and SIGTERM (they end interruptible runs), SIGHUP
    /// (`onHangup`) and, with `resize`, SIGWINCH (`onResize`), through
    /// `SignalWatch`'s pipe. Installs the handlers if needed.
    public func watchSignals(hangup: Bool = false, resize: Bool = false) {
        SignalWatch.install()
        if hangup { SignalWatch.installHangup() }
        if resize { SignalWatch.installResize() }
        guard signalToken == nil, SignalWatch.wakeFD >= 0 else { return }
        signalToken = watch(SignalWatch.wakeFD, .readable) { [weak self] _ in
            SignalWatch.drain()
            if SignalWatch.takeHangup() { self?.onHangup?() }
            if SignalWatch.takeResized() { self?.onResize?() }
        }
    }

    /// The signal that ends interruptible runs, once one arrived (only when watched).
    public var interruption: Int32? { signalToken == nil ? nil : SignalWatch.received }

    // MARK: running

    /// Runs until `done()` holds (true) or `deadline` passes (false): due
    /// timers, ready descriptors, and the driver's packets, in arrival order.
    /// - Throws: `EventLoopError.interrupted` when `interruptible` and a
    ///   signal arrived; `.nested` from inside a handler; the driver's error.
    @discardableResult
    public func run(until deadline: Instant, interruptible: Bool = true, _ done: () -> Bool) throws -> Bool {
        guard depth == 0 else { throw EventLoopError.nested }
        depth += 1
        defer { depth -= 1 }
        var turns = 0
        while true {
            if done() { return true }
            if interruptible, let s = interruption { throw EventLoopError.interrupted(signal: s) }
            let driverDue = try driver?.prepare(now: Instant.now())
            runDueTimers()
            if done() { return true }
            let now = Instant.now()
            if now >= deadline { return false }
            var until = deadline
            if let d = driverDue, d < until { until = d }
            for t in timers where t.due < until { until = t.due }
            let timeout = max(0, now.msUntil(until))
            if let driver {
                turns += 1
                // The descriptors are checked when they woke the driver, and
                // every few packets, so a busy controller cannot starve them.
                if try driver.block(timeoutMs: timeout, wakeFD: epfd) || turns % 8 == 0 { dispatchReady(timeoutMs: 0) }
            } else {
                dispatchReady(timeoutMs: timeout)
            }
        }
    }

    /// Runs the loop until `deadline`, for a pause that still serves everything.
    public func sleep(until deadline: Instant, interruptible: Bool = true) throws {
        _ = try run(until: deadline, interruptible: interruptible) { false }
    }

    private func runDueTimers() {
        let now = Instant.now()
        guard timers.contains(where: { $0.due <= now }) else { return }
        let due = timers.filter { $0.due <= now }.sorted { $0.due < $1.due }
        timers.removeAll { $0.due <= now }
        for t in due { t.action() }
    }

    /// Waits up to `timeoutMs` for watched descriptors and calls their handlers.
    private func dispatchReady(timeoutMs: Int) {
        guard epfd >= 0 else {
            if timeoutMs > 0 { _ = poll(nil, 0, Int32(clamping: timeoutMs)) }
            return
        }
        var events = [epoll_event](repeating: epoll_event(), count: 16)
        let n = epoll_wait(epfd, &events, 16, Int32(clamping: timeoutMs))
        guard n > 0 else { return }
        for e in events.prefix(Int(n)) {
            // A handler may have cancelled a later one in this batch.
            guard let t = byFD[e.data.fd], let w = watches[t] else { continue }
            w.handler(Events(rawValue: e.events))
        }
    }
}
