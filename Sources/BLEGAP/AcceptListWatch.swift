import BLEWire
import BLEHCI

/// Tells a controller that ignores its Filter Accept List (it connects only
/// to Peer_Address, as Bumble's does) from one that uses it: a device in the
/// list heard advertising connectable for `deadlineMs` while the accept-list
/// connect stays pending means the list is ignored. Reset it whenever a new
/// accept-list connect starts.
public struct AcceptListWatch: Sendable {
    public let deadlineMs: Int
    private var firstHeard: [BDAddress: Instant] = [:]

    public init(deadlineMs: Int) { self.deadlineMs = deadlineMs }

    /// A new accept-list connect: forget what was heard.
    public mutating func reset() { firstHeard.removeAll() }

    /// `peer` was heard advertising at `now` while `pending` (the accept-list
    /// connect's devices) waits.
    /// - Returns: how long it has been heard without being connected (ms)
    ///   once that reaches the deadline, meaning the list is ignored; nil before.
    public mutating func heard(_ peer: DeviceAddress, at now: Instant = .now(), pending: [DeviceAddress]) -> Int? {
        guard pending.contains(where: { $0.address == peer.address }) else { return nil }
        let first = firstHeard[peer.address] ?? now
        firstHeard[peer.address] = first
        let ms = first.msUntil(now)
        return ms >= deadlineMs ? ms : nil
    }
}
