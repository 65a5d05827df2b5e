import BLEWire
import ESPHomeAPI

/// What `attled proxy` (or a gateway with `--proxy`) is told: where the
/// ESPHome native API listens, how clients prove themselves, who the node
/// says it is. No CLI option inside: the CLI fills it.
public struct ProxyConfig: Sendable {
    /// The address to listen on ("0.0.0.0": every interface).
    public var listenHost = "0.0.0.0"
    /// ESPHome's API port.
    public var listenPort: UInt16 = 6053
    /// The API encryption key: with it the proxy speaks Noise only.
    public var key: NoisePSK?
    /// The node's name (Home Assistant's device name; letters, digits, '-').
    public var name = "attled-proxy"
    /// Shown by Home Assistant (default: the name).
    public var friendlyName: String?
    /// The node's MAC as Home Assistant keys it (6 bytes, printed order):
    /// stable across restarts, so a restarted proxy is the same device.
    public var macAddress: [UInt8] = [0, 0, 0, 0, 0, 0]
    /// The radio's own address (`bluetooth_mac_address`).
    public var bluetoothAddress: [UInt8] = [0, 0, 0, 0, 0, 0]
    /// At most this many links for API clients (nil: what the controller allows, at most `maxConnectionsCap`).
    public var maxConnections: Int?
    /// A connect attempt's bound (Home Assistant waits up to 20 s).
    public var connectTimeoutMs = 10_000
    /// Announce the node over mDNS (`_esphomelib._tcp`, through avahi-daemon).
    public var announce = true
    /// Raw advertisements are sent in batches of at most this many ...
    public var batchSize = 16
    /// ... or after this long, whichever comes first.
    public var batchMs = 20

    /// ESPHome's proxies allow at most this many connections (the ESP32's limit).
    public static let maxConnectionsCap = 9
    /// The API version announced: ESPHome 2025.4's (1.10), which every
    /// client from aioesphomeapi 29 to 46 accepts; 1.15 and later switch
    /// clients to other capability messages.
    public static let apiVersion = (major: UInt32(1), minor: UInt32(10))
    /// An ESPHome version new enough that Home Assistant raises no
    /// outdated-firmware repair for the proxy.
    public static let esphomeVersion = "2025.4.0"

    public init() {}

    /// The MAC as ESPHome prints it ("AA:BB:CC:DD:EE:FF").
    public static func text(_ mac: [UInt8]) -> String {
        mac.map { Hex.int($0, width: 2).uppercased() }.joined(separator: ":")
    }
}
