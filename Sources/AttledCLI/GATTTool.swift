import Attled
import AttledLED
import AttledJSON

/// attled as a general GATT tool, on any server and with no LED profile:
/// `gatt` (the whole database, `--values`), `read`, `write`, and `listen`
/// with `--char` as a handle or UUID. One target, one link.
final class GATTTool {
    let s: Session
    let opts: Options
    private var securer: Securer!
    private var link: Link!
    var report: Report { s.report }

    init(_ s: Session) {
        self.s = s
        self.opts = s.opts
    }

    /// Connects the target and runs the command.
    /// - Throws: `RunError`, `ATTError`, `GATTError`, `GAPError`, `HCIError`.
    func run() throws {
        let link = try TargetRunner(s).connectOne()
        link.bearer.transactionTimeoutMs = opts.attTimeoutMs ?? Session.defaultATTMs
        securer = Securer(policy: opts.securityPolicy, store: s.bonds, report: report)
        securer.attach(link)
        self.link = link
        try wait(securer.upFront(link))
        switch opts.command {
        case .gatt: try dump(link.gatt)
        case .read: try read(link.gatt)
        case .write: try write(link)
        case .listen: try listen(link)
        default: break
        }
    }

    /// Runs the loop until `f` completes or the run's deadline passes.
    func wait<T>(_ f: Future<T>) throws -> T {
        do { return try s.host!.wait(f, until: s.deadline) } catch is WaitTimeout {
            throw RunError("the --timeout passed during \(report.phase.word)", .linkLost)
        }
    }

    /// Exchanges the MTU unless either side already did: long values and
    /// whole databases then take fewer round trips.
    func exchangeMTU(_ gatt: GATTClient) throws {
        if !gatt.bearer.mtuExchanged { _ = try wait(gatt.bearer.startExchangeMTU()) }
    }

    // MARK: finding what --char names

    /// What `--char` resolved to.
    struct Target {
        var handle: UInt16
        /// The attribute's type, when known.
        var uuid: BluetoothUUID?
        /// The characteristic, when `handle` is one's value and its declaration was read.
        var characteristic: Characteristic?
    }

    /// Resolves `--char`. A UUID: the characteristic declarations (Read By
    /// Type 0x2803) over the `--service` instances, else over the whole
    /// database, in as few responses as fit. A handle: Find Information on
    /// that one handle (its type), or the declarations when `declaration` is
    /// needed (listen: properties and the CCCD).
    func locate(_ gatt: GATTClient, declaration: Bool) throws -> Target {
        try locate(gatt, opts.characteristic, declaration: declaration)
    }

    /// Resolves one `--char` (see `locate(_:declaration:)`).
    func locate(_ gatt: GATTClient, _ ref: CharacteristicRef?, declaration: Bool) throws -> Target {
        report.begin(.discover)
        let before = gatt.bearer.transactions.count
        defer { if report.phase == .discover { report.done("\(gatt.bearer.transactions.count - before) ATT transaction(s)") } }
        switch ref {
        case .handle(let h)?:
            if declaration {
                let chars = try wait(gatt.startDiscoverCharacteristics(of: Service(uuid: GATTUUID.primaryService, start: 1, end: 0xFFFF)))
                guard let c = chars.first(where: { $0.valueHandle == h }) else { throw GATTError.noSuchHandle(h) }
                return Target(handle: h, uuid: c.uuid, characteristic: c)
            }
            // A characteristic's value follows its declaration (3.3.1), so
            // one Read By Type 0x2803 on h-1 gives the properties and UUID.
            if h > 1, let c = try wait(probeDeclaration(gatt, before: h)) {
                return Target(handle: h, uuid: c.uuid, characteristic: c)
            }
            let info = try wait(gatt.request(ATT.FindInformationRequest(start: h, end: h), ATT.FindInformationResponse.self).map { rsp -> BluetoothUUID? in
                return rsp.information.first(where: { $0.handle == h })?.uuid
            }.recover { e -> Future<BluetoothUUID?> in
                if case ATTError.errorResponse(_, _, let code) = e, code == .attributeNotFound || code == .invalidHandle {
                    throw RunError("the device has no attribute at handle 0x\(Hex.int(h, width: 4)) ('attled gatt' lists the handles)", .notFound)
                }
                throw e
            })
            return Target(handle: h, uuid: info, characteristic: nil)
        case .uuid(let u)?:
            var ranges = [Service(uuid: GATTUUID.primaryService, start: 1, end: 0xFFFF)]
            var found: [Characteristic] = []
            if let su = opts.service {
                ranges = try wait(gatt.startDiscoverPrimaryServices(uuid: su))
                if ranges.isEmpty {
                    // Not a primary service: a secondary one is reached only
                    // through include declarations (Core Vol 3 Part G 4.5.1).
                    let db = try wait(gatt.startDiscoverDatabase(descriptors: false))
                    guard db.services.contains(where: { $0.service.uuid == su }) else { throw GATTError.serviceNotFound(su) }
                    found = db.characteristics(u, inService: su).map(\.entry.characteristic)
                }
            }
            for r in ranges { found += try wait(gatt.startDiscoverCharacteristics(of: r, uuid: u)) }
            if found.isEmpty {
                let within = opts.service.map { " in service \($0)" } ?? ""
                // 0x2900-0x29FF are descriptor types (Assigned Numbers 3.7): several per database.
                if let v = u.uint16, v >> 8 == 0x29 {
                    throw RunError("the device has no characteristic \(u)\(within): \(u) is a descriptor type; give the descriptor's handle ('attled gatt' lists them)", .notFound)
                }
                throw RunError("the device has no characteristic \(u)\(within) ('attled gatt' lists what it has)", .notFound)
            }
            if found.count > 1 {
                // The error path only: name each candidate's service.
                let db = try wait(gatt.startDiscoverDatabase(descriptors: false))
                let cands = found.map { c in
                    GATTError.Candidate(handle: c.valueHandle, service: db.characteristic(valueHandle: c.valueHandle)?.service.uuid ?? GATTUUID.primaryService)
                }
                throw GATTError.ambiguous(u, candidates: cands)
            }
            return Target(handle: found[0].valueHandle, uuid: u, characteristic: found[0])
        default:
            throw RunError("--char must be a handle (0xHHHH) or a UUID here", .usage)
        }
    }

