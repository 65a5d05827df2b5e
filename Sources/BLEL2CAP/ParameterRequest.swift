import BLEWire
import BLEHCI

/// Why our Connection Parameter Update Request got no answer.
public enum L2CAPError: Error, Equatable, Sendable, CustomStringConvertible {
    /// No response within the deadline.
    case timeout(ms: Int)
    /// The central answered with Command Reject (its reason).
    case commandRejected(reason: UInt16)
    /// The link ended first.
    case closed
    /// Only a peripheral may send the request (Core Vol 3 Part A 4.20).
    case notPeripheral

    public var description: String {
        switch self {
        case .timeout(let ms): return "no Connection Parameter Update Response within \(ms) ms"
        case .commandRejected(let r): return "the central rejected the Connection Parameter Update Request (Command Reject, reason 0x\(Hex.int(r, width: 4)))"
        case .closed: return "the link ended before the Connection Parameter Update Response"
        case .notPeripheral: return "only the peripheral may send a Connection Parameter Update Request"
        }
    }
}

// The peripheral side of the connection parameter update over L2CAP
// (Core Vol 3 Part A 4.20, 4.21): ask the central, hear its answer.
extension L2CAPLink {
    /// Sends a Connection Parameter Update Request (interval min and max,
    /// latency, supervision timeout of `p`; its CE lengths have no field).
    /// The central answers with a Response, and when it accepted, carries
    /// the update out itself (LE Connection Update Complete follows, which
    /// the Central applies to the connection).
    /// - Parameter timeoutMs: how long to wait for the Response (the
    ///   signalling RTX is 1-60 s, Vol 3 Part A 6.2.1; default 30 s).
    /// - Returns: a future of the result: true accepted, false rejected; it
    ///   fails with `L2CAPError` (no answer by the deadline, Command Reject,
    ///   link closed, not a peripheral link).
    @discardableResult
    public func requestConnectionParameters(_ p: ConnectionParameters, timeoutMs: Int = 30_000) -> Future<Bool> {
        guard isPeripheral else { return Future(error: L2CAPError.notPeripheral) }
        guard isOpen else { return Future(error: L2CAPError.closed) }
        let id = identifier()
        let f = Future<Bool>()
        let timer = host.schedule(afterMs: timeoutMs) { [weak self] in
            guard let self, let r = self.parameterRequests.removeValue(forKey: id) else { return }
            r.future.fail(L2CAPError.timeout(ms: timeoutMs))
        }
        parameterRequests[id] = (f, timer)
        send(cid: CID.leSignalling, SignallingCommand.connectionParameterUpdateRequest(identifier: id, p).encoded)
        return f
    }

    /// A Connection Parameter Update Response or Command Reject: completes
    /// the request with its identifier; one nobody asked for is ignored.
    func parameterAnswer(_ cmd: SignallingCommand) {
        guard let r = parameterRequests[cmd.identifier], let v = try? cmd.values(), let first = v.first else { return }
        parameterRequests[cmd.identifier] = nil
        host.cancel(r.timer)
        if cmd.code == SignallingCommand.commandReject { r.future.fail(L2CAPError.commandRejected(reason: first)) }
        else { r.future.succeed(first == 0) }
    }

    func failParameterRequests(_ e: L2CAPError) {
        let all = parameterRequests.values
        parameterRequests.removeAll()
        for r in all { host.cancel(r.timer); r.future.fail(e) }
    }
}
