import BLEWire
import BLETransport

/// ACL data sent on a connection was not reported completed (Number Of
/// Completed Packets) within the deadline of `HCIHost.startDrain`.
public struct ACLDrainTimeout: Error, Hashable, Sendable, CustomStringConvertible {
    public var handle: UInt16
    /// Packets still unacknowledged when the deadline passed.
    public var packets: Int
    public var ms: Int
    /// - Returns: the timeout for `handle` with `packets` still outstanding after `ms`.
    public init(handle: UInt16, packets: Int, ms: Int) { self.handle = handle; self.packets = packets; self.ms = ms }
    public var description: String {
        "the controller did not confirm \(packets) packet(s) sent on handle 0x\(Hex.int(handle, width: 4)) within \(ms) ms: the link has gone quiet (out of range?)"
    }
}

/// `HCIHost.wait(_:until:)` reached its deadline before the future completed.
public struct WaitTimeout: Error, Sendable, CustomStringConvertible {
    /// - Returns: a WaitTimeout.
    public init() {}
    public var description: String { "the operation did not complete in time" }
}

// The loop blocks in the transport while this host drives it.
extension HCIHost: EventLoopDriver {
    public func prepare(now: Instant) throws -> Instant? {
        if let f = failure { throw f }
        flushCommands()
        flushACL()
        expireCommands(now)
        if let f = failure { throw f }
        // The host's timers are the loop's: it wakes for them itself.
        var due: Instant?
        for p in inFlight where due.map({ p.deadline < $0 }) ?? true { due = p.deadline }
        for p in queued where due.map({ p.deadline < $0 }) ?? true { due = p.deadline }
        return due
    }

    public func block(timeoutMs: Int, wakeFD: Int32) throws -> Bool {
        let result: ReceiveResult
        do {
            result = try transport.receive(timeoutMs: timeoutMs, wakeFD: wakeFD)
        } catch let e as TransportError {
            fail(.transport(e))
            throw HCIError.transport(e)
        }
        switch result {
        case .packet(let p):
            handle(p)
            if let f = failure { throw f }
            return false
        case .timeout: return false
        case .woken: return true
        }
    }
}
