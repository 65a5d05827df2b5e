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

extension Session {
    // MARK: matching

    /// Whether a scanned device is the one the options describe.
    func matches(_ d: DiscoveredDevice) -> Bool {
        if let a = opts.address, d.address.address != a.address { return false }
        if let n = opts.name {
            let ad = d.merged
            var nameOK = false
            for s in ad.structures {
                if case let .localName(adv, complete) = s.field {
                    if complete ? adv == n : (!adv.isEmpty && n.hasPrefix(adv)) { nameOK = true }
                }
            }
            if !nameOK { return false }
        }
        if let s = opts.service, opts.explicitProfile?.name != "custom" || opts.name == nil {
            if !d.serviceUUIDs.contains(s) { return false }
        }
        if opts.name == nil && opts.service == nil && opts.address == nil && opts.command != .scan {
            // No target given: the first device advertising a known LED service.
            let wanted = opts.explicitProfile.map { [$0.service] } ?? LEDProfile.known.map(\.service)
            return d.serviceUUIDs.contains { wanted.contains($0) }
        }
        return true
    }

    func describeTarget() -> String {
        var parts: [String] = []
        if let n = opts.name { parts.append("named '\(n)'") }
        if let s = opts.service { parts.append("advertising service \(s)") }
        if parts.isEmpty { parts.append("advertising a known LED service (pycom, particle or harness)") }
        return "device " + parts.joined(separator: " and ")
    }

    // MARK: scan command

    func deviceLine(_ d: DiscoveredDevice, update: Bool) -> String {
        if opts.json {
            let ad = d.merged
            var o: [(String, JSON)] = [("event", .string(update ? "update" : "device")),
                                       ("address", .string(d.address.address.description)),
                                       ("address_type", .string(d.address.type.description)),
                                       ("rssi", .int(Int(d.rssi))), ("connectable", .bool(d.connectable))]
            o.append(("name", d.name.map { .string($0) } ?? .null))
            o.append(("services", .array(d.serviceUUIDs.map { .string($0.description) })))
            o.append(("manufacturer_data", .array(ad.manufacturerData.map {
                .object([("company", .int(Int($0.company))), ("data", .string(Hex.string($0.data, separator: "")))])
            })))
            o.append(("service_data", .array(ad.serviceData.map {
                .object([("uuid", .string($0.uuid.description)), ("data", .string(Hex.string($0.data, separator: "")))])
            })))
            if let t = ad.txPower { o.append(("tx_power", .int(Int(t)))) }
            if let f = ad.flags { o.append(("flags", .int(Int(f)))) }
            if !ad.problems.isEmpty { o.append(("problems", .array(ad.problems.map { .string($0) }))) }
            return JSON.object(o).text
        }
        let ad = d.merged
        var s = pad("\(d.address.address) (\(d.address.type))", 28) + " " + pad("\(d.rssi) dBm", 8)
        s += " " + pad(d.name.map { "\"\($0)\"" } ?? "(no name)", 20)
        if !d.serviceUUIDs.isEmpty {
            s += " services " + d.serviceUUIDs.map { u in
                LEDProfile.detect([u]).map { "\(u) (\($0.name))" } ?? u.description
            }.joined(separator: ", ")
        }
        for m in ad.manufacturerData { s += " mfr 0x\(Hex.int(m.company, width: 4)):\(Hex.string(m.data, separator: ""))" }
        if !d.connectable { s += " [non-connectable]" }
        if !ad.problems.isEmpty { s += " [malformed: \(ad.problems.joined(separator: "; "))]" }
        return (update ? "~ " : "+ ") + s
    }

    func scanJob() throws {
        guard let central = central, let host = host else { return }
        let scanMs = opts.timeoutMs ?? Self.defaultScanMs
        let until = Instant.now().adding(ms: scanMs)
        begin("scan")
        var shown = Set<DeviceAddress>()
        central.onDeviceUpdate = { [unowned self] d, _ in
            guard self.matches(d) else { return }
            let update = shown.contains(d.address)
            shown.insert(d.address)
            Console.out(self.deviceLine(d, update: update))
        }
        try central.startScan(active: !opts.passive)
        progress("scanning on \(host.transport.name) for \(formatMs(us: UInt64(scanMs) * 1000, decimals: 0)) ms (\(opts.passive ? "passive" : "active")); Ctrl-C stops")
        _ = try host.pump(until: until) { false }
        try central.stopScan()
        progress("scan: \(shown.count) device(s) in \(end())")
    }

