import BLEWire
import BLETransport

/// The HCI layer: owns the transport, runs the single event loop, matches
/// Command Complete/Status to commands (with Num_HCI_Command_Packets flow
/// control and a deadline per command), meters ACL data against the
/// controller's buffers (LE Read Buffer Size, Number Of Completed Packets),
/// and dispatches every other event and all incoming ACL data upward.
///
/// Confined to one thread. Layers above register handlers, which run
/// synchronously inside `pump`; handlers queue work (commands, ACL) but never
/// pump themselves. Blocking operations are built as "queue, then pump until
/// a condition holds or a deadline passes", so a unit test can drive a whole
/// exchange from a scripted transport without threads or sleeps.
public final class HCIHost {
    public let transport: HCITransport
    /// Packet taps (tracer, btsnoop writer): every packet passes here once.
    public var observers: [PacketObserver] = []
    /// Deadline for a command's Command Complete/Status.
    public var commandTimeoutMs = 2000
    /// When true, a pending SIGINT/SIGTERM makes `pump` throw `.interrupted`.
    public var interruptible = true

    public typealias CommandCompletion = (Result<CommandOutcome, HCIError>) -> Void

    /// What answered a command.
    public enum CommandOutcome: Sendable {
        case complete(CommandComplete)
        case status(CommandStatus)
    }

    struct Pending {
        var command: HCICommand
        var timeoutMs: Int
        var deadline: Instant?
        var completion: CommandCompletion
    }

    private var queued: [Pending] = []
    private var inFlight: [Pending] = []
    /// Num_HCI_Command_Packets: how many commands the controller accepts now.
    public private(set) var commandCredits = 1

    // ACL flow control.
    public private(set) var aclMaxLength = 27
    public private(set) var aclTotalPackets = 1
    public private(set) var aclCredits = 1
    private var aclQueue: [ACLPacket] = []
    private var aclOutstanding: [UInt16: Int] = [:]

    private var eventHandlers: [(HCIEvent) -> Void] = []
    private var aclHandlers: [(ACLPacket) -> Void] = []
    private var undecodableHandlers: [(HCIPacket, WireError) -> Void] = []
    /// After a Hardware Error the transport still works: clear the fatal state
    /// so clean-up can try to disconnect and reset. Returns false when the
    /// failure was the transport itself (nothing can be sent any more).
    public func recoverForCleanup() -> Bool {
        guard let f = fatalError else { return true }
        if case .hardwareError = f {
            fatalError = nil
            commandCredits = max(commandCredits, 1)
            return true
        }
        return false
    }

    /// Called inside `pump` whenever the wake pipe fires (a signal, SIGWINCH,
    /// or `SignalWatch.poke()` from an input thread).
    public var onWake: (() -> Void)?
    /// Set once the transport has failed; every later call rethrows it.
    public private(set) var fatalError: HCIError?

    public init(transport: HCITransport) {
        self.transport = transport
    }

    // MARK: registration

    /// Called for every decoded event except Command Complete/Status, which
    /// complete their commands, and Number Of Completed Packets, which feeds ACL credits
    /// (handlers still see those two afterwards).
    public func onEvent(_ h: @escaping (HCIEvent) -> Void) { eventHandlers.append(h) }
    /// Called for every incoming ACL packet.
    public func onACL(_ h: @escaping (ACLPacket) -> Void) { aclHandlers.append(h) }
    /// Called for an event that failed to decode (it is otherwise ignored).
    public func onUndecodable(_ h: @escaping (HCIPacket, WireError) -> Void) { undecodableHandlers.append(h) }

    // MARK: commands

    /// Queues a command; `completion` runs inside a later `pump` with the
    /// Command Complete or Command Status, or with `.commandTimeout`.
    public func enqueue(_ command: HCICommand, timeoutMs: Int? = nil, completion: @escaping CommandCompletion) {
        if let f = fatalError { completion(.failure(f)); return }
        queued.append(Pending(command: command, timeoutMs: timeoutMs ?? commandTimeoutMs, deadline: nil, completion: completion))
        flushCommands()
    }

    /// Sends a command and waits for its Command Complete; returns the
    /// return parameters after checking the status byte.
    @discardableResult
    public func execute(_ command: HCICommand, timeoutMs: Int? = nil) throws -> [UInt8] {
        var result: Result<CommandOutcome, HCIError>? = nil
        enqueue(command, timeoutMs: timeoutMs) { result = $0 }
        _ = try pump(until: .distantFuture) { result != nil }
        switch result! {
        case .failure(let e): throw e
        case .success(.complete(let cc)):
            if let s = cc.status, s != .success { throw HCIError.commandFailed(command.opcode, s) }
            return cc.returnParameters
        case .success(.status(let cs)):
            if cs.status != .success { throw HCIError.commandFailed(command.opcode, cs.status) }
            return [cs.status.rawValue]
        }
    }

    /// Sends a command answered by Command Status (e.g. LE Create Connection)
    /// and waits for that status; the command's outcome comes later as an event.
    public func executeExpectingStatus(_ command: HCICommand, timeoutMs: Int? = nil) throws {
        _ = try execute(command, timeoutMs: timeoutMs)
    }

