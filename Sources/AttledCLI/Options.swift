import Attled
import BLEWire
import BLETransport
import LEDProfile
import BLETrace

/// What the user asked for. A command is a struct of named options whose
/// values parse themselves; usage errors exit 64 with the usage line.
public struct Options: Sendable {
    public enum Command: String, Sendable, CaseIterable {
        case set, scan, get, send, listen, gatt, read, write, ui, decode, bonds, gateway, help, version
    }
    public enum TraceMode: Sendable { case off, decoded, hex }
    /// When attled pairs or encrypts (the library's policy).
    public typealias PairMode = SecurityPolicy.Pairing

    public var command: Command = .set
    public var transport: TransportSpec? = nil
    /// `--name`, repeatable: each is a target.
    public var names: [String] = []
    public var service: BluetoothUUID? = nil
    /// `--address`, repeatable: each is a target.
    public var addresses: [DeviceAddress] = []
    public var profile: LEDProfile? = nil
    public var red: BluetoothUUID? = nil
    public var green: BluetoothUUID? = nil
    public var blue: BluetoothUUID? = nil
    public var rgb: RGB? = nil
    public var value: [UInt8]? = nil
    /// `--char`: a handle (0xHHHH), a UUID, or red/green/blue (the first one given).
    public var characteristic: CharacteristicRef? { characteristics.first }
    /// Every `--char`, in order (`read` takes several).
    public var characteristics: [CharacteristicRef] = []
    /// `gatt --values`: read every readable value and descriptor.
    public var values = false
    /// `write --without-response`: Write Command.
    public var withoutResponse = false
    public var count: Int? = nil
    public var passive = false
    public var json = false
    public var quiet = false
    public var trace: TraceMode = .off
    public var btsnoop: String? = nil
    /// Whole-run deadline in milliseconds (nil: the command's default).
    public var timeoutMs: Int? = nil
    public var connectTimeoutMs: Int? = nil
    public var attTimeoutMs: Int? = nil
    public var extendedScan = false
    /// Bypass the GATT/address cache (neither read nor written).
    public var noCache = false
    /// Use cached handles without the Database Hash check (ATT errors still catch a stale cache).
    public var trustCache = false
    public var files: [String] = []
    public var filter: PacketLayer? = nil
    /// `--pair` / `--no-pair`.
    public var pair: PairMode = .auto
    /// `--no-repair`: a device that forgot the bond is an error, not a new pairing.
    public var noRepair = false
    /// The library's security policy from --pair/--no-pair/--no-repair.
    public var securityPolicy: SecurityPolicy { SecurityPolicy(pairing: pair, repairForgottenBond: !noRepair) }
    /// `--trace=keys`: show key material in the trace (masked otherwise).
    public var traceKeys = false
    /// `bonds --remove ADDR`.
    public var removeBond: DeviceAddress? = nil
    /// `--own-address`: our static random address, instead of the controller's
    /// public address or the identity kept under the state directory.
    public var ownAddress: BDAddress? = nil
    /// gateway: `--mqtt HOST[:PORT]`.
    public var mqttHost = ""
    public var mqttPort = 1883
    public var mqttUser: String? = nil
    public var mqttPasswordFile: String? = nil
    public var mqttTLSCA: String? = nil
    public var topicPrefix = "attled"
    public var discoveryPrefix = "homeassistant"
    public var gatewayID = "gateway"
    /// gateway: at most this many links (default: what the controller holds).
    public var maxLinks: Int? = nil
    /// gateway: reconnect kept devices by scanning, not from the Filter Accept List.
    public var noAcceptList = false

    public init() {}
}

/// A usage error: message for stderr, exit 64.
public struct UsageError: Error, Equatable, Sendable {
    public var message: String
    public init(_ m: String) { message = m }
}

/// What `--char` names: an attribute handle, a characteristic UUID, or one
/// of an RGB profile's colours.
public enum CharacteristicRef: Equatable, Sendable, CustomStringConvertible {
    /// `0xH` to `0xHHHH`: 0x and one to four hex digits (as gatttool reads them).
    case handle(UInt16)
    /// A 16-bit (2a37) or 128-bit UUID.
    case uuid(BluetoothUUID)
    /// red, green or blue (0, 1, 2) of an RGB LED profile.
    case colour(Int)

