import Attled
import AttledLED
import AttledJSON

/// One target of set/get/send/listen, driven from when it is heard (or its
/// address is known) to the end of its action: connect, resolve the LED
/// characteristics, act. Every step is a `Future`, so several jobs run at
/// once in the one event loop; the job records its own phases and result.
final class DeviceJob {
    /// Where the job is.
    enum State {
        /// Waiting to be heard by the scan.
        case waiting
        /// Its connection is queued or running.
        case connecting
        /// Connected: resolving and acting.
        case working
        /// Finished (successfully or not).
        case finished
    }

    let target: Target
    let opts: Options
    let report: Report
    let resolver: LEDResolver
    let securer: Securer
    private(set) var state = State.waiting
    private(set) var failure: RunError?
    private(set) var link: Link?
    var device: DiscoveredDevice?
    /// The lamp's session on the link.
    private(set) var session: LampSession?
    /// Notifications received by `listen`.
    private(set) var notifications = 0
    /// Called when the job finishes.
    var onFinish: ((DeviceJob) -> Void)?

    /// When the run started (for the "done" line).
    let runStart: Instant

    init(target: Target, opts: Options, report: Report, resolver: LEDResolver, securer: Securer, runStart: Instant) {
        self.runStart = runStart
        self.securer = securer
        self.target = target
        self.opts = opts
        self.report = report
        self.resolver = resolver
    }

    var isFinished: Bool { state == .finished }

    /// The device's name for messages: its advertised name, the target name, or its address.
    var deviceName: String { device?.name ?? target.name ?? link?.peer.description ?? target.label }

    /// Ends the job with `error` (first outcome wins).
    func fail(_ error: any Error) {
        guard state != .finished else { return }
        // A link that ended because the controller failed: report the controller's failure.
        var cause = error
        if case ATTError.disconnected(nil) = error, let hf = link?.stack.host.failure { cause = hf }
        var re = classify(cause)
        if re.code == .linkLost || re.code == .attError { re.message += " (during \(report.phase.word))" }
        failure = re
        finish()
    }

    /// Ends the job with a prepared error.
    func fail(_ re: RunError) {
        guard state != .finished else { return }
        failure = re
        finish()
    }

    private func finish() {
        guard state != .finished else { return }
        state = .finished
        onFinish?(self)
    }

    /// Back to waiting for the scan (the cached address did not answer).
    func waitAgain() { state = .waiting }

    /// Ends a listening job normally (Ctrl-C, or the --timeout passed).
    func endListening() {
        guard state != .finished else { return }
        report.done("\(notifications) notification(s)")
        finish()
    }

    // MARK: connecting

    /// The scan heard the target.
    func heard(_ d: DiscoveredDevice) {
        device = d
        let prof = LEDProfile.detect(d.serviceUUIDs).map { ", \($0.name) service advertised" } ?? ""
        report.done("\(d.name ?? "(no name)") \(d.address), rssi \(d.rssi) dBm\(prof)")
        report.fields.append(("device", .object([("name", d.name.map { .string($0) } ?? .null), ("address", .string(d.address.address.description)),
                                                 ("address_type", .string(d.address.type.description)), ("rssi", .int(Int64(d.rssi)))])))
    }

    /// Its connection is queued (the keeper makes it, one attempt at a time).
    func connecting() {
        state = .connecting
        report.begin(.connect)
    }

    /// The link is up: the connect phase's line (`cachedName`: reached at
    /// the address the cache remembers for that name).
    func connected(_ link: Link, cachedName: String?) {
        let c = link.connection
        let at = cachedName.map { "\($0) at cached address \(link.peer), " } ?? ""
        report.done("\(at)handle 0x\(Hex.int(c.handle, width: 4)), interval \(formatMs(us: c.intervalMicroseconds, decimals: 2)) ms\(c.airRequestSuffix)")
    }