    // MARK: device jobs

    func deviceJob() throws {
        guard let central = central, host != nil else { return }
        // 1. Find the device: --address, else the address this name resolved to last time
        //    (if it answers quickly), else scan.
        var target: DeviceAddress? = opts.address
        var advertised: [BluetoothUUID] = []
        var deviceName: String? = opts.name
        var conn: LEConnection? = nil
        if target == nil, let name = opts.name, opts.service == nil, let c = cache, let known = c.address(forName: name) {
            begin("connect")
            let quick = remaining(max: min(opts.connectTimeoutMs ?? Self.defaultConnectMs, 1000))
            do {
                conn = try central.connect(to: known, timeoutMs: quick)
                target = known
                progress("\(pad("connect", 8)) \(pad(end(), 10)) \(name) at cached address \(known), handle 0x\(Hex.int(conn!.handle, width: 4)), interval \(formatMs(us: conn!.intervalMicroseconds, decimals: 2)) ms")
            } catch let e as GAPError {
                progress("cached address \(known) for '\(name)' did not answer (\(e)); scanning")
                c.forget(name: name)
            }
        }
        if target == nil {
            begin("scan")
            let scanMs = remaining(max: opts.timeoutMs ?? Self.defaultScanMs)
            try central.startScan(active: !opts.passive)
            let found = try central.waitForDevice(until: Instant.now().adding(ms: scanMs)) { matches($0) }
            try central.stopScan()
            guard let d = found else {
                throw RunError("no \(describeTarget()) found within \(formatMs(us: UInt64(scanMs) * 1000, decimals: 0)) ms (\(central.devices.count) other device(s) heard): check that it is powered, advertising and in range; 'attled scan' lists what is heard", .deviceNotFound)
            }
            target = d.address
            advertised = d.serviceUUIDs
            deviceName = d.name
            let prof = LEDProfile.detect(advertised).map { ", \($0.name) service advertised" } ?? ""
            let dur = end()
            progress("\(pad("scan", 8)) \(pad(dur, 10)) \(d.name ?? "(no name)") \(d.address), rssi \(d.rssi) dBm\(prof)")
            result.append(("device", .object([("name", d.name.map { .string($0) } ?? .null), ("address", .string(d.address.address.description)),
                                              ("address_type", .string(d.address.type.description)), ("rssi", .int(Int(d.rssi)))])))
        }
        guard let peer = target else { return }
        // 2. Connect.
        if conn == nil {
            begin("connect")
            let cms = remaining(max: opts.connectTimeoutMs ?? Self.defaultConnectMs)
            guard cms > 0 else { throw RunError("the --timeout passed before connecting", .connectionFailed) }
            conn = try central.connect(to: peer, timeoutMs: cms)
            progress("\(pad("connect", 8)) \(pad(end(), 10)) handle 0x\(Hex.int(conn!.handle, width: 4)), interval \(formatMs(us: conn!.intervalMicroseconds, decimals: 2)) ms")
        }
        guard let connection = conn else { return }
        self.connection = connection
        let gatt = attach(connection)
        if deviceName == nil { deviceName = peer.description }
        if let n = opts.name, opts.service == nil { cache?.remember(name: n, peer) }

        if opts.command == .gatt { try gattDump(gatt); return }

        // 3. The LED characteristics: from the cache when it is valid, else discovered.
        var led: ResolvedLED
        var fromCache = false
        if let cached = try cachedLED(gatt, peer, advertised) {
            led = cached
            fromCache = true
        } else {
            led = try discover(gatt, peer, advertised, deviceName)
        }
        result.append(("profile", .string(led.profile.name)))
        result.append(("cache", .string(fromCache ? "hit" : (cache == nil ? "off" : "miss"))))

        // 4. Act. Cached handles the device rejects, or a Service Changed
        //    indication during the job, mean the cache was stale: discover
        //    again in the same connection and redo the job.
        var stale: Error? = nil
        do {
            try act(gatt, led)
        } catch where fromCache && connection.isConnected && Self.isStaleHandleError(error) {
            stale = error
        }
        if fromCache && (stale != nil || serviceChanged) {
            progress("cached handles " + (stale.map { "failed (\($0))" } ?? "changed (Service Changed)") + "; discovering again")
            cache?.remove(peer)
            serviceChanged = false
            led = try discover(gatt, peer, advertised, deviceName)
            try act(gatt, led)
        }
    }

