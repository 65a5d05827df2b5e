import BLEWire
import BLETransport

/// Identifies one registration with `HCIHost` (an event or ACL handler, a
/// timer, a close handler); pass it to `HCIHost.cancel(_:)` to remove it.
/// A handler's is its `Subscribers` token, a timer's the event loop's.
public struct HostToken: Hashable, Sendable {
    enum Registration: Hashable, Sendable {
        case event(Subscribers<HCIEvent>.Token)
        case acl(Subscribers<ACLPacket>.Token)
        case undecodable(Subscribers<HCIHost.Undecodable>.Token)
        case close(Subscribers<HCIError>.Token)
        case timer(EventLoop.Token)
    }
    let registration: Registration
    init(_ r: Registration) { registration = r }
}

/// The HCI layer: owns the transport, runs the single event loop, matches
/// Command Complete/Status to commands (with Num_HCI_Command_Packets flow
/// control and a deadline per command that starts when it is queued), meters
/// ACL data against the controller's buffers (LE Read Buffer Size, Number Of
/// Completed Packets) fairly across connections, schedules timers on the
/// event loop, and dispatches every other event and all incoming ACL data upward. It drives an
/// `EventLoop` (its own, or one shared with the rest of the program: the
/// MQTT client, the terminal, signals), which blocks in the transport.
///
/// Confined to one thread. Layers above register handlers (each registration
/// returns a `HostToken` to cancel it), which run synchronously inside `pump`;
/// handlers queue work (commands, ACL, timers) and complete `Future`s but
/// never pump themselves. Blocking operations are "queue, then pump until a
/// condition holds or a deadline passes" (`wait`), so a unit test can drive a
/// whole exchange, several links interleaved, from a scripted transport
/// without threads or sleeps.
///
/// Lifecycle: open (usable) until the transport fails or `close(_:)` is
/// called; from then on every pending and later operation fails with that
/// error (`failure`).
public final class HCIHost {
    /// The controller transport.
    public let transport: HCITransport
    /// Packet taps (tracer, btsnoop writer): every packet passes here once.
    public var observers: [PacketObserver] = []
    /// Deadline for a command's Command Complete/Status, counted from when it is queued.
    public var commandTimeoutMs = 2000
    /// When true, a signal the loop watches (SIGINT, SIGTERM) makes `pump` throw `.interrupted`.
    public var interruptible = true
    /// The event loop this host drives; its descriptors and timers run while the host pumps.
    public let loop: EventLoop

    /// The completion of a queued command.
    public typealias CommandCompletion = (Result<CommandOutcome, HCIError>) -> Void

    /// What answered a command.
    public enum CommandOutcome: Sendable {
        case complete(CommandComplete)
        case status(CommandStatus)
    }

    struct Pending {
        var command: HCICommand
        var timeoutMs: Int
        var deadline: Instant
        var completion: CommandCompletion
    }

    var queued: [Pending] = []
    var inFlight: [Pending] = []
    /// Num_HCI_Command_Packets: how many commands the controller accepts now.
    public private(set) var commandCredits = 1

    // ACL flow control.
    /// The controller's ACL data packet length (fragment size).
    public internal(set) var aclMaxLength = 27
    /// The controller's number of ACL buffers.
    public internal(set) var aclTotalPackets = 1
    /// Buffers free now.
    public internal(set) var aclCredits = 1
    /// Fragments waiting for credits, per connection handle; served round-robin.
    var aclQueues: [UInt16: [ACLPacket]] = [:]
    var aclOrder: [UInt16] = []
    var aclOutstanding: [UInt16: Int] = [:]

    /// A packet that failed to decode, and why.
    typealias Undecodable = (packet: HCIPacket, error: WireError)
    let eventHandlers = Subscribers<HCIEvent>()
    let aclHandlers = Subscribers<ACLPacket>()
    let undecodableHandlers = Subscribers<Undecodable>()
    var closeHandlers = Subscribers<HCIError>()

    /// The host's timers, pending on the event loop: cancelled when the host fails.
    var timers: Set<EventLoop.Token> = []

    /// Set once the transport has failed or the host was closed; every later call fails with it.
    public private(set) var failure: HCIError?

    /// - Parameters:
    ///   - transport: the controller, already open.
    ///   - loop: the event loop to drive (default: one of its own).
    public init(transport: HCITransport, loop: EventLoop = EventLoop()) {
        self.transport = transport
        self.loop = loop
        loop.driver = self
    }

    // MARK: lifecycle