    /// Runs the job on a connected link, through the lamp's session (set-up,
    /// stale caches, encryption; see `LampSession`).
    func run(on link: Link) {
        self.link = link
        state = .working
        link.bearer.transactionTimeoutMs = opts.attTimeoutMs ?? Session.defaultATTMs
        link.l2cap.onConnectionParameterRequest = { [opts] p, ok in
            if opts.trace != .off {
                Console.err("attled: peer asked for connection interval \(formatMs(us: UInt64(p.intervalMin) * 1250, decimals: 2))-\(formatMs(us: UInt64(p.intervalMax) * 1250, decimals: 2)) ms: \(ok ? "accepted" : "rejected")")
            }
        }
        let lamp = LampSession(link: link, resolver: resolver, securer: securer, advertised: device?.serviceUUIDs ?? [],
                               deviceName: deviceName, report: report)
        session = lamp
        lamp.onResolved = { [report] led, source in
            report.fields.append(("profile", .string(led.profile.name)))
            report.fields.append(("cache", .string(source.rawValue)))
        }
        lamp.start { [self] led in actOnce(lamp, led) }
            .whenComplete { [self] r in
                switch r {
                case .success: finish()
                case .failure(let e): fail(e)
                }
            }
    }

    // MARK: actions

    private func actOnce(_ lamp: LampSession, _ led: ResolvedLED) -> Future<Void> {
        Future.attempt {
            switch opts.command {
            case .set: return setColour(lamp)
            case .get: return get(lamp.link, led)
            case .send: return try send(lamp, led)
            case .listen: return try listen(lamp, led)
            default: return .done
            }
        }
    }

    func setColour(_ lamp: LampSession) -> Future<Void> {
        guard let rgb = opts.led.rgb else { return .done }
        report.begin(.write)
        return lamp.startSetColour(rgb).map { [self] kinds in
            let how = kinds.count == 2 ? "Write Request/Command" : (kinds.contains(true) ? "Write Request" : "Write Command")
            report.done("\(rgb) with \(how) x3")
            report.fields.append(("rgb", .array([.int(Int64(rgb.r)), .int(Int64(rgb.g)), .int(Int64(rgb.b))])))
            report.progress("\(pad("done", 8)) \(formatMs(us: Instant.now().usSince(runStart))) ms")
        }
    }

    func get(_ link: Link, _ led: ResolvedLED) -> Future<Void> {
        report.begin(.read)
        if led.rgb != nil {
            return LEDOperations.startReadColour(link.gatt, led).map { [self] rgb in
                report.done("\(rgb)")
                report.fields.append(("rgb", .array([rgb.r, rgb.g, rgb.b].map { .int(Int64($0)) })))
                if !opts.json { Console.out((opts.isMultiTarget ? "\(target.label) " : "") + "\(rgb.r),\(rgb.g),\(rgb.b) \(rgb.hex)") }
            }
        }
        return Future.attempt {
            let c = try pickCharacteristic(led, default: led.notifier ?? led.command)
            guard c.properties.contains(.read) else { throw GATTError.notPermitted(c.uuid, operation: "reads", properties: c.properties) }
            return link.gatt.startReadLong(c.valueHandle).map { [self] bytes in
                report.done("\(c.uuid): \(Hex.string(bytes))")
                report.fields.append(("value", .string(Hex.string(bytes, separator: ""))))
                if !opts.json { Console.out((opts.isMultiTarget ? "\(target.label) " : "") + Hex.string(bytes, separator: "")) }
            }
        }
    }

    /// The characteristic named by --char, else `def`.
    func pickCharacteristic(_ led: ResolvedLED, default def: Characteristic?) throws -> Characteristic {
        switch opts.characteristic {
        case .colour(let i)?:
            guard let rgb = led.rgb else { throw UsageError("the \(led.profile.name) profile has no red, green and blue characteristics: name one with --char UUID|0xHHHH") }
            return rgb[i]
        case .uuid(let u)?:
            guard let c = led.characteristics.first(where: { $0.uuid == u }) else {
                throw GATTError.characteristicNotFound(u, service: led.profile.service)
            }
            return c
        case .handle(let h)?:
            guard let c = led.characteristics.first(where: { $0.valueHandle == h }) else { throw GATTError.noSuchHandle(h) }
            return c
        case nil:
            guard let c = def else { throw UsageError("the \(led.profile.name) profile has no default characteristic for this: name one with --char red|green|blue|UUID") }
            return c
        }
    }

