import Attled
import AttledJSON
import AttledServe
import BLEGATT
import BLEGATTServer
import LEDProfile

/// `attled serve`: the options made into a `ServeConfig`, the runner's
/// events printed (a line each, or one JSON object per line with --json).
enum ServeRun {
    /// The database and name the options describe.
    /// - Throws: `RunError` (.usage) for a file that cannot be read or served.
    static func config(_ o: Options) throws -> ServeConfig {
        let db: GATTServerDatabase
        var name = o.serve.advertiseName ?? o.names.first
        if let p = o.led.profile {
            name = name ?? "attled-\(p.name)"
            do { db = try Boards.database(p, name: o.names.first ?? name!, secure: o.serve.secure) } catch {
                throw RunError("--profile \(p.name): \(error)", .failure)
            }
        } else {
            let path = o.serve.gattFile ?? ""
            guard let bytes = path == "-" ? SystemIO.readAll(0, limit: 1 << 22) : SystemIO.readFile(path, limit: 1 << 22) else {
                throw RunError("--gatt \(path): cannot read it: give the file that 'attled gatt --json --values > FILE' wrote", .usage)
            }
            do {
                db = try GATTJSON.database(try JSONValue.parse(bytes))
            } catch {
                throw RunError("--gatt \(path): \(error)", .usage)
            }
            // The database's own Device Name, unless one is given.
            if name == nil, let n = db.attributes.first(where: { $0.type == GATTUUID.deviceName }) {
                name = String(decoding: n.value, as: UTF8.self)
            }
        }
        var c = ServeConfig(database: db, name: name ?? "attled", advertiseUUIDs: o.serve.advertiseUUIDs)
        if o.extendedScan { c.mode = .extended }
        c.secureConnectionsOnly = o.serve.secureConnectionsOnly
        c.connectionParameters = o.serve.connectionParameters
        if o.serve.secure, o.led.profile == nil { c.database = db.requiringEncryption() }
        return c
    }

    /// Runs until SIGINT/SIGTERM; a clean stop is the run's success.
    static func run(_ c: ServeConfig, _ s: Session) throws {
        guard let stack = s.stack else { throw RunError("no controller", .failure) }
        var c = c
        c.bonds = s.bonds
        let runner = try ServeRunner(stack: stack, config: c)
        let json = s.opts.json
        let profile = runner.led?.led.profile.name
        runner.subscribe { e in
            if json { Console.out(JSONValue.object(Self.jsonFields(e, profile: profile)).serialized) } else if let line = Self.line(e) {
                s.report.output(line)
            }
        }
        s.report.begin(.advertise)
        do { try stack.host.wait(runner.start(), until: Instant.now().adding(ms: 5000)) } catch {
            throw RunError("could not start advertising: \(error)", .failure)
        }
        s.report.done("\(c.name) at \(stack.info.ownAddress)\(c.advertisedUUIDs.isEmpty ? "" : " with " + c.advertisedUUIDs.map(\.description).joined(separator: ", ")), \(c.database.attributes.count) attributes\(runner.led.map { ", the \($0.led.profile.name) LED" } ?? "")")
        s.report.begin(.serve)
        do {
            try runner.run()
        } catch HCIError.interrupted(let sig) {
            runner.end()
            s.sigintIsSuccess = true
            s.quietSuccess = true
            throw HCIError.interrupted(signal: sig)
        }
    }

    static func line(_ e: ServeRunner.Event) -> String? {
        switch e {
        case .advertising: return nil
        case let .advertisingRefused(err): return "serve: the controller refused to advertise again (\(err)); trying at the next disconnection"
        case let .connected(p): return "serve connected \(p)"
        case let .disconnected(p, r): return "serve disconnected \(p) (\(r.map { "\($0)" } ?? "link lost"))"
        case .write: return nil
        case let .subscribed(p, h, n, i): return "serve \(p) subscribed to 0x\(Hex.int(h, width: 4)): \(n ? "notify" : i ? "indicate" : "off")"
        case let .state(.colour(rgb), p): return "serve LED \(rgb.r),\(rgb.g),\(rgb.b) (#\(Hex.string([rgb.r, rgb.g, rgb.b], separator: ""))) by \(p)"
        case let .state(.buttons(b), p):
            return "serve buttons " + b.enumerated().map { "\($0.offset + 1) \($0.element ? "pressed" : "released")" }.joined(separator: ", ") + " by \(p)"
        case let .encrypted(p, bond): return "serve \(p) encrypted\(bond ? " with its bond" : "")"
        case let .paired(p, sc, bonded): return "serve paired \(p) (\(sc ? "LE Secure Connections" : "legacy"), Just Works\(bonded ? ", bonded" : ""))"
        case let .securityFailed(p, why): return "serve \(p): \(why)"
        case let .restored(p, n, changed, told):
            let why = !changed ? "" : told ? "; the database changed: Service Changed indicated" : "; the database changed (it is not subscribed to Service Changed)"
            return "serve \(p): \(n) subscription(s) restored from its bond\(why)"
        case let .parametersAnswered(p, cp, ok, err):
            return "serve asked \(p) for a connection interval of \(range(cp)) ms: \(err ?? (ok ? "accepted" : "rejected"))"
        case let .connectionUpdated(p, c):
            return "serve \(p) connection interval now \(ms(c.interval)) ms, latency \(c.latency), supervision timeout \(Int(c.supervisionTimeout) * 10) ms"
        }
    }

