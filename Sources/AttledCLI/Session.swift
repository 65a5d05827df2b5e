import Attled
import AttledLED
import BLETrace
import AttledJSON
#if ATTLED_GATEWAY
import AttledGateway
#endif

/// One run of attled: opens the transport and initialises the controller
/// (through the library's `BLEStack`), runs the command with a deadline per
/// phase, and on every exit path stops scanning, cancels connection
/// attempts, disconnects every link (reason 0x13) and closes the transport.
/// What a device job does lives in `DeviceJob`; finding and connecting the
/// targets in `TargetRunner`; the LED characteristics in `LEDResolver`.
final class Session {
    let opts: Options
    let start = Instant.now()
    let environment: [String: String]
    /// The run's own report (open, init, scan for the scan command; errors before any device).
    let report: Report
    var transport: HCITransport?
    var stack: BLEStack?
    var tracer: Tracer?
    var snoop: BtsnoopWriter?
    var cache: GATTCache?
    /// Where bonds are kept (pairing keys): the state directory until the
    /// controller is open, then the folder of our identity for it.
    var bonds: BondStore
    /// The state directory (`BondStore.defaultDirectory`), where `Identities` keeps one identity per controller.
    var stateRoot: String
    /// Our identity for the run's controller, taken when it is first initialised (kept when it is reopened).
    var identity: ControllerIdentity?
    /// The device jobs of set/get/send/listen, in target order.
    var jobs: [DeviceJob] = []
    /// Links whose timing summary --trace prints at the end.
    var tracedLinks: [Link] = []
    /// scan and listen treat Ctrl-C as the normal way to stop.
    var sigintIsSuccess = false
    /// A run whose output was its JSON lines (a general listen): no summary object on success.
    var quietSuccess = false
    /// The run's one event loop: every stack (a reopened controller too),
    /// the gateway's broker, the terminal and the signals run on it.
    let loop = EventLoop()

    static let defaultTimeoutMs = 20_000
    static let defaultScanMs = 10_000
    static let defaultConnectMs = 5_000
    static let defaultATTMs = 3_000

    init(_ opts: Options, environment: [String: String] = [:]) {
        self.opts = opts
        self.environment = environment
        report = Report.console(prefix: "", quiet: opts.quiet || opts.command == .ui)
        if !opts.noCache { cache = GATTCache(directory: GATTCache.defaultDirectory(environment)) }
        stateRoot = BondStore.defaultDirectory(environment)
        bonds = BondStore(directory: stateRoot)
    }

    var deadline: Instant { start.adding(ms: opts.timeoutMs ?? Self.defaultTimeoutMs) }

    func remaining(max ms: Int) -> Int { min(ms, Instant.now().msUntil(deadline)) }

    func progress(_ s: String) { report.progress(s) }

    var host: HCIHost? { stack?.host }
    var central: Central? { stack?.central }

    // MARK: run

    func run() -> Int32 {
        loop.watchSignals()
        var failure: RunError? = nil
        #if ATTLED_GATEWAY
        // Alive until clean-up is over (its broker connection is on the loop).
        var gateway: Gateway? = nil
        defer { withExtendedLifetime(gateway) {} }
        #endif
        do {
            if opts.command == .ui && (!SystemIO.isTerminal(0) || !SystemIO.isTerminal(1)) {
                throw RunError("attled ui needs a terminal (stdin and stdout must be a tty)", .usage)
            }
            #if ATTLED_GATEWAY
            // Its configuration checked before the controller is opened.
            let gatewayConfig = opts.command == .gateway ? try GatewayRun.config(opts) : nil
            let gatewayProxy = opts.command == .gateway ? try GatewayRun.proxyConfig(opts) : nil
            #else
            if opts.command == .gateway {
                throw RunError("this attled was built without the gateway (ATTLED_NO_MQTT or ATTLED_FULLY_STATIC): build it without them, with libmosquitto-dev installed", .unavailable)
            }
            #endif
            // Its database read and checked before the controller is opened.
            let serveConfig = opts.command == .serve ? try ServeRun.config(opts) : nil
            let proxyConfig = opts.command == .proxy ? try ProxyRun.config(opts) : nil
            #if ATTLED_GATEWAY
            let statusOnly = opts.command == .gateway && opts.gateway.status
            if statusOnly, let c = gatewayConfig { try GatewayRun.status(c, self) }
            #else
            let statusOnly = false
            #endif
            if !statusOnly { try open() }
            switch statusOnly ? .help : opts.command {
            #if ATTLED_GATEWAY
            case .gateway:
                if let c = gatewayConfig {
                    gateway = try GatewayRun.make(c, self)
                    try GatewayRun.run(gateway!, self, proxy: gatewayProxy)
                }
            #endif
            case .scan: sigintIsSuccess = true; try scanJob()
            case .gatt, .read, .write: try GATTTool(self).run()
            case .listen where opts.isGeneric: try GATTTool(self).run()
            case .set, .get, .send, .listen: try TargetRunner(self).run()
            case .ui: try UIApp(session: self).run()
            case .serve: if let c = serveConfig { try ServeRun.run(c, self) }
            case .proxy: if let c = proxyConfig { try ProxyRun.run(c, self) }

            default: break
            }
        } catch HCIError.interrupted(let sig) where sigintIsSuccess && sig == SignalWatch.interrupt {
            // Ctrl-C is how scan and listen end.
        } catch {
            var re = classify(error)
            let phase = jobs.first(where: { !$0.isFinished })?.report.phase ?? report.phase
            if case HCIError.interrupted(let sig) = error {
                re.message = "interrupted by \(sig == SignalWatch.terminate ? "SIGTERM" : "SIGINT") during \(phase.word)"
            } else if re.code == .linkLost || re.code == .attError {
                re.message += " (during \(phase.word))"
            }
            failure = re
        }
        // Jobs still running when the run ended (a signal, the deadline) share the run's outcome.
        for j in jobs where !j.isFinished {
            if let f = failure { j.fail(f) } else if !sigintIsSuccess { j.fail(RunError("the run ended before this device was done", .failure)) }
        }
        cleanup()
        let jobFailures = jobs.compactMap(\.failure)
        let first = failure ?? jobFailures.first
        if !opts.json {
            if let re = failure { Console.err("attled: error: " + re.message) }
            for j in jobs { if let re = j.failure, re.message != failure?.message { Console.err("attled: error: " + j.report.prefix + re.message) } }
        } else {
            emitJSON(error: failure)
        }
        return (first?.code ?? .ok).rawValue
    }

