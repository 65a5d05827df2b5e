import Attled
import AttledLED

/// What a one-shot run finds and connects: a `DeviceJob` (set, get, send,
/// listen), or the one target of gatt, read and write.
protocol Reaching: AnyObject {
    var target: Target { get }
    var report: Report { get }
    /// Waiting to be heard by the scan.
    var isWaiting: Bool { get }
    /// Its connection is queued or running.
    var isConnecting: Bool { get }
    var isFinished: Bool { get }
    /// The scan heard it.
    func heard(_ d: DiscoveredDevice)
    /// Its connection is queued.
    func connecting()
    /// Back to waiting for the scan (its cached address did not answer).
    func waitAgain()
    /// Its link is up (`cachedName`: at the address the cache remembers for that name).
    func up(_ link: Link, cachedName: String?)
    func fail(_ error: any Error)
    func fail(_ re: RunError)
}

/// Finds and connects the targets of a one-shot run through the library's
/// `DeviceKeeper`, reaching each device once (no reconnection):
///  - a target with `--address` is connected at once; a named target whose
///    address the cache remembers is tried there first (the keeper tries a
///    remembered address briefly; then the cache forgets it and the target
///    waits for the scan);
///  - the rest share one scan; each is claimed by the first report that
///    matches it, and the keeper connects them one after another (a
///    controller initiates one connection at a time), the scan stopped for
///    each attempt and started again while a target still waits;
///  - a target not heard when the scan time is over fails alone.
final class Reacher {
    let s: Session
    let opts: Options
    let items: [any Reaching]
    let keeper: DeviceKeeper
    /// The targets' claims.
    let owner: KeeperOwner
    /// The target each claimed device serves (one device serves one target).
    private var claimed: [BDAddress: any Reaching] = [:]
    /// Addresses tried from the cache, with the name they were remembered for.
    private var cachedNames: [BDAddress: String] = [:]
    private(set) var scanDeadline: Instant?
    private var scanMs = 0
    /// A scan that could not be started: the run ends with it.
    private(set) var fatal: (any Error)?
    private var subscription: DeviceKeeper.Subscription?

    /// The longest the first target heard waits for the others (a target
    /// heard advertising again ends it sooner, one interval after the first).
    static let gatherMs = 1000

    var connectMs: Int { opts.connectTimeoutMs ?? Session.defaultConnectMs }

    init(_ s: Session, _ stack: BLEStack, _ items: [any Reaching]) {
        self.s = s
        opts = s.opts
        self.items = items
        var p = DeviceKeeper.Policy()
        p.acceptList = .off(because: "a one-shot job")
        p.activeScan = !opts.passive
        p.connectTimeoutMs = opts.connectTimeoutMs ?? Session.defaultConnectMs
        keeper = DeviceKeeper(stack: stack, policy: p)
        keeper.deadline = s.deadline
        // Each target reached once: a failed attempt or a dropped link is its end.
        owner = keeper.owner("targets")
        owner.onDemandBeyondSlots = false
        // Several targets: heard in one scan before the first connect, where
        // the controller cannot scan beside it (KeeperGather.swift).
        owner.gatherMs = Self.gatherMs
        owner.wants = { [weak self] d in (self?.claim(d) ?? false) ? .once : nil }
        owner.scanWanted = { [weak self] in self?.someoneWaits ?? false }
        subscription = owner.subscribe { [weak self] e in self?.event(e) }
    }

    var someoneWaits: Bool { items.contains { $0.isWaiting } }

    /// Connects the targets with an address (given or cached) and scans for the rest.
    func start() {
        for i in items {
            if let a = i.target.address {
                reach(i, a)
            } else if let (name, known) = cachedAddress(i.target) {
                reach(i, known, cachedName: name)
            } else {
                i.report.begin(.scan)
            }
        }
        if someoneWaits { startScanClock() }
        keeper.start()
    }

    /// Unhooks the keeper and stops the scan (the links stay up for the clean-up).
    func end() throws {
        keeper.end()
        if let sub = subscription { owner.cancel(sub) }
        if let st = keeper.stack, st.central.isScanning { try st.central.stopScan() }
    }