    /// An error that a stale cached handle explains (not a dead link or a silent peer).
    static func isStaleHandleError(_ e: Error) -> Bool {
        if case ATTError.timeout = e { return false }
        return e is ATTError || e is GATTError
    }

    /// L2CAP, the ATT bearer and a GATT client over a new connection.
    func attach(_ connection: LEConnection) -> GATTClient {
        let link = L2CAPLink(host: host!, handle: connection.handle)
        link.onConnectionParameterRequest = { [unowned self] p, ok in
            if self.opts.trace != .off {
                Console.err("attled: peer asked for connection interval \(formatMs(us: UInt64(p.intervalMin) * 1250, decimals: 2))-\(formatMs(us: UInt64(p.intervalMax) * 1250, decimals: 2)) ms: \(ok ? "accepted" : "rejected")")
            }
        }
        let b = ATTBearer(link: link)
        b.transactionTimeoutMs = opts.attTimeoutMs ?? Self.defaultATTMs
        b.onIndication = { [unowned self] hv in self.noteIndication(hv) }
        bearer = b
        return GATTClient(bearer: b)
    }

    func act(_ gatt: GATTClient, _ led: ResolvedLED) throws {
        switch opts.command {
        case .set: try setColour(gatt, led)
        case .get: try getColour(gatt, led)
        case .send: try send(gatt, led)
        case .listen: try listen(gatt, led)
        default: break
        }
    }

    /// A Service Changed indication (4-byte handle range, not one of ours)
    /// invalidates what the cache holds for this device.
    func noteIndication(_ hv: HandleValue) {
        guard hv.value.count == 4 else { return }
        serviceChanged = true
        if let c = connection { cache?.remove(c.peer) }
        progress("the device indicated Service Changed (handle 0x\(Hex.int(hv.handle, width: 4))): cache invalidated")
    }

    /// The cached LED characteristics, after validating them with the GATT
    /// Database Hash when the device has one; nil when there is no usable entry.
    func cachedLED(_ gatt: GATTClient, _ peer: DeviceAddress, _ advertised: [BluetoothUUID]) throws -> ResolvedLED? {
        guard let cache = cache, var e = cache.load(peer) else { return nil }
        let profile: LEDProfile?
        if let x = opts.explicitProfile {
            profile = x.service == e.service.uuid ? x : nil
        } else {
            profile = LEDProfile.named(e.profile).flatMap { p in
                (advertised.isEmpty || LEDProfile.detect(advertised) == nil || LEDProfile.detect(advertised) == p) ? p : nil
            }
        }
        guard let prof = profile, prof.service == e.service.uuid,
              let led = try? ResolvedLED(profile: prof, service: e.service, characteristics: e.characteristics) else { return nil }
        begin("cache")
        let before = bearer?.transactions.count ?? 0
        var how = "trusted (no Database Hash)"
        if opts.trustCache {
            how = "trusted (--trust-cache)"
        } else if let h = e.hashHandle, let want = e.hash {
            let got: [UInt8]
            do { got = try gatt.read(h) } catch let err as ATTError {
                if case .errorResponse = err { cache.remove(peer); end(); return nil }
                throw err
            }
            guard got == want else {
                cache.remove(peer)
                progress("\(pad("cache", 8)) \(pad(end(), 10)) Database Hash changed: discovering again")
                return nil
            }
            how = "Database Hash matches"
        } else if !e.noHash {
            if let hv = try gatt.read(type: BluetoothUUID(uint16: 0x2B2A)), hv.value.count == 16 {
                e.hashHandle = hv.handle; e.hash = hv.value
                how = "Database Hash recorded"
            } else {
                e.noHash = true
                how = "the device has no Database Hash"
            }
            cache.save(peer, e)
        }
        progress("\(pad("cache", 8)) \(pad(end(), 10)) \(prof.name) handles from the cache, \(how), \((bearer?.transactions.count ?? 0) - before) ATT transaction(s)")
        return led
    }

