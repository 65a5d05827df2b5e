#if canImport(Glibc)
import Glibc
#endif
import Attled
import AttledLED

/// Finds and connects the targets of set/get/send/listen and runs a
/// `DeviceJob` on each, all at once in the one event loop:
///  - a target with `--address` is connected at once; a named target whose
///    address the cache remembers is tried there first (briefly);
///  - the rest share one scan, and each is connected as soon as it is heard
///    (the connection manager makes them one after another, as a controller
///    initiates one connection at a time) while the scan goes on for the others;
///  - a target not found by the end of the scan fails alone; the others go on.
final class TargetRunner {
    let s: Session
    let opts: Options
    /// Addresses already given to a job (one device serves one target).
    private var claimed = Set<BDAddress>()
    private var scanDeadline: Instant?

    init(_ s: Session) {
        self.s = s
        self.opts = s.opts
    }

    var connectMs: Int { opts.connectTimeoutMs ?? Session.defaultConnectMs }

    func makeJobs() -> [DeviceJob] {
        let resolver = s.makeResolver(explicitProfile: opts.explicitProfile, trustCache: opts.trustCache)
        let targets = Target.from(opts)
        return targets.map { t in
            // A single target reports into the run's own report (one set of phases, as ever).
            let r = targets.count == 1 ? s.report : Report(prefix: "\(t.label): ", quiet: opts.quiet)
            return DeviceJob(target: t, opts: opts, report: r, resolver: resolver, securer: Securer(policy: opts.securityPolicy, store: s.bonds, report: r), runStart: s.start)
        }
    }

    /// Runs every job to its end (or the run's deadline).
    /// - Throws: `HCIError` (the controller failed, or a signal), `RunError`.
    func run() throws {
        guard let stack = s.stack else { return }
        let jobs = makeJobs()
        s.jobs = jobs
        for j in jobs {
            if let a = j.target.address {
                launch(j, stack, a)
            } else if let (name, known) = cachedAddress(j.target) {
                launch(j, stack, known, cachedName: name)
            } else {
                j.report.begin(.scan)
            }
        }
        stack.central.onDeviceUpdate { [weak self] d, _ in self?.offer(d, stack) }
        try ensureScanning(stack)
        let listenForever = opts.command == .listen && opts.timeoutMs == nil
        let runDeadline = listenForever ? Instant.distantFuture : s.deadline
        do {
            while !jobs.allSatisfy(\.isFinished) {
                var until = runDeadline
                if let d = scanDeadline, d < until { until = d }
                _ = try stack.host.pump(until: until) { jobs.allSatisfy(\.isFinished) || scanDeadline.map { Instant.now() >= $0 } ?? false }
                if let d = scanDeadline, Instant.now() >= d { scanEnded(stack, jobs) }
                if Instant.now() >= runDeadline { deadlinePassed(jobs); break }
            }
        } catch HCIError.interrupted(let sig) where sig == SIGINT && opts.command == .listen {
            // Ctrl-C ends listening normally; a job not yet listening was interrupted.
            for j in jobs where !j.isFinished && j.report.phase == .listen { j.endListening() }
            if jobs.allSatisfy(\.isFinished) { s.sigintIsSuccess = true; return }
            throw HCIError.interrupted(signal: sig)
        }
        if stack.central.isScanning { try stack.central.stopScan() }
    }

    /// Starts the shared scan when a job waits for it.
    private func ensureScanning(_ stack: BLEStack) throws {
        guard !stack.central.isScanning, s.jobs.contains(where: { $0.state == .waiting }) else { return }
        let scanMs = s.remaining(max: opts.timeoutMs ?? Session.defaultScanMs)
        scanDeadline = Instant.now().adding(ms: scanMs)
        scanMs0 = scanMs
        try stack.central.startScan(active: !opts.passive)
    }
    private var scanMs0 = 0

    /// A device heard (or changed): the first waiting job it matches takes it.
    private func offer(_ d: DiscoveredDevice, _ stack: BLEStack) {
        guard !claimed.contains(d.address.address) else { return }
        guard let j = s.jobs.first(where: { $0.state == .waiting && $0.target.filter.matches(d) }) else { return }
        j.heard(d)
        if !s.jobs.contains(where: { $0.state == .waiting && $0 !== j }) {
            // Nobody else to find: stop scanning before connecting (the controller then has one job).
            scanDeadline = nil
            stack.central.stopScanning().whenFailure { e in
                Console.err("attled: warning: could not stop scanning: \(e)")
            }
        }
        launch(j, stack, d.address)
    }

    /// Queues the job's connection; when it is up, runs the job.
    private func launch(_ j: DeviceJob, _ stack: BLEStack, _ address: DeviceAddress, cachedName: String? = nil) {
        claimed.insert(address.address)
        let ms = cachedName != nil ? min(connectMs, 1000) : connectMs
        let budget = s.remaining(max: ms)
        guard budget > 0 else {
            j.fail(RunError("the --timeout passed before connecting", .connectionFailed))
            return
        }
        j.connect(stack, to: address, timeoutMs: budget, cached: cachedName != nil).whenComplete { [weak self] r in
            guard let self else { return }
            switch r {
            case .success(let link):
                self.s.tracedLinks.append(link)
                if let n = j.target.name, self.opts.scanService == nil { self.s.cache?.remember(name: n, link.peer) }
                j.run(on: link)
            case .failure(let e as GAPError) where cachedName != nil:
                self.cachedAddressFailed(cachedName!, address, e, j.report)
                self.claimed.remove(address.address)
                j.waitAgain()
                j.report.begin(.scan)
                stack.central.startScanningIfIdle(active: !self.opts.passive).whenFailure { j.fail($0) }
                if self.scanDeadline == nil {
                    let scanMs = self.s.remaining(max: self.opts.timeoutMs ?? Session.defaultScanMs)
                    self.scanDeadline = Instant.now().adding(ms: scanMs)
                    self.scanMs0 = scanMs
                }
            case .failure(let e):
                j.fail(e)
            }
        }
    }