    /// The characteristic whose declaration sits at `h - 1` and whose value
    /// is `h`, or nil when that attribute is not such a declaration (`h` is
    /// then a descriptor, a declaration or nothing).
    func probeDeclaration(_ gatt: GATTClient, before h: UInt16) -> Future<Characteristic?> {
        gatt.request(ATT.ReadByTypeRequest(start: h - 1, end: h - 1, type: GATTUUID.characteristic), ATT.ReadByTypeResponse.self).map { rsp -> Characteristic? in
            guard let it = rsp.values.first, it.handle == h - 1,
                  let c = try? Characteristic.decodeDeclaration(handle: it.handle, value: it.value),
                  c.valueHandle == h else { return nil }
            return c
        }.recover { e -> Future<Characteristic?> in
            if case ATTError.errorResponse(_, _, let code) = e, code == .attributeNotFound { return Future(value: nil) }
            throw e
        }
    }

    func label(_ t: Target) -> String {
        let name = t.uuid.map { u in " (\(u)\(GATTUUID.name(u).map { " \($0)" } ?? ""))" } ?? ""
        return "handle 0x\(Hex.int(t.handle, width: 4))\(name)"
    }

    func targetFields(_ t: Target) {
        report.fields.append(("handle", .int(Int64(t.handle))))
        report.fields.append(("uuid", t.uuid.map { .string($0.description) } ?? .null))
    }

    // MARK: read

    /// Reads the value in full (Read, then Read Blob while parts come full);
    /// several `--char`, all at once.
    func read(_ gatt: GATTClient) throws {
        try exchangeMTU(gatt)
        if opts.characteristics.count > 1 { return try readSeveral(gatt) }
        let t = try locate(gatt, declaration: false)
        targetFields(t)
        report.begin(.read)
        let v = try wait(securer.retrying(link) { gatt.startReadLong(t.handle) })
        report.done("\(v.count) byte(s) from \(label(t))")
        report.fields.append(("value", .string(Hex.string(v, separator: ""))))
        if !opts.json { Console.out(Hex.string(v, separator: "")) }
    }

    /// Reads several values in one round trip where the server allows
    /// (GATTClient.startReadMultiple): handles are read as given, UUIDs found
    /// first. Prints one value per line, in the order of the `--char`s.
    func readSeveral(_ gatt: GATTClient) throws {
        var targets: [Target] = []
        for ref in opts.characteristics {
            if case .handle(let h) = ref { targets.append(Target(handle: h, uuid: nil, characteristic: nil)) }
            else { targets.append(try locate(gatt, ref, declaration: false)) }
        }
        report.begin(.read)
        let before = gatt.bearer.transactions.count
        let (values, method) = try wait(securer.retrying(link) { gatt.startReadMultiple(targets.map(\.handle)) })
        let n = gatt.bearer.transactions.count - before
        report.done("\(values.count) values (\(values.map { "\($0.count)" }.joined(separator: "+")) bytes) by \(method.rawValue), \(n) ATT transaction(s)")
        report.fields.append(("method", .string(method.rawValue)))
        report.fields.append(("values", .array(zip(targets, values).map { t, v in
            .object([("handle", .int(Int64(t.handle))), ("uuid", t.uuid.map { .string($0.description) } ?? .null),
                     ("value", .string(Hex.string(v, separator: "")))])
        })))
        if !opts.json { for v in values { Console.out(Hex.string(v, separator: "")) } }
    }