    /// Discovers the LED service and its characteristics, stopping as soon as
    /// the profile's characteristics are known, and saves them to the cache.
    func discover(_ gatt: GATTClient, _ peer: DeviceAddress, _ advertised: [BluetoothUUID], _ deviceName: String?) throws -> ResolvedLED {
        guard let b = bearer else { throw ATTError.disconnected(reason: nil) }
        begin("discover")
        let before = b.transactions.count
        var profile = opts.explicitProfile ?? LEDProfile.detect(advertised)
        var service: Service? = nil
        if let p = profile {
            service = try gatt.discoverPrimaryService(uuid: p.service)
            if service == nil { throw GATTError.serviceNotFound(p.service) }
        } else {
            for p in LEDProfile.known {
                if let s = try gatt.discoverPrimaryService(uuid: p.service) { profile = p; service = s; break }
            }
        }
        guard let prof = profile, let svc = service else {
            throw RunError("\(deviceName ?? "the device") has none of the known LED services (pycom \(LEDProfile.pycom.service), particle \(LEDProfile.particle.service), harness \(LEDProfile.harness.service)); describe it with --service --red --green --blue", .notFound)
        }
        // Exchange MTU only when it saves a round trip: several 128-bit declarations fit one
        // Read By Type response at a large MTU, but only one at the default 23.
        let wide = prof.requiredCharacteristics.filter { $0.uint16 == nil }.count
        if !b.mtuExchanged && (wide >= 2 || !prof.isRGB) {
            try b.exchangeMTU()
        }
        let chars = try gatt.discoverCharacteristics(of: svc) { ResolvedLED.isComplete(prof, $0) }
        let led = try ResolvedLED(profile: prof, service: svc, characteristics: chars)
        progress("\(pad("discover", 8)) \(pad(end(), 10)) \(prof.name) service 0x\(Hex.int(svc.start, width: 4))-0x\(Hex.int(svc.end, width: 4)), \(chars.count) characteristic(s), MTU \(b.mtu), \(b.transactions.count - before) ATT transaction(s)")
        if prof.name != "custom" {
            cache?.save(peer, GATTCache.Entry(profile: prof.name, service: svc, characteristics: chars))
        }
        return led
    }

    /// Writes with the type the characteristic's properties call for.
    func write(_ gatt: GATTClient, _ c: Characteristic, _ value: [UInt8]) throws -> Bool {
        if c.properties.contains(.write) {
            try gatt.write(c.valueHandle, value: value, withResponse: true)
            return true
        }
        if c.properties.contains(.writeWithoutResponse) {
            try gatt.write(c.valueHandle, value: value, withResponse: false)
            return false
        }
        throw GATTError.notPermitted(c.uuid, operation: "writes", properties: c.properties)
    }

    /// After Write Commands, waits until the controller reports them sent
    /// (Number Of Completed Packets), so disconnecting cannot lose them.
    func waitForCommandsSent() throws {
        guard let host = host, let c = connection else { return }
        let ok = try host.pump(until: Instant.now().adding(ms: remaining(max: 2000))) { host.unacknowledgedACL(handle: c.handle) == 0 || !c.isConnected }
        if !c.isConnected { throw ATTError.disconnected(reason: c.disconnectReason) }
        if !ok { throw RunError("the controller did not confirm sending the Write Commands (Number Of Completed Packets) in time", .linkLost) }
    }

    func setColour(_ gatt: GATTClient, _ led: ResolvedLED) throws {
        guard let rgb = opts.rgb, let chars = led.rgb else { return }
        begin("write")
        var kinds = Set<Bool>()
        for (c, v) in zip(chars, [rgb.r, rgb.g, rgb.b]) { kinds.insert(try write(gatt, c, [v])) }
        if kinds.contains(false) { try waitForCommandsSent() }
        let how = kinds.count == 2 ? "Write Request/Command" : (kinds.first! ? "Write Request" : "Write Command")
        progress("\(pad("write", 8)) \(pad(end(), 10)) \(rgb) with \(how) x3")
        result.append(("rgb", .array([.int(Int(rgb.r)), .int(Int(rgb.g)), .int(Int(rgb.b))])))
        progress("\(pad("done", 8)) \(formatMs(us: Instant.now().usSince(start))) ms")
    }