    /// The scan time is over: targets not heard fail (exit 3); the others go on.
    private func scanEnded(_ stack: BLEStack, _ jobs: [DeviceJob]) {
        scanDeadline = nil
        if stack.central.isScanning {
            stack.central.stopScanning().whenFailure { e in Console.err("attled: warning: could not stop scanning: \(e)") }
        }
        let heard = stack.central.devices.count
        for j in jobs where j.state == .waiting {
            j.fail(RunError("no \(j.target.description) found within \(formatMs(us: UInt64(scanMs0) * 1000, decimals: 0)) ms (\(heard) other device(s) heard): check that it is powered, advertising and in range; 'attled scan' lists what is heard", .deviceNotFound))
        }
    }

    /// The run's deadline passed: listening jobs end normally, the rest fail.
    private func deadlinePassed(_ jobs: [DeviceJob]) {
        for j in jobs where !j.isFinished {
            if j.report.phase == .listen { j.endListening(); continue }
            switch j.state {
            case .waiting: j.fail(RunError("no \(j.target.description) found before the --timeout passed", .deviceNotFound))
            case .connecting: j.fail(RunError("the --timeout passed while connecting", .connectionFailed))
            default: j.fail(RunError("the --timeout passed during \(j.report.phase.word)", .linkLost))
            }
        }
    }

    // MARK: the cached address of a named target

    /// Where the cache says a named target was last (not with --service: the
    /// name alone is not the whole filter then). Tried first, briefly.
    func cachedAddress(_ t: Target) -> (name: String, address: DeviceAddress)? {
        guard let name = t.name, opts.scanService == nil, let known = s.cache?.address(forName: name) else { return nil }
        return (name, known)
    }

    /// The cached address did not answer: forget it; the caller scans.
    func cachedAddressFailed(_ name: String, _ address: DeviceAddress, _ e: GAPError, _ r: Report) {
        r.progress("cached address \(address) for '\(name)' did not answer (\(e)); scanning")
        s.cache?.forget(name: name)
    }

    // MARK: one target, blocking (gatt)

    /// Finds and connects the single target (gatt): its address, the cached
    /// address for its name, or a scan.
    /// - Returns: the link.
    /// - Throws: `RunError` (not found), `GAPError`, `HCIError`.
    func connectOne() throws -> Link {
        guard let stack = s.stack else { throw RunError("no controller", .failure) }
        let t = Target.from(opts)[0]
        let r = s.report
        var address = t.address
        if address == nil, let (name, known) = cachedAddress(t) {
            r.begin(.connect)
            do {
                let link = try stack.connect(to: known, timeoutMs: s.remaining(max: min(connectMs, 1000)))
                r.done("\(name) at cached address \(known), handle 0x\(Hex.int(link.connection.handle, width: 4)), interval \(formatMs(us: link.connection.intervalMicroseconds, decimals: 2)) ms\(link.connection.airRequestSuffix)")
                s.tracedLinks.append(link)
                return link
            } catch let e as GAPError {
                cachedAddressFailed(name, known, e, r)
            }
        }
        if address == nil {
            r.begin(.scan)
            let scanMs = s.remaining(max: opts.timeoutMs ?? Session.defaultScanMs)
            let d: DiscoveredDevice
            do { d = try stack.find(t.filter, timeoutMs: scanMs, active: !opts.passive) } catch StackError.notFound(_, let heard, _) {
                throw RunError("no \(t.description) found within \(formatMs(us: UInt64(scanMs) * 1000, decimals: 0)) ms (\(heard) other device(s) heard): check that it is powered, advertising and in range; 'attled scan' lists what is heard", .deviceNotFound)
            }
            r.done("\(d.name ?? "(no name)") \(d.address), rssi \(d.rssi) dBm")
            r.fields.append(("device", .object([("name", d.name.map { .string($0) } ?? .null), ("address", .string(d.address.address.description)),
                                                ("address_type", .string(d.address.type.description)), ("rssi", .int(Int64(d.rssi)))])))
            address = d.address
        }
        guard let peer = address else { throw RunError("no target", .usage) }
        r.begin(.connect)
        let cms = s.remaining(max: connectMs)
        guard cms > 0 else { throw RunError("the --timeout passed before connecting", .connectionFailed) }
        let link = try stack.connect(to: peer, timeoutMs: cms)
        r.done("handle 0x\(Hex.int(link.connection.handle, width: 4)), interval \(formatMs(us: link.connection.intervalMicroseconds, decimals: 2)) ms\(link.connection.airRequestSuffix)")
        if let n = t.name, opts.scanService == nil { s.cache?.remember(name: n, peer) }
        s.tracedLinks.append(link)
        return link
    }
}