    // MARK: write

    /// How a value is written.
    enum Method: String {
        case request = "write-request", command = "write-command", prepared = "prepare-write"
    }

    /// Writes `--value`: Write Command when asked or when the characteristic
    /// only allows that, else Write Request, or Prepare/Execute Write when the
    /// value is longer than ATT_MTU - 3.
    func write(_ link: Link) throws {
        guard let value = opts.value else { return }
        let gatt = link.gatt
        if value.count > 20 { try exchangeMTU(gatt) }
        let t = try locate(gatt, declaration: false)
        targetFields(t)
        let mtu = gatt.bearer.mtu
        var method = Method.request
        if opts.gattTool.withoutResponse { method = .command }
        else if let p = t.characteristic?.properties, !p.contains(.write), p.contains(.writeWithoutResponse) { method = .command }
        if method == .request && value.count > mtu - 3 { method = .prepared }
        if method == .command && value.count > mtu - 3 {
            throw RunError("\(value.count) bytes do not fit one Write Command at ATT_MTU \(mtu) (at most \(mtu - 3)): without --without-response the value is written with Prepare/Execute Write", .usage)
        }
        report.begin(.write)
        do {
            if method == .command {
                // A Write Command gets no error: a protected value drops it silently (write --pair).
                _ = try wait(gatt.startWriteDone(t.handle, value: value, withResponse: false))
            } else {
                _ = try wait(securer.retrying(link) { gatt.startWrite(t.handle, value: value, withResponse: true) })
            }
        } catch ATTError.errorResponse(let req, let h, let code) where code == .writeNotPermitted && method != .command {
            let e = ATTError.errorResponse(request: req, handle: h, code: code)
            if let p = t.characteristic?.properties {
                throw RunError("\(e); its declaration allows [\(p.names.joined(separator: ","))]", .attError)
            }
            throw RunError("\(e); if it takes Write Command, add --without-response", .attError)
        }
        let how: String
        switch method {
        case .request: how = "Write Request"
        case .command: how = "Write Command"
        case .prepared: how = "Prepare Write x\((value.count + mtu - 6) / (mtu - 5)) + Execute Write"
        }
        report.done("\(value.count) byte(s) to \(label(t)) with \(how)")
        report.fields.append(("value", .string(Hex.string(value, separator: ""))))
        report.fields.append(("method", .string(method.rawValue)))
    }

    // MARK: listen

    /// Subscribes (notifications, else indications) and prints each value
    /// until Ctrl-C, `--count` or `--timeout`.
    func listen(_ link: Link) throws {
        let gatt = link.gatt
        let t = try locate(gatt, declaration: true)
        guard let c = t.characteristic else { throw GATTError.noSuchHandle(t.handle) }
        guard c.properties.contains(.notify) || c.properties.contains(.indicate) else {
            throw GATTError.notPermitted(c.uuid, operation: "notifications or indications", properties: c.properties)
        }
        report.begin(.subscribe)
        let limit = opts.count ?? Int.max
        var count = 0
        let done = Future<Void>()
        let handler: (HandleValue) -> Void = { [opts, report] hv in
            guard hv.handle == c.valueHandle, !done.isComplete else { return }
            count += 1
            if opts.json {
                Console.out(JSONValue.object([("event", .string("notification")), ("handle", .int(Int64(hv.handle))),
                                         ("uuid", .string(c.uuid.description)), ("value", .string(Hex.string(hv.value, separator: "")))]).serialized)
            } else {
                Console.out("notification 0x\(Hex.int(hv.handle, width: 4)) \(c.uuid): \(Hex.string(hv.value))")
            }
            if count >= limit { report.done("\(count) notification(s)"); done.succeed(()) }
        }
        link.bearer.onNotification = handler
        link.bearer.onIndication = handler
        link.onDisconnect = { reason in done.fail(ATTError.disconnected(reason: reason)) }
        _ = try wait(securer.retrying(link) { gatt.startSubscribe(c, indications: !c.properties.contains(.notify)) })
        report.done("\(label(t)); Ctrl-C stops")
        report.begin(.listen)
        s.sigintIsSuccess = true
        let until = opts.timeoutMs == nil ? Instant.distantFuture : s.deadline
        _ = try s.host!.pump(until: until) { done.isComplete }
        if let r = done.result { try r.get() } else { report.done("\(count) notification(s)") }
        s.quietSuccess = opts.json
    }

    // MARK: gatt