    func getColour(_ gatt: GATTClient, _ led: ResolvedLED) throws {
        begin("read")
        if let chars = led.rgb {
            var v: [UInt8] = []
            for c in chars {
                guard c.properties.contains(.read) else { throw GATTError.notPermitted(c.uuid, operation: "reads", properties: c.properties) }
                let bytes = try gatt.read(c.valueHandle)
                guard let first = bytes.first else { throw RunError("characteristic \(c.uuid) returned an empty value", .attError) }
                v.append(first)
            }
            let rgb = RGB(v[0], v[1], v[2])
            progress("\(pad("read", 8)) \(pad(end(), 10)) \(rgb)")
            result.append(("rgb", .array(v.map { .int(Int($0)) })))
            if !opts.json { Console.out("\(rgb.r),\(rgb.g),\(rgb.b) \(rgb.hex)") }
        } else {
            let c = try pickCharacteristic(led, default: led.notifier ?? led.command)
            guard c.properties.contains(.read) else { throw GATTError.notPermitted(c.uuid, operation: "reads", properties: c.properties) }
            let bytes = try gatt.readLong(c.valueHandle)
            progress("\(pad("read", 8)) \(pad(end(), 10)) \(c.uuid): \(Hex.string(bytes))")
            result.append(("value", .string(Hex.string(bytes, separator: ""))))
            if !opts.json { Console.out(Hex.string(bytes, separator: "")) }
        }
    }

    /// The characteristic named by --char, else `def`.
    func pickCharacteristic(_ led: ResolvedLED, default def: Characteristic?) throws -> Characteristic {
        if let name = opts.characteristic {
            if let rgb = led.rgb, let i = ["red", "green", "blue"].firstIndex(of: name.lowercased()) { return rgb[i] }
            guard let u = BluetoothUUID(name) else { throw UsageError("--char: '\(name)' is not red, green, blue or a UUID") }
            guard let c = led.characteristics.first(where: { $0.uuid == u }) else {
                throw GATTError.characteristicNotFound(u, service: led.profile.service)
            }
            return c
        }
        guard let c = def else { throw UsageError("the \(led.profile.name) profile has no default characteristic for this: name one with --char red|green|blue|UUID") }
        return c
    }

    func send(_ gatt: GATTClient, _ led: ResolvedLED) throws {
        guard let value = opts.value else { return }
        let c = try pickCharacteristic(led, default: led.command)
        begin("write")
        let withResponse = try write(gatt, c, value)
        if !withResponse { try waitForCommandsSent() }
        progress("\(pad("write", 8)) \(pad(end(), 10)) \(Hex.string(value)) to \(c.uuid) (handle 0x\(Hex.int(c.valueHandle, width: 4))) with \(withResponse ? "Write Request" : "Write Command")")
        result.append(("value", .string(Hex.string(value, separator: ""))))
    }

    func listen(_ gatt: GATTClient, _ led: ResolvedLED) throws {
        guard let host = host, let b = bearer, let conn = connection else { return }
        let c = try pickCharacteristic(led, default: led.notifier)
        guard c.properties.contains(.notify) || c.properties.contains(.indicate) else {
            throw GATTError.notPermitted(c.uuid, operation: "notifications", properties: c.properties)
        }
        begin("subscribe")
        var received = 0
        let limit = opts.count ?? Int.max
        let handler: (HandleValue) -> Void = { [unowned self] hv in
            guard hv.handle == c.valueHandle else { return }
            received += 1
            if self.opts.json {
                Console.out(JSON.object([("event", .string("notification")), ("handle", .int(Int(hv.handle))),
                                         ("uuid", .string(c.uuid.description)), ("value", .string(Hex.string(hv.value, separator: "")))]).text)
            } else {
                Console.out("notification 0x\(Hex.int(hv.handle, width: 4)) \(c.uuid): \(Hex.string(hv.value))")
            }
        }
        b.onNotification = handler
        b.onIndication = { [unowned self] hv in
            if hv.handle == c.valueHandle { handler(hv) } else { self.noteIndication(hv) }
        }
        try gatt.subscribe(c, indications: !c.properties.contains(.notify))
        progress("\(pad("subscribe", 8)) \(pad(end(), 10)) \(c.uuid) (handle 0x\(Hex.int(c.valueHandle, width: 4))); Ctrl-C stops")
        sigintIsSuccess = true
        begin("listen")
        let until = opts.timeoutMs != nil ? deadline : Instant.distantFuture
        _ = try host.pump(until: until) { received >= limit || !conn.isConnected }
        if !conn.isConnected { throw ATTError.disconnected(reason: conn.disconnectReason) }
        progress("\(pad("listen", 8)) \(pad(end(), 10)) \(received) notification(s)")
    }

