/// Where the controller is: parsed from `--transport`, `-i` or `ATTLED_TRANSPORT`.
public enum TransportSpec: Equatable, Sendable, CustomStringConvertible {
    /// Linux HCI user channel on adapter hciN.
    case userChannel(index: UInt16)
    case tcp(host: String, port: UInt16)
    case unix(path: String)
    case serial(path: String, baud: Int, rtscts: Bool)

    public static let defaultBaud = 115200

    /// Parses `hci0`, `tcp:HOST:PORT`, `unix:/path`, `serial:/dev/ttyACM0[,BAUD][,rtscts]`.
    /// - Throws: `TransportError.invalidSpec` with the reason the text was refused.
    public static func parse(_ text: String) throws -> TransportSpec {
        func bad(_ why: String) -> TransportError { .invalidSpec(text, reason: why) }
        // The separators are found among Unicode scalars, not Characters: a Prepend
        // scalar (U+0600) or a combining mark fuses with a neighbouring ':' or ','
        // into one Character, which would hide the separator from a Character search
        // and make a printed spec parse differently from the one that printed it.
        let scalars = text.unicodeScalars
        if text.hasPrefix("hci") {
            let n = String(scalars.dropFirst(3))
            guard !n.isEmpty, n.unicodeScalars.count <= 5, let i = UInt16(n) else { throw bad("expected hciN with N a number") }
            return .userChannel(index: i)
        }
        guard let colon = scalars.firstIndex(of: ":") else {
            throw bad("expected hciN or KIND:ARGS")
        }
        let kind = String(scalars[..<colon])
        let rest = scalars[scalars.index(after: colon)...]
        switch kind {
        case "tcp":
            guard let c = rest.lastIndex(of: ":") else { throw bad("expected tcp:HOST:PORT") }
            var host = String(rest[..<c])
            if host.unicodeScalars.first == "[" && host.unicodeScalars.last == "]" { host = String(host.unicodeScalars.dropFirst().dropLast()) }
            guard !host.isEmpty else { throw bad("missing host") }
            // Brackets only enclose an IPv6 address; any left over would not survive printing the spec.
            guard !host.unicodeScalars.contains("["), !host.unicodeScalars.contains("]") else { throw bad("brackets go only around an IPv6 address, as in tcp:[::1]:PORT") }
            guard let port = UInt16(String(rest[rest.index(after: c)...])), port != 0 else { throw bad("port must be 1-65535") }
            return .tcp(host: host, port: port)
        case "unix":
            guard !rest.isEmpty else { throw bad("missing socket path") }
            return .unix(path: String(rest))
        case "serial", "uart":
            let parts = rest.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
            guard let path = parts.first, !path.isEmpty else { throw bad("missing device path") }
            var baud = defaultBaud
            var rtscts = false
            for p in parts.dropFirst() {
                if p == "rtscts" || p == "flow" { rtscts = true }
                else if let b = Int(p), b > 0 {
                    guard StreamTransport.baudConstant(b) != nil else { throw bad("unsupported baud rate \(b)") }
                    baud = b
                } else { throw bad("unknown serial option '\(p)' (expected a baud rate or rtscts)") }
            }
            return .serial(path: path, baud: baud, rtscts: rtscts)
        default:
            throw bad("unknown transport kind '\(kind)'")
        }
    }

    public var description: String {
        switch self {
        case .userChannel(let i): return "hci\(i)"
        case let .tcp(h, p): return h.unicodeScalars.contains(":") ? "tcp:[\(h)]:\(p)" : "tcp:\(h):\(p)"
        case .unix(let p): return "unix:\(p)"
        case let .serial(p, b, f): return "serial:\(p),\(b)" + (f ? ",rtscts" : "")
        }
    }

    /// Opens the transport this spec names.
    /// - Throws: `TransportError` from the transport's opener.
    public func open() throws -> HCITransport {
        switch self {
        case .userChannel(let i): return try UserChannelTransport.open(index: i)
        case let .tcp(h, p): return try StreamTransport.tcp(host: h, port: p, name: description)
        case .unix(let p): return try StreamTransport.unix(path: p, name: description)
        case let .serial(p, b, f): return try StreamTransport.serial(path: p, baud: b, rtscts: f, name: description)
        }
    }
}
