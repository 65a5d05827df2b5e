import BLEWire
import BLETransport
import BLEHCI

extension Options {
    /// Parses argv (without the program name) by the declarations in
    /// `OptionSpec.all`. Options may stand before or after the subcommand;
    /// `--flag=value` and `--flag value` mean the same; `environment`
    /// supplies ATTLED_TRANSPORT.
    public static func parse(_ args: [String], environment: [String: String] = [:]) throws -> Options {
        var o = Options()
        var sawCommand = false
        var i = 0
        while i < args.count {
            let a = args[i]
            var flag = a
            var inline: String? = nil
            if a.hasPrefix("--"), let eq = a.firstIndex(of: "=") {
                flag = String(a[..<eq]); inline = String(a[a.index(after: eq)...])
            }
            if let spec = OptionSpec.byName[flag] {
                let command = o.command
                switch spec.argument {
                case .none(let apply): try apply(&o)
                case .inline(_, let apply): try apply(&o, inline)
                case .value(_, let apply):
                    if inline == nil {
                        i += 1
                        guard i < args.count else { throw UsageError("\(flag) needs a value") }
                    }
                    try apply(&o, flag, inline ?? args[i])
                }
                o.given.insert(spec.names[0])
                if spec.endsParsing {
                    if o.command == .help && sawCommand { o.helpTopic = command }
                    return o
                }
            } else if a.hasPrefix("-") && a != "-" {
                throw UsageError("unknown option '\(a)'")
            } else if !sawCommand, let c = Command(rawValue: a), c != .help, c != .version {
                o.command = c; sawCommand = true
            } else if !sawCommand, a == "help" {
                o.command = .help
                if i + 1 < args.count, let c = Command(rawValue: args[i + 1]), c != .help, c != .version { o.helpTopic = c }
                return o
            } else if o.command == .decode {
                o.files.append(a)
            } else {
                throw UsageError("unexpected argument '\(a)'")
            }
            i += 1
        }
        if o.transport == nil, let env = environment["ATTLED_TRANSPORT"], !env.isEmpty {
            do { o.transport = try TransportSpec.parse(env) } catch let e as TransportError { throw UsageError("ATTLED_TRANSPORT: \(e.description)") }
        }
        try o.validate()
        return o
    }
}

/// The value parsers the declarations share; each throws the usage error
/// that names the flag as given.
enum OptionValue {
    static func uuid(_ flag: String, _ v: String) throws -> BluetoothUUID {
        guard let u = BluetoothUUID(v) else {
            throw UsageError("\(flag): '\(v)' is not a UUID (use 2a00, 0x2A00 or 12345678-1234-1234-1234-123456789abc)")
        }
        return u
    }

    /// A positive number of seconds (scale 1000) or milliseconds (scale 1), as milliseconds.
    static func ms(_ flag: String, _ v: String, scale: Double) throws -> Int {
        guard let d = Double(v), d > 0, d.isFinite, d * scale < 86_400_000 else {
            throw UsageError("\(flag): '\(v)' is not a positive number")
        }
        return max(1, Int(d * scale))
    }

    /// `MIN-MAX` milliseconds (7.5 to 4000, in steps of 1.25) as the
    /// parameters a peripheral asks for: that interval, no latency, and a
    /// supervision timeout of 6 x MAX, at least 4 s (Core Vol 4 Part E 7.8.12's ranges).
    static func interval(_ flag: String, _ v: String) throws -> ConnectionParameters {
        let parts = v.split(separator: "-", omittingEmptySubsequences: false).map { Double($0) }
        let usage = UsageError("\(flag): '\(v)' is not an interval range in ms like 30-50 (7.5 to 4000)")
        guard parts.count == 2, let lo = parts[0], let hi = parts[1], lo.isFinite, hi.isFinite else { throw usage }
        let min = UInt16(clamping: Int((lo / 1.25).rounded())), max = UInt16(clamping: Int((hi / 1.25).rounded()))
        guard lo >= 7.5, hi <= 4000, min <= max else { throw usage }
        let timeoutMs = Swift.min(32_000, Swift.max(4000, Int(hi * 6)))
        let p = ConnectionParameters(intervalMin: min, intervalMax: max, latency: 0, supervisionTimeout: UInt16(timeoutMs / 10))
        guard p.isValid else { throw usage }
        return p
    }

    /// A positive integer; the message names `name` (the option's first spelling).
    static func positive(_ name: String, _ v: String) throws -> Int {
        guard let n = Int(v), n > 0 else { throw UsageError("\(name): '\(v)' is not a positive number") }
        return n
    }

    /// `ADDR[,public|,random]` (random when no type is given).
    static func address(_ v: String) throws -> DeviceAddress {
        let parts = v.split(separator: ",").map(String.init)
        guard let first = parts.first, let addr = BDAddress(first) else {
            throw UsageError("--address: '\(v)' is not an address like C0:11:22:33:44:55[,random|,public]")
        }
        var t = AddressType.random
        if parts.count == 2 {
            switch parts[1] { case "public": t = .public; case "random": t = .random
            default: throw UsageError("--address: type must be public or random, not '\(parts[1])'") }
        } else if parts.count > 2 { throw UsageError("--address: too many parts in '\(v)'") }
        return DeviceAddress(addr, t)
    }

    /// `HOST[:PORT]` (port 1883 when none is given; `[::1]:1884` for IPv6).
    /// HOST:PORT, [V6]:PORT, HOST (the default port) or :PORT (every interface).
    static func hostPort(_ flag: String, _ v: String, defaultPort: Int) throws -> (host: String, port: Int) {
        var host = v, port = defaultPort
        if let c = v.lastIndex(of: ":"), !v.hasPrefix("[") || v.includes("]:"), v.filter({ $0 == ":" }).count == 1 || v.includes("]:") {
            guard let p = Int(v[v.index(after: c)...]), (0...65535).contains(p) else { throw UsageError("\(flag): '\(v)' is not HOST:PORT") }
            host = String(v[..<c]); port = p
        }
        host = String(host.filter { $0 != "[" && $0 != "]" })
        return (host.isEmpty ? "0.0.0.0" : host, port)
    }

    static func broker(_ v: String) throws -> (host: String, port: Int) {
        var host = v, port = 1883
        if let c = v.lastIndex(of: ":"), !v.hasPrefix("[") || v.includes("]:") {
            guard let p = Int(v[v.index(after: c)...]), (1...65535).contains(p) else { throw UsageError("--mqtt: '\(v)' is not HOST[:PORT]") }
            host = String(v[..<c]); port = p
        }
        host = String(host.filter { $0 != "[" && $0 != "]" })
        guard !host.isEmpty else { throw UsageError("--mqtt: '\(v)' has no host") }
        return (host, port)
    }
}
