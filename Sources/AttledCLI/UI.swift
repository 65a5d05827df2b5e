#if canImport(Glibc)
import Glibc
#endif
import Attled
import AttledLED
import BLEWire
import BLETransport
import BLEHCI
import BLEGAP
import BLEL2CAP
import BLEATT
import BLEGATT
import LEDProfile

/// `attled ui`: the seed apps' colour sliders in a terminal. Sliders stay
/// disabled until their characteristics are found, take the device's values
/// on connect, write as they move (one write per characteristic in flight,
/// the latest value wins), reset and disable on disconnect, and the device is
/// found again by scanning. The harness gets two buttons and its notifications.
final class UIApp {
    /// What the UI needs, and nothing else of the session.
    var stack: BLEStack
    /// Reopens the transport and initialises the controller again (nil: cannot).
    var reopen: (() throws -> BLEStack)?
    let resolver: LEDResolver
    let filter: DeviceFilter
    let passive: Bool
    let connectTimeoutMs: Int
    let transportName: String
    let term = Terminal()
    var names = ["Red", "Green", "Blue"]
    var desired = [0, 0, 0]
    var onDevice: [Int?] = [nil, nil, nil]
    var enabled = false
    var selected = 0
    var typed = ""
    /// What the UI is doing.
    enum State: String { case starting, scanning, connecting, discovering, connected }
    var state = State.starting
    var status = ""
    var deviceLine = "-"
    var profileName = "-"
    var led: ResolvedLED?
    var link: Link?
    var quit = false
    var writes = 0
    // harness
    var pressed = [false, false]
    var lastKey: [Instant?] = [nil, nil]
    var commandQueue: [[UInt8]] = []
    var notifications: [String] = []
    static let holdMs = 400

    /// Reconnect by scanning only (`--no-accept-list`).
    var noAcceptList = false

    init(stack: BLEStack, resolver: LEDResolver, filter: DeviceFilter, passive: Bool, connectTimeoutMs: Int) {
        self.stack = stack
        self.resolver = resolver
        self.filter = filter
        self.passive = passive
        self.connectTimeoutMs = connectTimeoutMs
        self.transportName = stack.transport.name
        watchLateConnections()
    }

    /// The UI for a session's options and stack.
    convenience init(session s: Session) throws {
        guard let stack = s.stack else { throw RunError("no controller", .failure) }
        self.init(stack: stack, resolver: s.makeResolver(explicitProfile: s.opts.explicitProfile, trustCache: s.opts.trustCache),
                  filter: Target.from(s.opts)[0].filter, passive: s.opts.passive,
                  connectTimeoutMs: s.opts.connectTimeoutMs ?? Session.defaultConnectMs)
        reopen = { [unowned s] in try s.reopenStack() }
        noAcceptList = s.opts.noAcceptList
    }

    /// A controller fault the UI outlives by reopening the transport: the
    /// transport lost, a Hardware Error, a command never answered.
    static func isControllerFault(_ e: HCIError) -> Bool {
        switch e {
        case .transport, .hardwareError, .commandTimeout: return true
        default: return false
        }
    }

    /// Reopens the controller with backoff (0.5 s doubling to 8 s), keys
    /// still handled (q quits) while there is none.
    func recover(from e: HCIError) throws {
        guard let reopen else { throw e }
        var backoff = Backoff(initialMs: 500, maxMs: 8_000)
        state = .scanning
        while !quit {
            status = "controller: \(e); reopening it"
            draw()
            let until = Instant.now().adding(ms: backoff.next())
            // No controller: the loop runs on its own, keys and signals still served.
            while Instant.now() < until && !quit {
                do {
                    try loop.run(until: until) { inputPending }
                } catch EventLoopError.interrupted(let sig) {
                    throw HCIError.interrupted(signal: sig)
                }
                if inputPending { handleInput(); draw() }
            }
            if quit { return }
            do {
                stack = try reopen()
                watchLateConnections()
                status = "controller initialised again"
                return
            } catch let again as HCIError where Self.isControllerFault(again) {
                status = "controller: \(again); retrying"
            } catch let t as TransportError {
                status = "controller: \(t); retrying"
            }
        }
    }

    var isHarness: Bool { led.map { !$0.profile.isRGB } ?? false }

    /// The event loop every stack of this UI runs on (the session's).
    var loop: EventLoop { stack.host.loop }

    func run() throws {
        guard term.enter(loop: loop) else {
            throw RunError("attled ui needs a terminal (stdin and stdout must be a tty)", .usage)
        }
        defer { term.leave() }
        loop.watchSignals(resize: true)
        loop.onResize = { [unowned self] in self.draw() }
        while !quit {
            do {
                try session()
            } catch let e as HCIError where Self.isControllerFault(e) {
                // The device's link went with the controller: reset and reopen.
                link = nil; led = nil
                try recover(from: e)
            }
            if quit { break }
            // Lost the device: disable, reset, scan again.
            enabled = false
            desired = [0, 0, 0]; onDevice = [nil, nil, nil]
            pressed = [false, false]; commandQueue.removeAll()
            link = nil; led = nil
        }
    }

