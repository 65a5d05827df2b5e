#if canImport(Glibc)
import Glibc
#endif
import BLEWire
import BLETransport
import BLEHCI
import BLEGAP
import BLEL2CAP
import BLEATT
import BLEGATT
import BLETrace
import LEDProfile

/// One run of attled: opens the transport, initialises the controller, runs
/// the job with a deadline per phase, and on every exit path stops
/// scanning, disconnects (reason 0x13) and closes the transport.
final class Session {
    let opts: Options
    let start = Instant.now()
    var transport: HCITransport?
    var host: HCIHost?
    var info: ControllerInfo?
    var central: Central?
    var connection: LEConnection?
    var bearer: ATTBearer?
    var tracer: Tracer?
    var snoop: BtsnoopWriter?
    var phase = "open"
    var phaseStart = Instant.now()
    var phases: [(String, UInt64)] = []
    var result: [(String, JSON)] = []
    /// listen/scan treat Ctrl-C as the normal way to stop.
    var sigintIsSuccess = false

    static let defaultTimeoutMs = 20_000
    static let defaultScanMs = 10_000
    static let defaultConnectMs = 5_000
    static let defaultATTMs = 3_000

    let environment: [String: String]
    var cache: GATTCache?
    /// Set when a Service Changed indication arrives: cached handles may be stale.
    var serviceChanged = false

    init(_ opts: Options, environment: [String: String] = [:]) {
        self.opts = opts
        self.environment = environment
        if !opts.noCache { cache = GATTCache(directory: GATTCache.defaultDirectory(environment)) }
    }

    var deadline: Instant { start.adding(ms: opts.timeoutMs ?? Self.defaultTimeoutMs) }

    func remaining(max ms: Int) -> Int { min(ms, Instant.now().msUntil(deadline)) }

    func progress(_ s: String) {
        if !opts.quiet && opts.command != .ui { Console.err("attled: " + s) }
    }

    func begin(_ p: String) {
        phase = p
        phaseStart = Instant.now()
    }

    /// Ends the current phase; returns its duration as "12.3 ms".
    @discardableResult
    func end() -> String {
        let us = Instant.now().usSince(phaseStart)
        phases.append((phase, us))
        return formatMs(us: us) + " ms"
    }

    func pad(_ s: String, _ n: Int) -> String { s.count >= n ? s : s + String(repeating: " ", count: n - s.count) }

    // MARK: run

    func run() -> Int32 {
        SignalWatch.install()
        var failure: RunError? = nil
        do {
            if opts.command == .ui && (isatty(0) != 1 || isatty(1) != 1) {
                throw RunError("attled ui needs a terminal (stdin and stdout must be a tty)", .usage)
            }
            try open()
            switch opts.command {
            case .scan: sigintIsSuccess = true; try scanJob()
            case .set, .get, .send, .listen, .gatt: try deviceJob()
            case .ui: try uiJob()
            default: break
            }
        } catch HCIError.interrupted(let sig) where sigintIsSuccess && sig == SIGINT {
            // Ctrl-C is how scan and listen end.
        } catch {
            var re = classify(error)
            if case HCIError.interrupted(let sig) = error {
                re.message = "interrupted by \(sig == SIGTERM ? "SIGTERM" : "SIGINT") during \(phase)"
            } else if re.code == .linkLost || re.code == .attError {
                re.message += " (during \(phase))"
            }
            failure = re
        }
        cleanup()
        if let re = failure, !opts.json { Console.err("attled: error: " + re.message) }
        // scan and listen print their JSON line by line; the others one result at the end.
        if opts.json && (failure != nil || (opts.command != .scan && opts.command != .listen)) { emitJSON(error: failure) }
        return (failure?.code ?? .ok).rawValue
    }

    func emitJSON(error: RunError?) {
        var obj: [(String, JSON)] = [("ok", .bool(error == nil)), ("command", .string(opts.command.rawValue))]
        obj += result
        obj.append(("phases_ms", .object(phases.map { ($0.0, .double(Double($0.1 / 100) / 10)) })))
        obj.append(("total_ms", .double(Double(Instant.now().usSince(start) / 100) / 10)))
        if let b = bearer { obj.append(("att_transactions", .int(b.transactions.count))) }
        if let e = error { obj.append(("error", .string(e.message))); obj.append(("exit_code", .int(Int(e.code.rawValue)))) }
        Console.out(JSON.object(obj).text)
    }