    // MARK: gatt dump

    func gattDump(_ gatt: GATTClient) throws {
        guard let b = bearer else { return }
        begin("discover")
        if !b.mtuExchanged { try b.exchangeMTU() }
        let services = try gatt.discoverPrimaryServices()
        var jsonServices: [JSON] = []
        var lines: [String] = []
        for s in services {
            let sname = GATTUUID.name(s.uuid) ?? LEDProfile.detect([s.uuid]).map { "LED service (\($0.name))" } ?? ""
            lines.append("service \(s.uuid)\(sname.isEmpty ? "" : " \(sname)")  handles 0x\(Hex.int(s.start, width: 4))-0x\(Hex.int(s.end, width: 4))")
            let chars = try gatt.discoverCharacteristics(of: s)
            var jc: [JSON] = []
            for c in chars {
                let ds = try gatt.discoverDescriptors(of: c)
                let cname = GATTUUID.name(c.uuid).map { " \($0)" } ?? ""
                lines.append("  characteristic \(c.uuid)\(cname)  handle 0x\(Hex.int(c.valueHandle, width: 4))  [\(c.properties)]")
                for d in ds {
                    lines.append("    descriptor \(d.uuid)\(GATTUUID.name(d.uuid).map { " \($0)" } ?? "")  handle 0x\(Hex.int(d.handle, width: 4))")
                }
                jc.append(.object([("uuid", .string(c.uuid.description)), ("declaration_handle", .int(Int(c.declarationHandle))),
                                   ("value_handle", .int(Int(c.valueHandle))), ("properties", .array(c.properties.names.map { .string($0) })),
                                   ("descriptors", .array(ds.map { .object([("uuid", .string($0.uuid.description)), ("handle", .int(Int($0.handle)))]) }))]))
            }
            jsonServices.append(.object([("uuid", .string(s.uuid.description)), ("start", .int(Int(s.start))), ("end", .int(Int(s.end))),
                                         ("characteristics", .array(jc))]))
        }
        progress("\(pad("discover", 8)) \(pad(end(), 10)) \(services.count) service(s), MTU \(b.mtu), \(b.transactions.count) ATT transaction(s)")
        if opts.json { result.append(("services", .array(jsonServices))) } else { Console.out(lines.joined(separator: "\n")) }
    }
}

/// The whole command line: parse, run, return the exit code.
public func runCLI(_ args: [String], environment: [String: String]) -> Int32 {
    if args.first == "__restore-hci" { return Privileges.runRestorer(args) }
    let opts: Options
    do {
        opts = try Options.parse(args, environment: environment)
    } catch let e as UsageError {
        Console.err("attled: \(e.message)\n\(Usage.line)\n(attled --help for more)")
        return ExitCode.usage.rawValue
    } catch {
        Console.err("attled: \(error)")
        return ExitCode.usage.rawValue
    }
    switch opts.command {
    case .help: Console.out(Usage.help); return 0
    case .version: Console.out(Usage.version); return 0
    case .decode: return runDecode(opts)
    default: return Session(opts, environment: environment).run()
    }
}

/// The process environment as a dictionary.
public func processEnvironment() -> [String: String] {
    var env: [String: String] = [:]
    var p = environ
    while let entry = p.pointee {
        let s = String(cString: entry)
        if let eq = s.firstIndex(of: "=") { env[String(s[..<eq])] = String(s[s.index(after: eq)...]) }
        p += 1
    }
    return env
}