    /// Paces the retries after failed connection attempts.
    var connectBackoff = Backoff(initialMs: 500, maxMs: 8_000)

    /// The device of the last connection attempt that failed.
    var gaveUpOn: DeviceAddress?
    /// A connection to it that completed later, unasked: used instead of connecting again.
    var adopted: LEConnection?

    /// A controller that keeps a cancelled LE Create Connection pending (stock
    /// Bumble's do; real ones have the race) completes it when the device
    /// advertises again: that link to the device we gave up on is taken, not
    /// dropped (the Central would disconnect it) and made again.
    func watchLateConnections() {
        stack.central.adoptUnrequested { [unowned self] c in
            guard !self.quit, self.link == nil, self.adopted == nil, c.peer.address == self.gaveUpOn?.address else { return false }
            self.adopted = c
            self.status = "a connection attempt given up earlier completed: using it"
            return true
        }
    }

    /// Waits before scanning again after a failed connection (0.5 s, doubling
    /// to 8 s), still handling keys (q quits).
    func pauseBeforeRetry() throws {
        let ms = connectBackoff.next()
        draw()
        _ = try stack.host.pump(until: Instant.now().adding(ms: ms)) {
            if inputPending { handleInput(); draw() }
            return quit || adopted != nil
        }
    }

    /// Input waiting to be handled (or stdin closed).
    var inputPending: Bool { !term.input.isEmpty || term.input.eof.load(ordering: .relaxed) }

    /// The device of the last link, to come back from the Filter Accept List.
    var lastDevice: DiscoveredDevice?
    /// How long the accept-list connect waits for the last device before a
    /// scan round (which may find it, or another matching device).
    static let acceptListWaitMs = 10_000

    /// Waits for the last device through an LE Create Connection from the
    /// Filter Accept List: the controller connects on its first advertisement
    /// (a scan would hear it, stop, and connect on the next one). Peer_Address
    /// names it too, so a controller that ignores the list (Bumble's) still
    /// connects it. Bounded by `acceptListWaitMs`; keys are handled meanwhile.
    /// - Returns: the connection, or nil (timeout, refusal, quit: scan instead).
    func connectFromAcceptList(_ d: DiscoveredDevice) throws -> LEConnection? {
        guard !noAcceptList, stack.info.supportsAcceptList else { return nil }
        state = .connecting
        status = "waiting for \(d.name ?? d.address.description) to advertise (Filter Accept List)"
        draw()
        let f = stack.central.startAcceptListConnect([d.address], timeoutMs: Self.acceptListWaitMs, parameters: .oneShot)
        _ = try stack.host.pump(until: Instant.now().adding(ms: Self.acceptListWaitMs + 1_000)) {
            if inputPending { handleInput(); draw() }
            return quit || f.isComplete
        }
        if !f.isComplete { stack.central.cancelAcceptListConnect() }
        switch f.result {
        case .success(let c)?: return c
        case .failure(let e)?:
            // A controller that keeps the cancelled connect pending completes it
            // later: that connection is adopted (watchLateConnections).
            gaveUpOn = d.address
            if !quit { status = "\(e); scanning" }
            return nil
        case nil:
            gaveUpOn = d.address
            return nil
        }
    }