    /// Lists the whole database; with `--values`, every readable value and
    /// descriptor, read in full.
    func dump(_ gatt: GATTClient) throws {
        let b = gatt.bearer
        report.begin(.discover)
        try exchangeMTU(gatt)
        let db = try wait(gatt.startDiscoverDatabase())
        var values: [UInt16: Result<[UInt8], any Error>] = [:]
        if opts.gattTool.values {
            report.done("\(db.services.count) service(s), \(b.transactions.count) ATT transaction(s)")
            report.begin(.read)
            for (_, e) in db.allCharacteristics {
                if e.characteristic.properties.contains(.read) { values[e.characteristic.valueHandle] = readResult(gatt, e.characteristic.valueHandle) }
                for d in e.descriptors { values[d.handle] = readResult(gatt, d.handle) }
                if let f = s.host?.failure { throw f }
                if gatt.bearer.state != .open { break }
            }
        }
        var lines: [String] = []
        var jsonServices: [JSONValue] = []
        func valueText(_ h: UInt16) -> (String, [(String, JSONValue)]) {
            switch values[h] {
            case .success(let v)?: return ("  = \(Hex.string(v, separator: ""))\(printable(v))", [("value", .string(Hex.string(v, separator: "")))])
            case .failure(let e)?:
                let why: String
                if case let ATTError.errorResponse(_, _, code) = e { why = code.name } else { why = "\(e)" }
                return ("  (\(why))", [("error", .string(why))])
            case nil: return ("", [])
            }
        }
        for se in db.services {
            let sv = se.service
            let sname = GATTUUID.name(sv.uuid) ?? LEDProfile.detect([sv.uuid]).map { "LED service (\($0.name))" } ?? ""
            lines.append("\(sv.isPrimary ? "service" : "secondary service") \(sv.uuid)\(sname.isEmpty ? "" : " \(sname)")  handles 0x\(Hex.int(sv.start, width: 4))-0x\(Hex.int(sv.end, width: 4))")
            for inc in se.includes {
                lines.append("  include \(inc.uuid)  handles 0x\(Hex.int(inc.start, width: 4))-0x\(Hex.int(inc.end, width: 4))  (declaration 0x\(Hex.int(inc.handle, width: 4)))")
            }
            var jc: [JSONValue] = []
            for e in se.characteristics {
                let c = e.characteristic
                let cname = GATTUUID.name(c.uuid).map { " \($0)" } ?? ""
                let (vt, vj) = valueText(c.valueHandle)
                lines.append("  characteristic \(c.uuid)\(cname)  handle 0x\(Hex.int(c.valueHandle, width: 4))  [\(c.properties)]\(vt)")
                var jd: [JSONValue] = []
                for d in e.descriptors {
                    let (dt, dj) = valueText(d.handle)
                    lines.append("    descriptor \(d.uuid)\(GATTUUID.name(d.uuid).map { " \($0)" } ?? "")  handle 0x\(Hex.int(d.handle, width: 4))\(dt)")
                    jd.append(.object([("uuid", .string(d.uuid.description)), ("handle", .int(Int64(d.handle)))] + dj))
                }
                jc.append(.object([("uuid", .string(c.uuid.description)), ("declaration_handle", .int(Int64(c.declarationHandle))),
                                   ("value_handle", .int(Int64(c.valueHandle))), ("properties", .array(c.properties.names.map { .string($0) }))]
                                  + vj + [("descriptors", .array(jd))]))
            }
            let inc: [JSONValue] = se.includes.map {
                .object([("handle", .int(Int64($0.handle))), ("uuid", .string($0.uuid.description)), ("start", .int(Int64($0.start))), ("end", .int(Int64($0.end)))])
            }
            jsonServices.append(.object([("uuid", .string(sv.uuid.description)), ("start", .int(Int64(sv.start))), ("end", .int(Int64(sv.end))),
                                         ("primary", .bool(sv.isPrimary)), ("includes", .array(inc)), ("characteristics", .array(jc))]))
        }
        let secondary = db.services.filter { !$0.service.isPrimary }.count
        report.done("\(db.services.count - secondary) primary and \(secondary) secondary service(s), MTU \(b.mtu), \(b.transactions.count) ATT transaction(s)")
        if opts.json { report.fields.append(("services", .array(jsonServices))) } else { Console.out(lines.joined(separator: "\n")) }
    }

    /// Reads one value in full; an ATT error is a result, not a failure of the dump.
    func readResult(_ gatt: GATTClient, _ h: UInt16) -> Result<[UInt8], any Error> {
        do { return .success(try wait(securer.retrying(link) { gatt.startReadLong(h) })) } catch { return .failure(error) }
    }

    func printable(_ v: [UInt8]) -> String {
        guard !v.isEmpty, v.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) else { return "" }
        return " \"" + String(decoding: v, as: UTF8.self) + "\""
    }
}