    /// Pumps the loop until `done`, a scan that cannot start, or `deadline`;
    /// targets still waiting when the scan time is over fail.
    /// - Returns: false when `deadline` passed first.
    /// - Throws: the scan's failure; `HCIError` (the controller failed, or a signal).
    func pump(until deadline: Instant, _ done: () -> Bool) throws -> Bool {
        guard let stack = keeper.stack else { return true }
        while !done() {
            if let f = fatal { throw f }
            var until = deadline
            if let d = scanDeadline, d < until { until = d }
            _ = try stack.host.pump(until: until) { done() || fatal != nil || scanDeadline.map { Instant.now() >= $0 } ?? false }
            if let d = scanDeadline, Instant.now() >= d { scanEnded() }
            if !done(), Instant.now() >= deadline { return false }
        }
        return true
    }

    // MARK: the keeper's side

    /// A device heard for the first time: the first waiting target it matches takes it.
    private func claim(_ d: DiscoveredDevice) -> Bool {
        guard claimed[d.address.address] == nil,
              let i = items.first(where: { $0.isWaiting && $0.target.filter.matches(d) }) else { return false }
        i.heard(d)
        claimed[d.address.address] = i
        i.connecting()
        if !someoneWaits { scanDeadline = nil }  // nobody else to find: the scan stays stopped
        return true
    }

    /// A target at a known address: connected without a scan.
    private func reach(_ i: any Reaching, _ address: DeviceAddress, cachedName: String? = nil) {
        let budget = s.remaining(max: connectMs)
        guard budget > 0 else { return i.fail(RunError("the --timeout passed before connecting", .connectionFailed)) }
        claimed[address.address] = i
        if let cachedName { cachedNames[address.address] = cachedName }
        i.connecting()
        keeper.reach(address, for: owner, name: i.target.name, timeoutMs: budget, remembered: cachedName != nil)
    }

    private func event(_ e: DeviceKeeper.Event) {
        switch e {
        case let .linkUp(dev, link):
            guard let i = claimed[dev.address.address], i.isConnecting else { _ = link.startDisconnect(); return }
            s.tracedLinks.append(link)
            if let n = i.target.name, opts.scanService == nil { s.cache?.remember(name: n, link.peer) }
            i.up(link, cachedName: cachedNames[dev.address.address])
        case let .notAtRememberedAddress(dev, error):
            // The keeper forgot it: the target waits for the scan.
            guard let i = claimed.removeValue(forKey: dev.address.address) else { return }
            if let name = cachedNames.removeValue(forKey: dev.address.address) { cachedAddressFailed(name, dev.address, error, i.report) }
            i.waitAgain()
            i.report.begin(.scan)
            if scanDeadline == nil { startScanClock() }
        case let .connectFailed(dev, error):
            guard let i = claimed[dev.address.address] else { return }
            i.fail(error)
        case let .scanFailed(error):
            if fatal == nil { fatal = error }
        default:
            break
        }
    }

    // MARK: the scan's time

    private func startScanClock() {
        scanMs = s.remaining(max: opts.timeoutMs ?? Session.defaultScanMs)
        scanDeadline = Instant.now().adding(ms: scanMs)
    }

    /// The scan time is over: targets not heard fail (exit 3); the others go on.
    private func scanEnded() {
        scanDeadline = nil
        guard let stack = keeper.stack else { return }
        if stack.central.isScanning {
            stack.central.stopScanning().whenFailure { e in Console.err("attled: warning: could not stop scanning: \(e)") }
        }
        let heard = stack.central.devices.count
        for i in items where i.isWaiting {
            i.fail(RunError("no \(i.target.description) found within \(formatMs(us: UInt64(scanMs) * 1000, decimals: 0)) ms (\(heard) other device(s) heard): check that it is powered, advertising and in range; 'attled scan' lists what is heard", .deviceNotFound))
        }
    }

    // MARK: the cached address of a named target

    /// Where the cache says a named target was last (not with --service: the
    /// name alone is not the whole filter then). Tried first, briefly.
    private func cachedAddress(_ t: Target) -> (name: String, address: DeviceAddress)? {
        guard let name = t.name, opts.scanService == nil, let known = s.cache?.address(forName: name) else { return nil }
        return (name, known)
    }

    /// The cached address did not answer: forget it; the target waits for the scan.
    private func cachedAddressFailed(_ name: String, _ address: DeviceAddress, _ e: any Error, _ r: Report) {
        r.progress("cached address \(address) for '\(name)' did not answer (\(e)); scanning")
        s.cache?.forget(name: name)
    }
}