    /// One JSON object per device (or one for the run when it failed before
    /// any device, or for gatt). scan and listen print theirs line by line.
    func emitJSON(error: RunError?) {
        if !jobs.isEmpty {
            if opts.command == .listen && error == nil && jobs.allSatisfy({ $0.failure == nil }) { return }
            for j in jobs { Console.out(j.json(command: opts.command, start: start).serialized) }
            return
        }
        if (opts.command == .scan || quietSuccess) && error == nil { return }
        var obj: [(String, JSONValue)] = [("ok", .bool(error == nil)), ("command", .string(opts.command.rawValue))]
        obj += report.fields
        obj.append(("phases_ms", report.phasesJSON))
        obj.append(("total_ms", .double(Double(Instant.now().usSince(start) / 100) / 10)))
        if let l = tracedLinks.first { obj.append(("att_transactions", .int(Int64(l.bearer.transactions.count)))) }
        if let e = error { obj.append(("error", .string(e.message))); obj.append(("exit_code", .int(Int64(e.code.rawValue)))) }
        Console.out(JSONValue.object(obj).serialized)
    }

    /// Opens the transport and initialises the controller.
    func open() throws {
        let spec = opts.transport ?? .userChannel(index: 0)
        if opts.trace != .off {
            let t = Tracer(hex: opts.trace == .hex, output: { Console.err($0) })
            t.showKeys = opts.traceKeys
            tracer = t
        }
        if let path = opts.btsnoop {
            do { snoop = try BtsnoopWriter(path: path) }
            catch { throw RunError("cannot write capture \(path): \(error)", .failure) }
        }
        report.begin(.open)
        let t = Self.warningOnConsole(try spec.open())
        transport = t
        // Through sudo: give up root now that the adapter socket is open.
        if let d = try Privileges.drop(transport: t, env: environment) {
            var env = environment
            if let home = Privileges.home(of: d.uid) { env["HOME"] = home }
            env.removeValue(forKey: "SUDO_UID")
            if !opts.noCache {
                var cenv = env
                if environment["XDG_CACHE_HOME"] != nil { cenv["HOME"] = environment["HOME"] }
                cache = GATTCache(directory: GATTCache.defaultDirectory(cenv))
            }
            // The user's own state directory: after the drop, /var/lib is not ours.
            if environment["XDG_STATE_HOME"] == nil {
                stateRoot = BondStore.defaultDirectory(env)
                bonds = BondStore(directory: stateRoot)
            }
            if opts.trace != .off {
                progress("dropped root privileges: now uid \(d.uid) gid \(d.gid)" + (d.restorer != nil ? "; a root helper will bring \(t.name) back up" : ""))
            }
        }
        report.begin(.initialise)
        let i = try makeStack(t).info
        if opts.trace != .off {
            let v = i.version.map { "Bluetooth \(LocalVersion.coreVersionName($0.hciVersion)), manufacturer 0x\(Hex.int($0.manufacturer, width: 4))" } ?? "version unknown"
            let kept = identity?.entry.map { ", identity \($0.folder == "." ? stateRoot : $0.path(in: stateRoot))" } ?? ""
            let recalled = i.recalled ? ", description remembered" : ""
            progress("controller on \(t.name): \(v)\(recalled), own address \(i.ownAddress.address) (\(i.ownAddressSource == .publicAddress ? "public" : "random, \(i.ownAddressSource.rawValue)")), ACL \(i.aclBuffers.aclLength) bytes x \(i.aclBuffers.aclPackets)\(kept)")
        }
        report.end()
    }