    /// The interval range asked for, in ms.
    static func range(_ p: ConnectionParameters) -> String { "\(ms(p.intervalMin))-\(ms(p.intervalMax))" }

    /// An interval in 1.25 ms units as ms, without trailing zeros (7.5, 30, 31.25).
    static func ms(_ units: UInt16) -> String {
        var s = formatMs(us: UInt64(units) * 1250, decimals: 2)
        while s.hasSuffix("0") { s.removeLast() }
        if s.hasSuffix(".") { s.removeLast() }
        return s
    }

    static func jsonFields(_ e: ServeRunner.Event, profile: String?) -> [(String, JSONValue)] {
        func peer(_ p: DeviceAddress) -> [(String, JSONValue)] { [("peer", .string(p.address.description)), ("peer_type", .string(p.type.description))] }
        switch e {
        case let .advertising(n, u, a):
            return [("event", "advertising"), ("name", .string(n)), ("uuids", .array(u.map { .string($0.description) })),
                    ("address", .string(a.address.description)), ("address_type", .string(a.type.description))]
        case let .advertisingRefused(err): return [("event", "advertising_refused"), ("error", .string("\(err)"))]
        case let .connected(p): return [("event", "connected")] + peer(p)
        case let .disconnected(p, r): return [("event", "disconnected")] + peer(p) + [("reason", r.map { .int(Int64($0.rawValue)) } ?? .null)]
        case let .write(p, w):
            return [("event", "write"), ("handle", .int(Int64(w.handle))), ("uuid", .string(w.uuid.description)),
                    ("value", .string(Hex.string(w.value, separator: ""))), ("op", .string(w.op.rawValue))] + peer(p)
        case let .subscribed(p, h, n, i): return [("event", "subscribed"), ("handle", .int(Int64(h))), ("notify", .bool(n)), ("indicate", .bool(i))] + peer(p)
        case let .state(.colour(rgb), p):
            return [("event", "state"), ("profile", profile.map { .string($0) } ?? .null),
                    ("rgb", .array([.int(Int64(rgb.r)), .int(Int64(rgb.g)), .int(Int64(rgb.b))]))] + peer(p)
        case let .state(.buttons(b), p):
            return [("event", "state"), ("profile", profile.map { .string($0) } ?? .null), ("buttons", .array(b.map { .bool($0) }))] + peer(p)
        case let .encrypted(p, bond): return [("event", "encrypted"), ("bond", .bool(bond))] + peer(p)
        case let .paired(p, sc, bonded): return [("event", "paired"), ("secure_connections", .bool(sc)), ("bonded", .bool(bonded))] + peer(p)
        case let .securityFailed(p, why): return [("event", "security_failed"), ("error", .string(why))] + peer(p)
        case let .restored(p, n, changed, told):
            return [("event", "restored"), ("subscriptions", .int(Int64(n))), ("database_changed", .bool(changed)),
                    ("service_changed_sent", .bool(told))] + peer(p)
        case let .parametersAnswered(p, cp, ok, err):
            return [("event", "parameters"), ("interval_min_ms", .double(Double(cp.intervalMin) * 1.25)),
                    ("interval_max_ms", .double(Double(cp.intervalMax) * 1.25)), ("accepted", .bool(ok)),
                    ("error", err.map { .string($0) } ?? .null)] + peer(p)
        case let .connectionUpdated(p, c):
            return [("event", "connection_updated"), ("interval_ms", .double(Double(c.interval) * 1.25)), ("latency", .int(Int64(c.latency))),
                    ("supervision_timeout_ms", .int(Int64(c.supervisionTimeout) * 10))] + peer(p)
        }
    }
}
