/// Several targets, one scan, on a controller that cannot scan while it
/// initiates (LE Supported States without bits 22 and 23, as Bumble's), for
/// an owner that asks for it (`KeeperOwner.gatherMs`: one-shot jobs).
///
/// A connect waits for the target's next advertisement, and while it is
/// pending nothing else is heard. Connecting the first target heard at once
/// costs every later one two advertisements: one heard by a new scan after
/// the link is up, the next one connected. So with `gatherMs` set the
/// keeper goes on scanning after the first target is heard, until no owner
/// looks for anything more (every target heard), a target is heard advertising
/// again (one advertising interval went by: waiting longer gains nothing),
/// or `gatherMs` passed. Then it connects them in turn with no scan between,
/// the one heard longest ago first: with like intervals its next
/// advertisement comes first. Three lamps advertising every 100 ms at phases
/// 0, 37 and 71 ms are connected at 100, 137 and 171 ms, not at 100, 237
/// and 371.
extension DeviceKeeper {
    enum Gather: Equatable {
        case notStarted
        case since(Instant)
        case over
    }

    /// Whether `dev`'s connect waits for the gathering; ends it when it is
    /// over (and its bound is armed when it starts).
    func gathering(_ dev: KeptDevice) -> Bool {
        guard gather != .over, let st = stack else { return false }
        // Only devices heard by the scan are gathered: an address given or
        // remembered is connected at once.
        guard st.central.devices[dev.address] != nil else { return false }
        if scansBesideConnect || !scanWanted() || linkCount > 0 || connecting != nil || heardAgain(st) {
            gather = .over
            return false
        }
        if gather == .notStarted {
            gather = .since(Instant.now())
            _ = st.host.schedule(afterMs: dev.owner.gatherMs) { [weak self] in
                guard let self, self.gather != .over else { return }
                self.gather = .over
                self.connectNextWanted()
            }
        }
        return true
    }

    /// A wanted device heard in two advertising events (reports 10 ms or more
    /// apart: advertising intervals are 20 ms at least, Core Vol 6 Part B 4.4.2.2.2;
    /// a scan response comes within the same event).
    private func heardAgain(_ st: BLEStack) -> Bool {
        devices.values.contains { d in
            guard d.phase == .wanted, d.link == nil, let seen = st.central.devices[d.address] else { return false }
            return seen.firstSeen.msUntil(seen.lastSeen) >= 10
        }
    }

    /// Of `owner`'s wanted devices heard and ready for a try, the one heard longest ago.
    func nextByPhase(of owner: KeeperOwner) -> KeptDevice? {
        guard let st = stack else { return nil }
        let now = Instant.now()
        let ready = devices.values.compactMap { d -> (KeptDevice, Instant)? in
            guard d.owner === owner, d.phase == .wanted, d.link == nil, now >= d.notBefore, let seen = st.central.devices[d.address] else { return nil }
            return (d, seen.lastSeen)
        }
        return ready.min { a, b in a.1 != b.1 ? a.1 < b.1 : a.0.order < b.0.order }?.0
    }
}
