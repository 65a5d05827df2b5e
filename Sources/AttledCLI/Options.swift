import Attled
import BLEWire
import BLETransport
import LEDProfile
import BLETrace

/// What the user asked for: the common options at the top level, and each
/// command's own in its group (`gateway`, `gattTool`, `led`), whose fields
/// read as if they were the top level's (`opts.mqttHost` is
/// `opts.gateway.mqttHost`). `OptionSpec.all` declares how each is spelled,
/// parsed and documented; usage errors exit 64 with the usage line.
public struct Options: Sendable {
    /// The commands, in the order the usage line lists them.
    public enum Command: String, Sendable, CaseIterable {
        case set, scan, get, send, listen, gatt, read, write, ui, bonds, gateway, serve, proxy, decode, help, version
    }
    public enum TraceMode: Sendable { case off, decoded, hex }
    /// When attled pairs or encrypts (the library's policy).
    public typealias PairMode = SecurityPolicy.Pairing

    public var command: Command = .set
    /// `attled help CMD`, `attled CMD --help`: the command whose help to print.
    public var helpTopic: Command? = nil
    public var transport: TransportSpec? = nil
    /// `--name`, repeatable: each is a target.
    public var names: [String] = []
    public var service: BluetoothUUID? = nil
    /// `--address`, repeatable: each is a target.
    public var addresses: [DeviceAddress] = []
    public var value: [UInt8]? = nil
    /// `--char`: a handle (0xHHHH), a UUID, or red/green/blue (the first one given).
    public var characteristic: CharacteristicRef? { characteristics.first }
    /// Every `--char`, in order (`read` takes several).
    public var characteristics: [CharacteristicRef] = []
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
    /// The LED's colour and profile.
    public var led = LEDOptions()
    /// gatt, read, write.
    public var gattTool = GATTToolOptions()
    /// gateway (and `--no-accept-list` for ui).
    public var gateway = GatewayOptions()
    /// serve: what to play and how to advertise it.
    public var serve = ServeOptions()
    /// proxy: where the ESPHome API listens and how clients prove themselves.
    public var proxy = ProxyOptions()
    /// The declarations of the options given, by first spelling (for the
    /// per-command checks).
    var given: Set<String> = []

    public init() {}
}

/// The LED: its colour (set) and how to find its characteristics.
public struct LEDOptions: Sendable {
    public var profile: LEDProfile? = nil
    public var red: BluetoothUUID? = nil
    public var green: BluetoothUUID? = nil
    public var blue: BluetoothUUID? = nil
    public var rgb: RGB? = nil
    public init() {}
}

/// The GATT tool's switches (gatt, read, write).
public struct GATTToolOptions: Sendable {
    /// `gatt --values`: read every readable value and descriptor.
    public var values = false
    /// `write --without-response`: Write Command.
    public var withoutResponse = false
    public init() {}
}

/// The gateway's broker, topics and links.
public struct GatewayOptions: Sendable {
    /// `--mqtt HOST[:PORT]`.
    public var mqttHost = ""
    public var mqttPort = 1883
    public var mqttUser: String? = nil
    public var mqttPasswordFile: String? = nil
    public var mqttTLSCA: String? = nil
    public var topicPrefix = "attled"
    public var discoveryPrefix = "homeassistant"
    public var gatewayID = "gateway"
    /// At most this many links (default: what the controller holds).
    public var maxLinks: Int? = nil
    /// Reconnect kept devices by scanning, not from the Filter Accept List (gateway, ui).
    public var noAcceptList = false
    /// `--status`: print who holds which lamp (from the broker) and exit.
    public var status = false
    public init() {}
}

/// What `attled serve` plays: a board (`--profile`) or a database file, and what it advertises.
public struct ServeOptions: Sendable {
    /// `--gatt FILE`: a database in `attled gatt --json --values` shape.
    public var gattFile: String? = nil
    /// `--advertise-name`: the name advertised (default: --name, or the database's Device Name).
    public var advertiseName: String? = nil
    /// `--advertise-uuid`, repeatable (default: the first primary service UUID that fits).
    public var advertiseUUIDs: [BluetoothUUID] = []
    /// `--secure`: the LED characteristics (and their CCCDs) behind encryption.
    public var secure = false
    /// `--sc-only`: refuse legacy pairing (LE Secure Connections only).
    public var secureConnectionsOnly = false
    /// `--conn-interval MIN-MAX`: the parameters asked of every central once connected.
    public var connectionParameters: ConnectionParameters? = nil
    public init() {}
}

/// A usage error: message for stderr, exit 64.
public struct UsageError: Error, Equatable, Sendable {
    public var message: String
    public init(_ m: String) { message = m }
}

extension Options {
    /// The profile the options describe explicitly (custom RGB or --profile).
    public var explicitProfile: LEDProfile? {
        if let r = led.red, let g = led.green, let b = led.blue, let s = service {
            return LEDProfile.custom(service: s, red: r, green: g, blue: b)
        }
        return led.profile
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

/// `attled proxy`: the ESPHome native API server.
public struct ProxyOptions: Sendable {
    /// `--listen HOST:PORT` (default 0.0.0.0:6053).
    public var listenHost = "0.0.0.0"
    public var listenPort: UInt16 = 6053
    /// `--api-key-file FILE`: the base64 key ESPHome's `api: encryption: key` takes.
    public var apiKeyFile: String? = nil
    /// `--allow-plaintext`: plaintext beyond loopback.
    public var allowPlaintext = false
    /// `--max-connections N`.
    public var maxConnections: Int? = nil
    /// `gateway --proxy [HOST:]PORT`: the gateway serves the API too (the address in listenHost/listenPort).
    public var inGateway = false
    /// `--no-mdns`: no announcement over mDNS.
    public var noMDNS = false
    public init() {}
}
