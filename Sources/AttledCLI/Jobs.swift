import Attled
import AttledLED
import BLETrace
import AttledJSON

extension Session {
    // MARK: scan command

    func deviceLine(_ d: DiscoveredDevice, update: Bool) -> String {
        if opts.json {
            let ad = d.merged
            var o: [(String, JSONValue)] = [("event", .string(update ? "update" : "device")),
                                       ("address", .string(d.address.address.description)),
                                       ("address_type", .string(d.address.type.description)),
                                       ("rssi", .int(Int64(d.rssi))), ("connectable", .bool(d.connectable))]
            o.append(("name", d.name.map { .string($0) } ?? .null))
            o.append(("services", .array(d.serviceUUIDs.map { .string($0.description) })))
            o.append(("manufacturer_data", .array(ad.manufacturerData.map {
                .object([("company", .int(Int64($0.company))), ("data", .string(Hex.string($0.data, separator: "")))])
            })))
            o.append(("service_data", .array(ad.serviceData.map {
                .object([("uuid", .string($0.uuid.description)), ("data", .string(Hex.string($0.data, separator: "")))])
            })))
            if let t = ad.txPower { o.append(("tx_power", .int(Int64(t)))) }
            if let f = ad.flags { o.append(("flags", .int(Int64(f)))) }
            if !ad.problems.isEmpty { o.append(("problems", .array(ad.problems.map { .string($0) }))) }
            return JSONValue.object(o).serialized
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

    /// scan --name/--address/--service: a device is listed when it matches any of them.
    func scanFilters() -> [DeviceFilter] {
        var fs: [DeviceFilter] = opts.names.map { n in .all([.name(n)] + (opts.service.map { [.service($0)] } ?? [])) }
        fs += opts.addresses.map { .address($0.address) }
        if fs.isEmpty, let s = opts.service { fs.append(.service(s)) }
        return fs
    }

    func scanJob() throws {
        guard let central = central, let host = host else { return }
        let scanMs = opts.timeoutMs ?? Self.defaultScanMs
        let until = Instant.now().adding(ms: scanMs)
        report.begin(.scan)
        var shown = Set<DeviceAddress>()
        let filters = scanFilters()
        central.onDeviceUpdate { [unowned self] d, _ in
            guard filters.isEmpty || filters.contains(where: { $0.matches(d) }) else { return }
            let update = shown.contains(d.address)
            shown.insert(d.address)
            Console.out(self.deviceLine(d, update: update))
        }
        try central.startScan(active: !opts.passive)
        progress("scanning on \(host.transport.name) for \(formatMs(us: UInt64(scanMs) * 1000, decimals: 0)) ms (\(opts.passive ? "passive" : "active")); Ctrl-C stops")
        _ = try host.pump(until: until) { false }
        try central.stopScan()
        progress("scan: \(shown.count) device(s) in \(report.end())")
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
    case .help: Console.out(Usage.text(for: opts.helpTopic)); return 0
    case .version: Console.out(Usage.version); return 0
    case .decode: return runDecode(opts)
    case .bonds: return runBonds(opts, environment: environment)
    default: return Session(opts, environment: environment).run()
    }
}

/// The process environment as a dictionary.
public func processEnvironment() -> [String: String] { SystemIO.environment() }