    /// Closes the host: every queued and in-flight command fails with `error`,
    /// the ACL queues and counters are cleared, timers are dropped, and the
    /// close handlers run (links and bearers fail their own pending requests).
    /// The transport is left to its owner. Idempotent.
    public func close(_ error: HCIError = .closed) {
        fail(error)
    }

    /// After a Hardware Error the transport still works: clear the failure so
    /// clean-up can try to disconnect and reset. Fragments queued before the
    /// error are dropped (they belong to a controller state that is gone).
    /// Returns false when the failure was the transport itself (nothing can
    /// be sent any more) or a close.
    public func recoverForCleanup() -> Bool {
        guard let f = failure else { return true }
        if case .hardwareError = f {
            failure = nil
            commandCredits = max(commandCredits, 1)
            clearACL()
            return true
        }
        return false
    }

    func fail(_ e: HCIError) {
        guard failure == nil else { return }
        failure = e
        // The loop goes on without this host (a program may serve other
        // things until it opens the controller again).
        if loop.driver === self { loop.driver = nil }
        let pend = inFlight + queued
        inFlight.removeAll(); queued.removeAll()
        clearACL()
        for t in timers { loop.cancel(t) }
        timers.removeAll()
        let drains = drainWaiters
        drainWaiters.removeAll()
        for p in pend { p.completion(.failure(e)) }
        for (_, f, _) in drains { f.fail(e) }
        let hs = closeHandlers
        closeHandlers = Subscribers()
        hs.emit(e)
    }

    func clearACL() {
        aclQueues.removeAll(); aclOrder.removeAll(); aclOutstanding.removeAll()
        aclCredits = aclTotalPackets
    }

    // MARK: commands

    /// Queues a command; `completion` runs inside a later `pump` with the
    /// Command Complete or Command Status, or with `.commandTimeout` once
    /// `timeoutMs` (default `commandTimeoutMs`) has passed since now, whether
    /// or not the command could be sent meanwhile.
    public func enqueue(_ command: HCICommand, timeoutMs: Int? = nil, completion: @escaping CommandCompletion) {
        if let f = failure { completion(.failure(f)); return }
        let ms = timeoutMs ?? commandTimeoutMs
        queued.append(Pending(command: command, timeoutMs: ms, deadline: Instant.now().adding(ms: ms), completion: completion))
        flushCommands()
    }

    /// Queues a command and returns its outcome as a future; a non-success
    /// status fails it with `.commandFailed`.
    public func submit(_ command: HCICommand, timeoutMs: Int? = nil) -> Future<[UInt8]> {
        let f = Future<[UInt8]>()
        enqueue(command, timeoutMs: timeoutMs) { r in
            f.complete(Self.returnParameters(command, r).mapError { $0 as any Error })
        }
        return f
    }

    /// The return parameters of a command outcome, or `.commandFailed` for a non-success status.
    public static func returnParameters(_ command: HCICommand, _ r: Result<CommandOutcome, HCIError>) -> Result<[UInt8], HCIError> {
        switch r {
        case .failure(let e): return .failure(e)
        case .success(.complete(let cc)):
            if let s = cc.status, s != .success { return .failure(.commandFailed(command.opcode, s)) }
            return .success(cc.returnParameters)
        case .success(.status(let cs)):
            if cs.status != .success { return .failure(.commandFailed(command.opcode, cs.status)) }
            return .success([cs.status.rawValue])
        }
    }

    /// Sends a command and waits for its Command Complete (or Command Status).
    /// - Returns: the return parameters, after checking the status byte.
    /// - Throws: `HCIError` (rejected, timed out, transport lost, interrupted).
    @discardableResult
    public func execute(_ command: HCICommand, timeoutMs: Int? = nil) throws -> [UInt8] {
        var result: Result<CommandOutcome, HCIError>? = nil
        enqueue(command, timeoutMs: timeoutMs) { result = $0 }
        _ = try pump(until: .distantFuture) { result != nil }
        guard let r = result else { throw failure ?? HCIError.closed }
        return try Self.returnParameters(command, r).get()
    }

    /// Sends a command answered by Command Status (e.g. LE Create Connection)
    /// and waits for that status; the command's outcome comes later as an event.
    /// - Throws: `HCIError`.
    public func executeExpectingStatus(_ command: HCICommand, timeoutMs: Int? = nil) throws {
        _ = try execute(command, timeoutMs: timeoutMs)
    }

    func flushCommands() {
        while commandCredits > 0, !queued.isEmpty, failure == nil {
            let p = queued.removeFirst()
            commandCredits -= 1
            do {
                try emit(p.command.packet)
                inFlight.append(p)
            } catch {
                p.completion(.failure(failure ?? .transport(.closedByPeer(transport.name))))
            }
        }
    }