    func send(_ lamp: LampSession, _ led: ResolvedLED) throws -> Future<Void> {
        guard let value = opts.value else { return .done }
        let c = try pickCharacteristic(led, default: led.command)
        report.begin(.write)
        return lamp.startWrite(c, value).map { [self] withResponse in
            report.done("\(Hex.string(value)) to \(c.uuid) (handle 0x\(Hex.int(c.valueHandle, width: 4))) with \(withResponse ? "Write Request" : "Write Command")")
            report.fields.append(("value", .string(Hex.string(value, separator: ""))))
        }
    }

    func listen(_ lamp: LampSession, _ led: ResolvedLED) throws -> Future<Void> {
        let link = lamp.link
        let c = try pickCharacteristic(led, default: led.notifier)
        guard c.properties.contains(.notify) || c.properties.contains(.indicate) else {
            throw GATTError.notPermitted(c.uuid, operation: "notifications", properties: c.properties)
        }
        report.begin(.subscribe)
        let limit = opts.count ?? Int.max
        let done = Future<Void>()
        let label = opts.isMultiTarget ? target.label : nil
        let handler: (HandleValue) -> Void = { [weak self] hv in
            guard let self, hv.handle == c.valueHandle, !done.isComplete else { return }
            self.notifications += 1
            if self.opts.json {
                var o: [(String, JSONValue)] = [("event", .string("notification"))]
                if let l = label { o.append(("device", .string(l))) }
                o += [("handle", .int(Int64(hv.handle))), ("uuid", .string(c.uuid.description)), ("value", .string(Hex.string(hv.value, separator: "")))]
                Console.out(JSONValue.object(o).serialized)
            } else {
                Console.out((label.map { "\($0) " } ?? "") + "notification 0x\(Hex.int(hv.handle, width: 4)) \(c.uuid): \(Hex.string(hv.value))")
            }
            if self.notifications >= limit {
                self.report.done("\(self.notifications) notification(s)")
                done.succeed(())
            }
        }
        lamp.onValue = handler
        link.onDisconnect = { reason in done.fail(ATTError.disconnected(reason: reason)) }
        return link.gatt.startSubscribe(c, indications: !c.properties.contains(.notify)).flatMap { [self] in
            report.done("\(c.uuid) (handle 0x\(Hex.int(c.valueHandle, width: 4))); Ctrl-C stops")
            report.begin(.listen)
            return done
        }
    }

    /// The JSON result object for this device.
    func json(command: Options.Command, start: Instant) -> JSONValue {
        var obj: [(String, JSONValue)] = [("ok", .bool(failure == nil)), ("command", .string(command.rawValue))]
        if opts.isMultiTarget { obj.append(("target", .string(target.label))) }
        obj += report.fields
        obj.append(("phases_ms", report.phasesJSON))
        obj.append(("total_ms", .double(Double(Instant.now().usSince(start) / 100) / 10)))
        if let b = link?.bearer { obj.append(("att_transactions", .int(Int64(b.transactions.count)))) }
        if let e = failure { obj.append(("error", .string(e.message))); obj.append(("exit_code", .int(Int64(e.code.rawValue)))) }
        return .object(obj)
    }
}

/// One device the command line names: by name, by address, or the first
/// device advertising a known LED service; `--service` narrows each.
struct Target {
    var name: String?
    var address: DeviceAddress?
    var filter: DeviceFilter

    /// How progress lines and results name it.
    var label: String { name ?? address?.address.description ?? "LED" }

    /// The targets the options describe, in command-line order (names first).
    static func from(_ opts: Options) -> [Target] {
        var extra: [DeviceFilter] = []
        if let s = opts.scanService, opts.explicitProfile?.isCustom != true || opts.names.isEmpty { extra.append(.service(s)) }
        var out: [Target] = opts.names.map { Target(name: $0, address: nil, filter: .all([.name($0)] + extra)) }
        out += opts.addresses.map { Target(name: nil, address: $0, filter: .all([.address($0.address)] + extra)) }
        if out.isEmpty {
            let any: DeviceFilter = extra.isEmpty ? .led(opts.explicitProfile.map { [$0] } ?? []) : .all(extra)
            out.append(Target(name: nil, address: nil, filter: any))
        }
        return out
    }

    /// "device named 'X'" for messages.
    var description: String { "device " + filter.description }
}