    /// Stops scanning, cancels/disconnects, closes the transport (the
    /// library's `BLEStack.close`, its warnings printed). Never throws; bounded in time.
    func cleanup() {
        guard let s = stack else { transport?.close(); snoop?.close(); return }
        s.close(warning: { CLIConsole.err("warning: " + $0) })
        if opts.trace != .off { for l in tracedLinks { printTiming(l) } }
        snoop?.close()
        transport = nil
    }

    /// Closes the stack (what still answers is disconnected) and opens the
    /// transport and initialises the controller again, for a run that
    /// outlives controller faults (the UI).
    /// - Throws: `TransportError`, `HCIError`.
    func reopenStack() throws -> BLEStack {
        closeStack()
        let t = Self.warningOnConsole(try (opts.transport ?? .userChannel(index: 0)).open())
        do { return try makeStack(t) } catch { t.close(); throw error }
    }

    /// The transport, its warnings printed as the command line's ("attled: warning: ...").
    static func warningOnConsole(_ t: any HCITransport) -> any HCITransport {
        (t as? UserChannelTransport)?.onWarning = { CLIConsole.err("warning: " + $0) }
        return t
    }

    /// The LED resolver over this run's GATT cache; a bonded device's entry
    /// is filed under its identity (its bond read when used: `open` may move
    /// the bonds after dropping privileges).
    func makeResolver(explicitProfile: LEDProfile?, trustCache: Bool) -> LEDResolver {
        let r = LEDResolver(cache: cache, explicitProfile: explicitProfile, trustCache: trustCache)
        r.identity = { [unowned self] a in self.bonds.bond(for: a)?.identity ?? a }
        return r
    }

    /// Closes the stack, disconnecting what still answers (after a Hardware
    /// Error too); a controller that stopped answering costs each command
    /// 500 ms at most.
    func closeStack() {
        stack?.close(commandTimeoutMs: 500)
        stack = nil
        transport = nil
    }

    /// Resets and initialises the controller behind `t` (the tracer and the
    /// capture watching) and makes it the run's stack.
    /// - Throws: `HCIError`.
    @discardableResult
    func makeStack(_ t: HCITransport) throws -> BLEStack {
        let observers: [PacketObserver] = [tracer as PacketObserver?, snoop as PacketObserver?].compactMap { $0 }
        let id = identity ?? ControllerIdentity(identities: Identities(root: stateRoot),
                                                controllerKey: (opts.transport ?? .userChannel(index: 0)).controllerKey())
        identity = id
        let st = try BLEStack(transport: t, loop: loop, observers: observers, ownAddress: opts.ownAddress, identity: id)
        if let b = st.bonds { bonds = b }
        if let p = id.problem { progress("warning: no identity kept for this controller (\(p)); set XDG_STATE_HOME to a writable directory") }
        st.central.useExtendedCommands = opts.extendedScan && st.info.supportsExtendedScanning
        // A one-shot job's few short PDUs (three bytes written, three read)
        // gain nothing from longer LL PDUs or the 2M PHY, and each command
        // holds the controller's one command slot (45 ms on a slow one):
        // links that stay up or carry long values ask for them.
        if [.set, .get, .send].contains(opts.command) { st.central.airRequests = [] }
        transport = t
        stack = st
        return st
    }

    func printTiming(_ l: Link) {
        let b = l.bearer
        guard !b.transactions.isEmpty else { return }
        var lines = ["ATT transactions\(tracedLinks.count > 1 ? " on \(l.peer.address)" : ""): \(b.transactions.count) (+ \(b.commandsSent) without response), MTU \(b.mtu)"]
        for t in b.transactions {
            let rsp = t.response.map { $0.name } ?? "no response"
            lines.append("  \(pad(t.request.name, 28)) \(pad(formatMs(us: t.end.usSince(t.start), decimals: 2), 7)) ms  -> \(rsp)")
        }
        let c = l.connection
        lines.append("  connection interval \(formatMs(us: c.intervalMicroseconds, decimals: 2)) ms, latency \(c.latency), supervision timeout \(Int(c.supervisionTimeout) * 10) ms, \(c.airDescription)")
        Console.err(lines.joined(separator: "\n"))
    }
}