    private func flushCommands() {
        while commandCredits > 0, !queued.isEmpty, fatalError == nil {
            var p = queued.removeFirst()
            p.deadline = Instant.now().adding(ms: p.timeoutMs)
            commandCredits -= 1
            do {
                try emit(p.command.packet)
                inFlight.append(p)
            } catch {
                p.completion(.failure(fatalError ?? .transport(.closedByPeer(transport.name))))
            }
        }
    }

    // MARK: ACL

    /// Sends an L2CAP PDU (basic header included) on `handle`, split into
    /// fragments of the controller's LE ACL size and metered by its buffer credits.
    public func sendACL(handle: UInt16, pdu: [UInt8]) {
        var offset = 0
        var first = true
        repeat {
            let n = min(aclMaxLength, pdu.count - offset)
            aclQueue.append(ACLPacket(handle: handle, boundary: first ? .firstNonFlushable : .continuing,
                                      data: Array(pdu[offset..<offset + n])))
            offset += n
            first = false
        } while offset < pdu.count
        flushACL()
    }

    private func flushACL() {
        while aclCredits > 0, !aclQueue.isEmpty, fatalError == nil {
            let p = aclQueue.removeFirst()
            aclCredits -= 1
            aclOutstanding[p.handle, default: 0] += 1
            do { try emit(p.packet) } catch { return }
        }
    }

    /// ACL packets for `handle` queued or not yet confirmed by Number Of Completed Packets.
    public func unacknowledgedACL(handle: UInt16) -> Int {
        aclOutstanding[handle, default: 0] + aclQueue.filter { $0.handle == handle }.count
    }

    /// Sets the ACL buffer geometry (from LE Read Buffer Size / Read Buffer Size).
    public func setACLBuffers(length: Int, packets: Int) {
        aclMaxLength = max(1, length)
        aclTotalPackets = max(1, packets)
        aclCredits = aclTotalPackets - aclOutstanding.values.reduce(0, +)
    }

    /// Forgets the queued and unacknowledged packets of a handle (after disconnection
    /// the controller flushes them, and their credits come back).
    public func releaseHandle(_ handle: UInt16) {
        let n = aclOutstanding.removeValue(forKey: handle) ?? 0
        aclQueue.removeAll { $0.handle == handle }
        aclCredits = min(aclTotalPackets, aclCredits + n)
    }

    // MARK: the loop

    private func emit(_ packet: HCIPacket) throws {
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

    private func fail(_ e: HCIError) {
        if fatalError == nil { fatalError = e }
        let pend = inFlight + queued
        inFlight.removeAll(); queued.removeAll()
        for p in pend { p.completion(.failure(e)) }
    }

    /// Runs the event loop until `done()` returns true (returns true) or
    /// `deadline` passes (returns false). Throws on transport loss, a
    /// hardware error, or (when `interruptible`) a pending signal.
    @discardableResult
    public func pump(until deadline: Instant, _ done: () -> Bool) throws -> Bool {
        while true {
            if done() { return true }
            if let f = fatalError { throw f }
            if interruptible, let s = SignalWatch.received { throw HCIError.interrupted(signal: s) }
            flushCommands()
            flushACL()
            var now = Instant.now()
            expireCommands(now)
            if done() { return true }
            now = Instant.now()
            if now >= deadline { return false }
            var until = deadline
            for p in inFlight { if let d = p.deadline, d < until { until = d } }
            let result: ReceiveResult
            do {
                result = try transport.receive(timeoutMs: now.msUntil(until), wakeFD: SignalWatch.wakeFD)
            } catch let e as TransportError {
                fail(.transport(e))
                throw HCIError.transport(e)
            }
            switch result {
            case .packet(let p): handle(p)
            case .timeout: continue
            case .woken:
                SignalWatch.drain()
                onWake?()
            }
        }
    }

    private func expireCommands(_ now: Instant) {
        var expired: [Pending] = []
        inFlight.removeAll { p in
            if let d = p.deadline, d <= now { expired.append(p); return true }
            return false
        }
        for p in expired {
            // The controller never answered: assume it can take another command,
            // or the queue behind this one would stall forever.
            commandCredits = max(commandCredits, 1)
            p.completion(.failure(.commandTimeout(p.command.opcode, ms: p.timeoutMs)))
        }
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
                for h in undecodableHandlers { h(packet, e) }
                return
            } catch { return }
            handleEvent(ev)
        case .acl:
            guard let acl = try? ACLPacket.decode(packet.bytes) else {
                for h in undecodableHandlers { h(packet, .invalid(field: "ACL", reason: "length mismatch")) }
                return
            }
            for h in aclHandlers { h(acl) }
        default:
            break // SCO/ISO: recognised and passed over.
        }
    }

    private func handleEvent(_ ev: HCIEvent) {
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
        case .hardwareError(let code):
            fail(.hardwareError(code))
        case .disconnectionComplete(let dc) where dc.status == .success:
            releaseHandle(dc.handle)
        default:
            break
        }
        for h in eventHandlers { h(ev) }
        flushCommands()
        flushACL()
    }
}