    /// Parses a `--char` value.
    /// - Throws: `UsageError` naming the accepted forms.
    public static func parse(_ v: String) throws -> CharacteristicRef {
        if let i = ["red", "green", "blue"].firstIndex(of: v.lowercased()) { return .colour(i) }
        let digits = v.dropFirst(2)
        if v.lowercased().hasPrefix("0x"), (1...4).contains(digits.count), digits.allSatisfy(\.isHexDigit), let h = UInt16(digits, radix: 16) {
            guard h != 0 else { throw UsageError("--char: handle 0x0000 is not a valid attribute handle") }
            return .handle(h)
        }
        if !v.lowercased().hasPrefix("0x"), let u = BluetoothUUID(v) { return .uuid(u) }
        throw UsageError("--char: '\(v)' is not a handle (0x002a), a UUID (2a37, 12345678-1234-1234-1234-123456789abc) or red/green/blue")
    }

    public var description: String {
        switch self {
        case .handle(let h): return "handle 0x\(Hex.int(h, width: 4))"
        case .uuid(let u): return "characteristic \(u)"
        case .colour(let i): return ["red", "green", "blue"][i]
        }
    }

    /// True for a handle or UUID (a general GATT target, no LED profile needed).
    public var isGeneric: Bool { if case .colour = self { return false }; return true }
}

