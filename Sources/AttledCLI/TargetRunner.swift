import Attled
import AttledLED
import AttledJSON

/// Runs the one-shot commands' targets: set/get/send/listen run a
/// `DeviceJob` on each, all at once in the one event loop; gatt, read and
/// write connect their one target. Finding and connecting is the
/// `Reacher`'s (the library's `DeviceKeeper`, reaching each device once).
final class TargetRunner {
    let s: Session
    let opts: Options

    init(_ s: Session) {
        self.s = s
        self.opts = s.opts
    }

    func makeJobs() -> [DeviceJob] {
        let resolver = s.makeResolver(explicitProfile: opts.explicitProfile, trustCache: opts.trustCache)
        let targets = Target.from(opts)
        return targets.map { t in
            // A single target reports into the run's own report (one set of phases, as ever).
            let r = targets.count == 1 ? s.report : Report.console(prefix: "\(t.label): ", quiet: opts.quiet)
            return DeviceJob(target: t, opts: opts, report: r, resolver: resolver, securer: Securer(policy: opts.securityPolicy, store: s.bonds, report: r), runStart: s.start)
        }
    }

    /// Runs every job to its end (or the run's deadline).
    /// - Throws: `HCIError` (the controller failed, or a signal), `RunError`.
    func run() throws {
        guard let stack = s.stack else { return }
        let jobs = makeJobs()
        s.jobs = jobs
        let reacher = Reacher(s, stack, jobs)
        reacher.start()
        let listenForever = opts.command == .listen && opts.timeoutMs == nil
        let runDeadline = listenForever ? Instant.distantFuture : s.deadline
        do {
            if try !reacher.pump(until: runDeadline, { jobs.allSatisfy(\.isFinished) }) { deadlinePassed(jobs) }
        } catch HCIError.interrupted(let sig) where sig == SignalWatch.interrupt && opts.command == .listen {
            // Ctrl-C ends listening normally; a job not yet listening was interrupted.
            for j in jobs where !j.isFinished && j.report.phase == .listen { j.endListening() }
            if jobs.allSatisfy(\.isFinished) { s.sigintIsSuccess = true; try reacher.end(); return }
            throw HCIError.interrupted(signal: sig)
        }
        try reacher.end()
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

    // MARK: one target, blocking (gatt, read, write)

    /// Finds and connects the single target: its address, the cached
    /// address for its name, or a scan.
    /// - Returns: the link.
    /// - Throws: `RunError` (not found, the --timeout passed), `GAPError`, `HCIError`.
    func connectOne() throws -> Link {
        guard let stack = s.stack else { throw RunError("no controller", .failure) }
        let one = OneTarget(Target.from(opts)[0], report: s.report)
        let reacher = Reacher(s, stack, [one])
        reacher.start()
        let inTime = try reacher.pump(until: s.deadline) { one.isFinished }
        try reacher.end()
        if let link = one.link { return link }
        if let e = one.failure { throw e }
        guard !inTime else { throw RunError("no target", .usage) }
        throw one.isWaiting ? RunError("no \(one.target.description) found before the --timeout passed", .deviceNotFound)
                            : RunError("the --timeout passed while connecting", .connectionFailed)
    }
}

/// gatt's, read's and write's one target: found, connected, its link kept for the tool.
final class OneTarget: Reaching {
    let target: Target
    let report: Report
    private(set) var link: Link?
    private(set) var failure: (any Error)?
    private var waiting = true, queued = false

    init(_ target: Target, report: Report) {
        self.target = target
        self.report = report
    }

    var isWaiting: Bool { waiting && !isFinished }
    var isConnecting: Bool { queued && !isFinished }
    var isFinished: Bool { link != nil || failure != nil }

    func heard(_ d: DiscoveredDevice) {
        report.done("\(d.name ?? "(no name)") \(d.address), rssi \(d.rssi) dBm")
        report.fields.append(("device", .object([("name", d.name.map { .string($0) } ?? .null), ("address", .string(d.address.address.description)),
                                                 ("address_type", .string(d.address.type.description)), ("rssi", .int(Int64(d.rssi)))])))
    }
    func connecting() { waiting = false; queued = true; report.begin(.connect) }
    func waitAgain() { waiting = true; queued = false }
    func up(_ link: Link, cachedName: String?) {
        let c = link.connection
        let at = cachedName.map { "\($0) at cached address \(link.peer), " } ?? ""
        report.done("\(at)handle 0x\(Hex.int(c.handle, width: 4)), interval \(formatMs(us: c.intervalMicroseconds, decimals: 2)) ms\(c.airRequestSuffix)")
        self.link = link
    }
    func fail(_ error: any Error) { if failure == nil { failure = error } }
    func fail(_ re: RunError) { if failure == nil { failure = re } }
}

extension DeviceJob: Reaching {
    var isWaiting: Bool { state == .waiting }
    var isConnecting: Bool { state == .connecting }
    func up(_ link: Link, cachedName: String?) {
        connected(link, cachedName: cachedName)
        run(on: link)
    }
}