    /// Opens the transport and initialises the controller.
    func open() throws {
        let spec = opts.transport ?? .userChannel(index: 0)
        if opts.trace != .off { tracer = Tracer(hex: opts.trace == .hex, output: { Console.err($0) }) }
        if let path = opts.btsnoop {
            do { snoop = try BtsnoopWriter(path: path) }
            catch { throw RunError("cannot write capture \(path): \(error)", .failure) }
        }
        begin("open")
        let t = try spec.open()
        transport = t
        // Through sudo: give up root now that the adapter socket is open.
        if let d = try Privileges.drop(transport: t, env: environment) {
            if !opts.noCache {
                var env = environment
                if env["XDG_CACHE_HOME"] == nil, let home = Privileges.home(of: d.uid) { env["HOME"] = home }
                env.removeValue(forKey: "SUDO_UID")
                cache = GATTCache(directory: GATTCache.defaultDirectory(env))
            }
            if opts.trace != .off {
                progress("dropped root privileges: now uid \(d.uid) gid \(d.gid)" + (d.restorer != nil ? "; a root helper will bring \(t.name) back up" : ""))
            }
        }
        let h = HCIHost(transport: t)
        if let tr = tracer { h.observers.append(tr) }
        if let s = snoop { h.observers.append(s) }
        host = h
        begin("init")
        let i = try h.initialize()
        info = i
        central = Central(host: h, info: i)
        central?.useExtendedCommands = opts.extendedScan && i.supportsExtendedScanning
        if opts.trace != .off {
            let v = i.version.map { "Bluetooth \(LocalVersion.coreVersionName($0.hciVersion)), manufacturer 0x\(Hex.int($0.manufacturer, width: 4))" } ?? "version unknown"
            progress("controller on \(t.name): \(v), own address \(i.ownAddress), ACL \(i.aclBuffers.aclLength) bytes x \(i.aclBuffers.aclPackets)")
        }
        end()
    }

    /// Stops scanning, cancels/disconnects, closes the transport. Never throws; bounded in time.
    /// After a Hardware Error the controller is still reachable: the link is
    /// disconnected and the controller reset, so nothing is left behind.
    func cleanup() {
        guard let h = host else { transport?.close(); snoop?.close(); return }
        h.interruptible = false
        h.commandTimeoutMs = 1000
        var hardwareError = false
        if case .hardwareError? = h.fatalError { hardwareError = true }
        if h.recoverForCleanup() {
            if let c = central, c.isScanning {
                do { try c.stopScan() } catch { Console.err("attled: warning: could not stop scanning: \(error)") }
            }
            central?.abandonPendingConnect()
            // Every link this process holds, including one that completed during a failure.
            for c in central?.connections.values.sorted(by: { $0.handle < $1.handle }) ?? [] where c.isConnected {
                do {
                    try central?.disconnect(c, reason: .remoteUserTerminated, timeoutMs: 1000)
                    if c.isConnected {
                        Console.err("attled: warning: no Disconnection Complete for handle 0x\(Hex.int(c.handle, width: 4)) within 1000 ms: the link may still be up")
                    }
                } catch {
                    Console.err("attled: warning: Disconnect of handle 0x\(Hex.int(c.handle, width: 4)) failed: \(error)")
                }
            }
            if hardwareError { _ = try? h.execute(.reset, timeoutMs: 1000) }
        }
        if opts.trace != .off, let b = bearer { printTiming(b) }
        transport?.close()
        snoop?.close()
        transport = nil
    }

    func printTiming(_ b: ATTBearer) {
        guard !b.transactions.isEmpty else { return }
        var lines = ["ATT transactions: \(b.transactions.count) (+ \(b.commandsSent) without response), MTU \(b.mtu)"]
        for t in b.transactions {
            let rsp = t.response.map { $0.name } ?? "no response"
            lines.append("  \(pad(t.request.name, 28)) \(pad(formatMs(us: t.end.usSince(t.start), decimals: 2), 7)) ms  -> \(rsp)")
        }
        if let c = connection {
            lines.append("  connection interval \(formatMs(us: c.intervalMicroseconds, decimals: 2)) ms, latency \(c.latency), supervision timeout \(Int(c.supervisionTimeout) * 10) ms")
        }
        Console.err(lines.joined(separator: "\n"))
    }
}