extension Options {
    /// Parses argv (without the program name). Options may stand before or
    /// after the subcommand; `environment` supplies ATTLED_TRANSPORT.
    public static func parse(_ args: [String], environment: [String: String] = [:]) throws -> Options {
        var o = Options()
        var sawCommand = false
        var i = 0
        func value(_ flag: String, _ inline: String?) throws -> String {
            if let v = inline { return v }
            i += 1
            guard i < args.count else { throw UsageError("\(flag) needs a value") }
            return args[i]
        }
        func uuid(_ flag: String, _ v: String) throws -> BluetoothUUID {
            guard let u = BluetoothUUID(v) else {
                throw UsageError("\(flag): '\(v)' is not a UUID (use 2a00, 0x2A00 or 12345678-1234-1234-1234-123456789abc)")
            }
            return u
        }
        func ms(_ flag: String, _ v: String, scale: Double) throws -> Int {
            guard let d = Double(v), d > 0, d.isFinite, d * scale < 86_400_000 else {
                throw UsageError("\(flag): '\(v)' is not a positive number")
            }
            return max(1, Int(d * scale))
        }
        while i < args.count {
            let a = args[i]
            var flag = a
            var inline: String? = nil
            if a.hasPrefix("--"), let eq = a.firstIndex(of: "=") {
                flag = String(a[..<eq]); inline = String(a[a.index(after: eq)...])
            }
            switch flag {
            case "-h", "--help": o.command = .help; return o
            case "--version": o.command = .version; return o
            case "-i", "--transport", "--device":
                let v = try value(flag, inline)
                do { o.transport = try TransportSpec.parse(v) } catch let e as TransportError { throw UsageError(e.description) }
            case "--name":
                let v = try value(flag, inline)
                guard !v.isEmpty, v.utf8.count <= 248 else { throw UsageError("--name must be 1 to 248 bytes") }
                o.names.append(v)
            case "--service": o.service = try uuid(flag, try value(flag, inline))
            case "--mqtt":
                let v = try value(flag, inline)
                var host = v, port = 1883
                if let c = v.lastIndex(of: ":"), !v.hasPrefix("[") || v.contains("]:") {
                    guard let p = Int(v[v.index(after: c)...]), (1...65535).contains(p) else { throw UsageError("--mqtt: '\(v)' is not HOST[:PORT]") }
                    host = String(v[..<c]); port = p
                }
                host = String(host.filter { $0 != "[" && $0 != "]" })
                guard !host.isEmpty else { throw UsageError("--mqtt: '\(v)' has no host") }
                o.mqttHost = host; o.mqttPort = port
            case "--mqtt-user": o.mqttUser = try value(flag, inline)
            case "--mqtt-password-file": o.mqttPasswordFile = try value(flag, inline)
            case "--mqtt-tls-ca": o.mqttTLSCA = try value(flag, inline)
            case "--topic-prefix": o.topicPrefix = try value(flag, inline)
            case "--discovery-prefix": o.discoveryPrefix = try value(flag, inline)
            case "--gateway-id": o.gatewayID = try value(flag, inline)
            case "--no-accept-list":
                o.noAcceptList = true
            case "--max-links":
                let v = try value(flag, inline)
                guard let n = Int(v), n > 0 else { throw UsageError("--max-links: '\(v)' is not a positive number") }
                o.maxLinks = n
            case "--pair": o.pair = .always
            case "--no-pair": o.pair = .never
            case "--no-repair": o.noRepair = true
            case "--remove":
                let v = try value(flag, inline)
                guard let a = BDAddress(v.split(separator: ",").first.map(String.init) ?? "") else {
                    throw UsageError("--remove: '\(v)' is not an address like C0:11:22:33:44:55[,random|,public]")
                }
                o.removeBond = DeviceAddress(a, v.hasSuffix(",public") ? .public : .random)
            case "--address", "-a":
                let v = try value(flag, inline)
                let parts = v.split(separator: ",").map(String.init)
                guard let first = parts.first, let addr = BDAddress(first) else {
                    throw UsageError("--address: '\(v)' is not an address like C0:11:22:33:44:55[,random|,public]")
                }
                var t = AddressType.random
                if parts.count == 2 {
                    switch parts[1] { case "public": t = .public; case "random": t = .random
                    default: throw UsageError("--address: type must be public or random, not '\(parts[1])'") }
                } else if parts.count > 2 { throw UsageError("--address: too many parts in '\(v)'") }
                o.addresses.append(DeviceAddress(addr, t))
            case "--profile":
                let v = try value(flag, inline)
                guard let p = LEDProfile.named(v) else { throw UsageError("--profile: unknown profile '\(v)' (pycom, particle, harness)") }
                o.profile = p
            case "--red": o.red = try uuid(flag, try value(flag, inline))
            case "--green": o.green = try uuid(flag, try value(flag, inline))
            case "--blue": o.blue = try uuid(flag, try value(flag, inline))
            case "--rgb", "--color", "--colour":
                let v = try value(flag, inline)
                switch RGB.parse(v) {
                case .success(let c): o.rgb = c
                case .failure(let e): throw UsageError("--rgb: \(e.message)")
                }
            case "--value":
                let v = try value(flag, inline)
                guard let b = Hex.parse(v), !b.isEmpty, b.count <= 512 else { throw UsageError("--value: '\(v)' is not 1 to 512 hex bytes (e.g. 01 or 0x0103)") }
                o.value = b
            case "--char", "--characteristic": o.characteristics.append(try CharacteristicRef.parse(try value(flag, inline)))
            case "--values": o.values = true
            case "--without-response": o.withoutResponse = true
            case "--count":
                let v = try value(flag, inline)
                guard let n = Int(v), n > 0 else { throw UsageError("--count: '\(v)' is not a positive number") }
                o.count = n
            case "--passive": o.passive = true
            case "--extended": o.extendedScan = true
            case "--no-cache": o.noCache = true
            case "--own-address":
                let v = try value(flag, inline)
                guard let a = BDAddress(v), a.randomKind == "static" else {
                    throw UsageError("--own-address: '\(v)' is not a static random address (6 bytes, the first hex digit C-F: C0:11:22:33:44:55)")
                }
                o.ownAddress = a
            case "--trust-cache": o.trustCache = true
            case "--json": o.json = true
            case "-q", "--quiet": o.quiet = true
            case "--trace":
                switch inline {
                case nil: o.trace = .decoded
                case "hex"?: o.trace = .hex
                case "keys"?: o.trace = .decoded; o.traceKeys = true
                default: throw UsageError("--trace takes no value, =hex or =keys")
                }
            case "--btsnoop": o.btsnoop = try value(flag, inline)
            case "--timeout", "-t": o.timeoutMs = try ms(flag, try value(flag, inline), scale: 1000)
            case "--connect-timeout": o.connectTimeoutMs = try ms(flag, try value(flag, inline), scale: 1)
            case "--att-timeout": o.attTimeoutMs = try ms(flag, try value(flag, inline), scale: 1)
            case "--filter":
                let v = try value(flag, inline)
                guard let l = PacketLayer(rawValue: v) else { throw UsageError("--filter must be att, hci, adv or l2cap") }
                o.filter = l
            default:
                if a.hasPrefix("-") && a != "-" { throw UsageError("unknown option '\(a)'") }
                if !sawCommand, let c = Command(rawValue: a), c != .help, c != .version {
                    o.command = c; sawCommand = true
                } else if !sawCommand, a == "help" {
                    o.command = .help; return o
                } else if o.command == .decode {
                    o.files.append(a)
                } else {
                    throw UsageError("unexpected argument '\(a)'")
                }
            }
            i += 1
        }
        if o.transport == nil, let env = environment["ATTLED_TRANSPORT"], !env.isEmpty {
            do { o.transport = try TransportSpec.parse(env) } catch let e as TransportError { throw UsageError("ATTLED_TRANSPORT: \(e.description)") }
        }
        try o.validate()
        return o
    }