    var drainWaiters: [(UInt16, Future<Void>, HostToken)] = []

    // MARK: the loop

    func emit(_ packet: HCIPacket) throws {
        if !observers.isEmpty {
            let now = Instant.now()
            for o in observers { o.observe(packet, direction: .sent, at: now) }
        }
        do {
            try transport.send(packet)
        } catch let e as TransportError {
            fail(.transport(e))
            throw HCIError.transport(e)
        }
    }

    /// Runs the event loop until `done()` returns true (returns true) or
    /// `deadline` passes (returns false).
    /// - Throws: the host's `failure` (transport loss, Hardware Error, close),
    ///   or `.interrupted` when `interruptible` and a signal is pending.
    @discardableResult
    public func pump(until deadline: Instant, _ done: () -> Bool) throws -> Bool {
        if done() { return true }
        if let f = failure { throw f }
        loop.driver = self
        let finished: Bool
        do {
            // A failure anywhere (a packet, a timer, a handler) ends the run.
            finished = try loop.run(until: deadline, interruptible: interruptible) { done() || failure != nil }
        } catch EventLoopError.interrupted(let s) {
            throw HCIError.interrupted(signal: s)
        }
        if done() { return true }
        if let f = failure { throw f }
        return finished
    }

    /// Pumps until `future` completes.
    /// - Returns: its value.
    /// - Throws: its error; `.commandTimeout`-style deadlines are the future's
    ///   own business, but `deadline` bounds the wait (then `HCIError.closed`
    ///   is not thrown: `WaitTimeout` is).
    public func wait<T>(_ future: Future<T>, until deadline: Instant = .distantFuture) throws -> T {
        _ = try pump(until: deadline) { future.isComplete }
        guard let r = future.result else { throw WaitTimeout() }
        return try r.get()
    }

    /// Fails the commands whose deadline has passed.
    func expireCommands(_ now: Instant) {
        var expired: [Pending] = []
        inFlight.removeAll { p in
            if p.deadline <= now { expired.append(p); return true }
            return false
        }
        if !expired.isEmpty {
            // The controller never answered: assume it can take another command,
            // or the queue behind this one would stall forever.
            commandCredits = max(commandCredits, 1)
        }
        queued.removeAll { p in
            if p.deadline <= now { expired.append(p); return true }
            return false
        }
        for p in expired { p.completion(.failure(.commandTimeout(p.command.opcode, ms: p.timeoutMs))) }
    }

    /// Entry point for one packet from the controller (public for tests that
    /// inject packets directly).
    public func handle(_ packet: HCIPacket) {
        if !observers.isEmpty {
            let now = Instant.now()
            for o in observers { o.observe(packet, direction: .received, at: now) }
        }
        switch packet.type {
        case .event:
            let ev: HCIEvent
            do { ev = try HCIEvent.decode(packet.bytes) } catch let e as WireError {
                undecodableHandlers.emit((packet, e))
                return
            } catch { return }
            handleEvent(ev)
        case .acl:
            guard let acl = try? ACLPacket.decode(packet.bytes) else {
                undecodableHandlers.emit((packet, .invalid(field: "ACL", reason: "length mismatch")))
                return
            }
            aclHandlers.emit(acl)
        default:
            break // SCO/ISO: recognised and passed over.
        }
    }

    func handleEvent(_ ev: HCIEvent) {
        switch ev {
        case .commandComplete(let cc):
            commandCredits = Int(cc.numCommandPackets)
            if cc.opcode.rawValue != 0, let i = inFlight.firstIndex(where: { $0.command.opcode == cc.opcode }) {
                let p = inFlight.remove(at: i)
                p.completion(.success(.complete(cc)))
            }
        case .commandStatus(let cs):
            commandCredits = Int(cs.numCommandPackets)
            if cs.opcode.rawValue != 0, let i = inFlight.firstIndex(where: { $0.command.opcode == cs.opcode }) {
                let p = inFlight.remove(at: i)
                p.completion(.success(.status(cs)))
            }
        case .numberOfCompletedPackets(let list):
            for hc in list {
                let out = aclOutstanding[hc.handle, default: 0]
                let n = min(out, Int(hc.count))
                aclOutstanding[hc.handle] = out - n
                aclCredits = min(aclTotalPackets, aclCredits + n)
            }
            checkDrains()
        case .hardwareError(let code):
            fail(.hardwareError(code))
        case .disconnectionComplete(let dc) where dc.status == .success:
            releaseHandle(dc.handle)
        default:
            break
        }
        // Handlers may cancel themselves or others meanwhile: one cancelled is not called.
        eventHandlers.emit(ev)
        flushCommands()
        flushACL()
    }
}