    /// One scan-connect-use cycle; returns when the link is lost or on quit.
    func session() throws {
        let central = stack.central
        if adopted == nil, let last = lastDevice, let c = try connectFromAcceptList(last) {
            adopted = c
        }
        guard !quit else { return }
        state = .scanning
        draw()
        var found: DiscoveredDevice? = nil
        if adopted == nil {
            try central.startScan(active: !passive)
            found = try central.waitForDevice(until: .distantFuture, orStop: {
                if inputPending { handleInput(); draw() }
                return quit || adopted != nil
            }, where: { filter.matches($0) })
            try central.stopScan()
        }
        guard !quit else { return }
        // The device: the one heard, or the one whose late connection was taken.
        let d: DiscoveredDevice
        let late = adopted
        adopted = nil
        if let c = late {
            guard c.isConnected, let known = central.devices[c.peer] ?? lastDevice.flatMap({ $0.address.address == c.peer.address ? $0 : nil }) else {
                if c.isConnected { _ = central.startDisconnect(c) }
                return
            }
            d = known
        } else {
            guard let f = found else { return }
            d = f
        }
        deviceLine = "\(d.name ?? "(no name)")  \(d.address)  RSSI \(d.rssi) dBm"
        let l: Link
        if let c = late {
            l = stack.attach(c)
        } else {
            state = .connecting
            draw()
            do {
                l = try stack.connect(to: d.address, timeoutMs: connectTimeoutMs)
            } catch let e as GAPError {
                gaveUpOn = d.address
                status = e.description
                try pauseBeforeRetry()
                return
            } catch let e as HCIError {
                // The controller refused LE Create Connection (Command Disallowed:
                // stock Bumble controllers keep a cancelled connection pending, and
                // real ones have the same race). Not fatal: scan again, with backoff.
                guard case .commandFailed = e else { throw e }
                status = "the controller refused to connect (\(e)); scanning again"
                try pauseBeforeRetry()
                return
            }
        }
        connectBackoff.reset()
        gaveUpOn = nil
        lastDevice = d
        link = l
        let gatt = l.gatt
        let b = gatt.bearer
        state = .discovering
        draw()
        let quietReport = Report(prefix: "", quiet: true)
        do {
            let (r, _) = try stack.host.wait(resolver.start(gatt, peer: d.address, advertised: d.serviceUUIDs, deviceName: d.name ?? d.address.description, report: quietReport))
            led = r
            profileName = r.profile.name
            if let chars = r.rgb {
                for (i, c) in chars.enumerated() where c.properties.contains(.read) {
                    if let v = try gatt.read(c.valueHandle).first { desired[i] = Int(v); onDevice[i] = Int(v) }
                }
                status = "read \(desired[0]),\(desired[1]),\(desired[2]) from the device"
            } else {
                names = ["Button 1", "Button 2", ""]
                b.onNotification = { [unowned self] (hv: HandleValue) in
                    self.notifications.append(Hex.string(hv.value))
                    if self.notifications.count > 12 { self.notifications.removeFirst() }
                    self.draw()
                }
                if let n = r.notifier { try gatt.subscribe(n, indications: !n.properties.contains(CharacteristicProperties.notify)) }
                status = "subscribed to notifications"
            }
            enabled = true
            state = .connected
            draw()
            try loop(l)
        } catch let e as ATTError {
            if case .disconnected = e {} else { status = e.description }
        } catch let e as GATTError {
            status = e.description
            if l.isConnected { try? l.disconnect() }
            quit = true
            throw RunError(e.description, .notFound)
        } catch let e as LEDOperations.Failure {
            status = e.description
            if l.isConnected { try? l.disconnect() }
            quit = true
            throw RunError(e.description, .notFound)
        }
        if l.isConnected {
            // Quitting, or the link is unusable (an ATT timeout closes the bearer):
            // disconnect before scanning again, never leave it behind.
            try? l.disconnect()
        }
        if !quit {
            status = "disconnected (\(l.connection.disconnectReason?.description ?? "link lost")); scanning again"
        }
    }

    /// The connected loop: keys, coalesced writes, harness releases.
    func loop(_ l: Link) throws {
        let conn = l.connection
        while !quit && conn.isConnected {
            var until = Instant.distantFuture
            for i in 0..<2 { if pressed[i], let t = lastKey[i] { until = min(until, t.adding(ms: Self.holdMs)) } }
            _ = try stack.host.pump(until: until) { inputPending || !conn.isConnected || needsWrite }
            if inputPending { handleInput() }
            releaseHeldButtons()
            draw()
            try flushWrites(l)
        }
    }

    var needsWrite: Bool {
        guard enabled else { return false }
        if isHarness { return !commandQueue.isEmpty }
        return (0..<3).contains { onDevice[$0] != desired[$0] }
    }

    /// Writes what changed: one write per characteristic at a time, the latest value.
    func flushWrites(_ l: Link) throws {
        guard let led = led, enabled else { return }
        let conn = l.connection
        let host = stack.host
        if let chars = led.rgb {
            for i in 0..<3 where onDevice[i] != desired[i] && conn.isConnected {
                let v = desired[i]
                let withResponse = try host.wait(LEDOperations.startWrite(l.gatt, chars[i], [UInt8(v)]))
                if !withResponse {
                    _ = try host.wait(host.startDrain(handle: conn.handle), until: Instant.now().adding(ms: 2000))
                }
                onDevice[i] = v
                writes += 1
                status = "\(names[i].lowercased()) \(v) written (\(writes) write(s))"
                if inputPending { handleInput() } // the latest value wins
            }
        } else if let c = led.command {
            while !commandQueue.isEmpty && conn.isConnected {
                let cmd = commandQueue.removeFirst()
                _ = try host.wait(LEDOperations.startWrite(l.gatt, c, cmd))
                writes += 1
                status = "sent \(Hex.string(cmd))"
            }
        }
        draw()
    }