    func validate() throws {
        let custom = [red, green, blue].compactMap { $0 }.count
        if custom > 0 && custom < 3 { throw UsageError("--red, --green and --blue go together") }
        if custom == 3 && service == nil { throw UsageError("--red/--green/--blue need --service UUID for the service that holds them") }
        if custom == 3 && profile != nil { throw UsageError("--profile and --red/--green/--blue exclude each other") }
        if characteristics.count > 1 && command != .read {
            throw UsageError("--char is given \(characteristics.count) times: only read takes several (\(command.rawValue) works on one)")
        }
        switch command {
        case .set:
            if rgb == nil { throw UsageError("nothing to do: give a colour with --rgb R,G,B (or a command: scan, get, send, listen, gatt)") }
            if profile == .harness { throw UsageError("the harness profile has no RGB LED: use 'send --value 01' (press) / '--value 00' (release)") }
        case .send:
            if value == nil { throw UsageError("send needs --value HEX") }
        case .read:
            guard !characteristics.isEmpty, characteristics.allSatisfy(\.isGeneric) else { throw UsageError("read needs --char 0xHHHH|UUID (the handle or UUID of what to read, repeatable; 'attled gatt' lists them)") }
        case .write:
            guard let c = characteristic, c.isGeneric else { throw UsageError("write needs --char 0xHHHH|UUID (the handle or UUID of what to write; 'attled gatt' lists them)") }
            if value == nil { throw UsageError("write needs --value HEX") }
        case .decode:
            if files.count != 1 { throw UsageError("decode needs one FILE (or - for stdin)") }
        case .gateway:
            if mqttHost.isEmpty { throw UsageError("gateway needs --mqtt HOST[:PORT] (the MQTT broker)") }
        default: break
        }
        if withoutResponse && command != .write { throw UsageError("--without-response only applies to write") }
        if removeBond != nil && command != .bonds { throw UsageError("--remove only applies to bonds") }
        if command != .gateway && (!mqttHost.isEmpty || mqttUser != nil || mqttPasswordFile != nil || mqttTLSCA != nil || maxLinks != nil) {
            throw UsageError("--mqtt, --mqtt-user, --mqtt-password-file, --mqtt-tls-ca and --max-links only apply to gateway")
        }
        if command != .gateway && command != .ui && noAcceptList {
            throw UsageError("--no-accept-list only applies to gateway and ui")
        }
        if mqttPasswordFile != nil && mqttUser == nil { throw UsageError("--mqtt-password-file needs --mqtt-user") }
        if pair == .always && noRepair { throw UsageError("--pair and --no-repair exclude each other") }
        if values && command != .gatt { throw UsageError("--values only applies to gatt") }
        if names.count + addresses.count > 1 && (isGeneric || [.gatt, .ui].contains(command)) {
            throw UsageError("\(command.rawValue) takes one target: give one --name or --address")
        }
        if Set(names).count != names.count || Set(addresses.map(\.address)).count != addresses.count {
            throw UsageError("the same target is given twice")
        }
        if command != .decode && !files.isEmpty { throw UsageError("unexpected argument '\(files[0])'") }
        if rgb != nil && command != .set { throw UsageError("--rgb only applies to set") }
    }

    /// The profile the options describe explicitly (custom RGB or --profile).
    public var explicitProfile: LEDProfile? {
        if let r = red, let g = green, let b = blue, let s = service {
            return LEDProfile.custom(service: s, red: r, green: g, blue: b)
        }
        return profile
    }

    /// A command on any GATT server (no LED profile): gatt, read, write, and
    /// listen with `--char` as a handle or UUID.
    public var isGeneric: Bool {
        switch command {
        case .gatt, .read, .write: return true
        case .listen: return characteristic?.isGeneric == true
        default: return false
        }
    }

    /// The service an advertisement must carry to match: `--service`, except
    /// for a general GATT command with a named target, where `--service`
    /// names the GATT service that holds `--char`.
    public var scanService: BluetoothUUID? {
        if isGeneric && !(names.isEmpty && addresses.isEmpty) { return nil }
        return service
    }

    /// The first `--name`, if any.
    public var name: String? { names.first }
    /// The first `--address`, if any.
    public var address: DeviceAddress? { addresses.first }
    /// More than one device to drive.
    public var isMultiTarget: Bool { names.count + addresses.count > 1 }
}
