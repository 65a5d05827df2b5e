import BLEWire
import BLETransport

/// ACL data: fragments metered by the controller's buffer credits, the
/// connections taking turns, drains.
extension HCIHost {


    /// Sends an L2CAP PDU (basic header included) on `handle`, split into
    /// fragments of the controller's LE ACL size and metered by its buffer
    /// credits. Connections take turns for credits, one fragment each.
    public func sendACL(handle: UInt16, pdu: [UInt8]) {
        guard failure == nil else { return }
        var offset = 0
        var first = true
        var frags: [ACLPacket] = []
        repeat {
            let n = min(aclMaxLength, pdu.count - offset)
            frags.append(ACLPacket(handle: handle, boundary: first ? .firstNonFlushable : .continuing,
                                   data: Array(pdu[offset..<offset + n])))
            offset += n
            first = false
        } while offset < pdu.count
        if aclQueues[handle] == nil { aclOrder.append(handle) }
        aclQueues[handle, default: []] += frags
        flushACL()
    }

    func flushACL() {
        while aclCredits > 0, failure == nil, !aclOrder.isEmpty {
            let handle = aclOrder.removeFirst()
            guard var q = aclQueues[handle], !q.isEmpty else { aclQueues[handle] = nil; continue }
            let p = q.removeFirst()
            if q.isEmpty { aclQueues[handle] = nil } else { aclQueues[handle] = q; aclOrder.append(handle) }
            aclCredits -= 1
            aclOutstanding[p.handle, default: 0] += 1
            do { try emit(p.packet) } catch { return }
        }
    }

    /// ACL packets for `handle` queued or not yet confirmed by Number Of Completed Packets.
    public func unacknowledgedACL(handle: UInt16) -> Int {
        aclOutstanding[handle, default: 0] + (aclQueues[handle]?.count ?? 0)
    }

    /// Completes once every ACL packet queued for `handle` so far has been
    /// confirmed sent by Number Of Completed Packets (for example after Write
    /// Commands, before disconnecting), or the handle was released.
    /// - Returns: a future that fails only when the host fails.
    public func startDrain(handle: UInt16, timeoutMs: Int = 5000) -> Future<Void> {
        let f = Future<Void>()
        if unacknowledgedACL(handle: handle) == 0 { f.succeed(()); return f }
        if let e = failure { f.fail(e); return f }
        // A deadline like every other wait: a controller that never reports
        // these packets completed (a link gone quiet) must not hold it forever.
        let t = schedule(afterMs: timeoutMs) { [weak self] in
            guard let self, !f.isComplete else { return }
            let n = self.unacknowledgedACL(handle: handle)
            self.drainWaiters.removeAll { $0.1 === f }
            f.fail(ACLDrainTimeout(handle: handle, packets: n, ms: timeoutMs))
        }
        drainWaiters.append((handle, f, t))
        return f
    }

    func checkDrains() {
        guard !drainWaiters.isEmpty else { return }
        var keep: [(UInt16, Future<Void>, HostToken)] = []
        var done: [(Future<Void>, HostToken)] = []
        for (h, f, t) in drainWaiters {
            if unacknowledgedACL(handle: h) == 0 { done.append((f, t)) } else { keep.append((h, f, t)) }
        }
        drainWaiters = keep
        for (f, t) in done { cancel(t); f.succeed(()) }
    }

    /// Sets the ACL buffer geometry (from LE Read Buffer Size / Read Buffer Size).
    public func setACLBuffers(length: Int, packets: Int) {
        aclMaxLength = max(1, length)
        aclTotalPackets = max(1, packets)
        aclCredits = max(0, aclTotalPackets - aclOutstanding.values.reduce(0, +))
    }

    /// Forgets the queued and unacknowledged packets of a handle (after disconnection
    /// the controller flushes them, and their credits come back).
    public func releaseHandle(_ handle: UInt16) {
        let n = aclOutstanding.removeValue(forKey: handle) ?? 0
        aclQueues[handle] = nil
        aclOrder.removeAll { $0 == handle }
        aclCredits = min(aclTotalPackets, aclCredits + n)
        checkDrains()
    }
}