    func releaseHeldButtons() {
        guard isHarness else { return }
        let now = Instant.now()
        for i in 0..<2 where pressed[i] {
            if let t = lastKey[i], now >= t.adding(ms: Self.holdMs) {
                pressed[i] = false
                commandQueue.append([i == 0 ? 0x00 : 0x04])
            }
        }
    }

    func handleInput() {
        if term.input.eof.load(ordering: .relaxed) && term.input.isEmpty { quit = true; return }
        for k in Terminal.keys(term.input.take()) { handle(k) }
    }

    func handle(_ k: Key) {
        switch k {
        case .char("q"), .char("Q"), .ctrlC: quit = true; return
        default: break
        }
        if isHarness {
            if case let .char(c) = k, c == "1" || c == "2" {
                let i = c == "1" ? 0 : 1
                lastKey[i] = Instant.now()
                if !pressed[i] && enabled {
                    pressed[i] = true
                    commandQueue.append([i == 0 ? 0x01 : 0x03])
                }
            }
            return
        }
        switch k {
        case .tab, .down: selected = (selected + 1) % 3; typed = ""
        case .backTab, .up: selected = (selected + 2) % 3; typed = ""
        case .char("r"): selected = 0; typed = ""
        case .char("g"): selected = 1; typed = ""
        case .char("b"): selected = 2; typed = ""
        case .left: set(desired[selected] - 1)
        case .right: set(desired[selected] + 1)
        case .pageDown: set(desired[selected] - 16)
        case .pageUp: set(desired[selected] + 16)
        case .home: set(0)
        case .end: set(255)
        case let .char(c) where c.isNumber:
            typed.append(c)
            if typed.count == 3 { commitTyped() }
        case .enter: commitTyped()
        case .backspace: if !typed.isEmpty { typed.removeLast() }
        case .escape: typed = ""
        default: break
        }
    }

    func set(_ v: Int) {
        guard enabled else { return }
        desired[selected] = max(0, min(255, v))
    }

    func commitTyped() {
        if let v = Int(typed) { set(v) }
        typed = ""
    }

    // MARK: drawing

    func draw() {
        let (cols, rows) = term.size()
        let width = max(8, min(64, cols - 28))
        var lines: [String] = []
        lines.append("\u{1b}[1m attled ui\u{1b}[0m  \(transportName)")
        lines.append(" Device  \(deviceLine)")
        var st = " State   \(state.rawValue)"
        if let c = link?.connection, c.isConnected { st += ", interval \(formatMs(us: c.intervalMicroseconds, decimals: 2)) ms" }
        st += ", profile \(profileName)"
        lines.append(st)
        lines.append("")
        if isHarness {
            for i in 0..<2 {
                let label = pressed[i] ? "\u{1b}[7m PRESSED  \u{1b}[0m" : "[ released ]"
                lines.append("   \(names[i])  \(label)   key \(i + 1)")
            }
            lines.append("")
            lines.append("   Notifications: " + (notifications.isEmpty ? "(none yet)" : notifications.joined(separator: " ")))
        } else {
            let colours = ["31", "32", "34"]
            for i in 0..<3 {
                let mark = i == selected ? ">" : " "
                let filled = enabled ? desired[i] * width / 255 : 0
                let bar: String
                if enabled {
                    bar = "\u{1b}[\(colours[i])m" + String(repeating: "█", count: filled) + "\u{1b}[0m" + String(repeating: "░", count: width - filled)
                } else {
                    bar = "\u{1b}[2m" + String(repeating: "·", count: width) + "\u{1b}[0m"
                }
                let value = enabled ? String(desired[i]) : "--"
                let label = names[i] + String(repeating: " ", count: 6 - names[i].count)
                lines.append(" \(mark) \(label) [\(bar)] \(String(repeating: " ", count: max(0, 3 - value.count)))\(value)" + (enabled ? "" : "  disabled"))
            }
            lines.append("")
            let (r, g, b) = (desired[0], desired[1], desired[2])
            lines.append("   Colour [\u{1b}[48;2;\(r);\(g);\(b)m        \u{1b}[0m]  " + RGB(UInt8(r), UInt8(g), UInt8(b)).hex + (typed.isEmpty ? "" : "   typing: \(typed)"))
        }
        lines.append("")
        lines.append(" Status: \(status)")
        lines.append(isHarness ? " 1/2 press a button (released after a short hold)   q quit"
                               : " Tab/r/g/b select  ←/→ ±1  PgUp/PgDn ±16  Home/End 0/255  0-9 type  q quit")
        var out = "\u{1b}[H"
        for (i, l) in lines.prefix(rows).enumerated() {
            out += l + "\u{1b}[K" + (i < min(lines.count, rows) - 1 ? "\r\n" : "")
        }
        out += "\u{1b}[J"
        term.write(out)
    }
}

