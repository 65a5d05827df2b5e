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
        guard let central = central, let host = host else { return }
        // 1. Find the device.
        var target: DeviceAddress
        var advertised: [BluetoothUUID] = []
        var deviceName: String? = nil
        if let a = opts.address {
            target = a
        } else {
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
        // 2. Connect.
        begin("connect")
        let cms = remaining(max: opts.connectTimeoutMs ?? Self.defaultConnectMs)
        guard cms > 0 else { throw RunError("the --timeout passed before connecting", .connectionFailed) }
        let conn = try central.connect(to: target, timeoutMs: cms)
        connection = conn
        let link = L2CAPLink(host: host, handle: conn.handle)
        link.onConnectionParameterRequest = { [unowned self] p, ok in
            if self.opts.trace != .off {
                Console.err("attled: peer asked for connection interval \(formatMs(us: UInt64(p.intervalMin) * 1250, decimals: 2))-\(formatMs(us: UInt64(p.intervalMax) * 1250, decimals: 2)) ms: \(ok ? "accepted" : "rejected")")
            }
        }
        let b = ATTBearer(link: link)
        b.transactionTimeoutMs = opts.attTimeoutMs ?? Self.defaultATTMs
        bearer = b
        let gatt = GATTClient(bearer: b)
        progress("\(pad("connect", 8)) \(pad(end(), 10)) handle 0x\(Hex.int(conn.handle, width: 4)), interval \(formatMs(us: conn.intervalMicroseconds, decimals: 2)) ms")
        if deviceName == nil { deviceName = target.description }

        if opts.command == .gatt { try gattDump(gatt); return }

        // 3. Discover the LED service.
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
        result.append(("profile", .string(prof.name)))

        // 4. Act.
        switch opts.command {
        case .set: try setColour(gatt, led)
        case .get: try getColour(gatt, led)
        case .send: try send(gatt, led)
        case .listen: try listen(gatt, led)
        default: break
        }
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
        b.onIndication = handler
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
    default: return Session(opts).run()
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
