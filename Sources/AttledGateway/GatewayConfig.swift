import Attled
import AttledLED
import MQTT
import AttledHomeAssistant

/// What a gateway is: its broker, its topics, the lamps it keeps and how.
/// A value: the command line parses options into one, a program builds one.
///
///     var config = GatewayConfig(brokerHost: "127.0.0.1")
///     config.names = ["CassarTech"]
///     let gateway = try Gateway(config: config, stack: stack)
///     try gateway.run()
public struct GatewayConfig: Sendable {
    /// The MQTT broker.
    public var brokerHost: String
    public var brokerPort: Int
    public var username: String?
    /// The password (or read from `passwordFile`, its trailing newlines dropped).
    public var password: String?
    public var passwordFile: String?
    /// A CA certificate (PEM) for TLS to the broker; nil: plain TCP.
    public var tlsCAFile: String?
    /// Topic prefix (`attled/<device>/...`).
    public var topicPrefix: String
    /// Home Assistant's discovery prefix.
    public var discoveryPrefix: String
    /// This gateway's id in topics and in Home Assistant.
    public var gatewayID: String
    /// The lamps to keep, by advertised name or address; both empty: every
    /// device advertising a known LED service.
    public var names: [String]
    public var addresses: [DeviceAddress]
    /// How links are kept (slots, accept list, backoff).
    public var keeper: DeviceKeeper.Policy
    /// When links are paired or encrypted.
    public var security: SecurityPolicy
    /// Log each lamp's setup steps and interval changes.
    public var verbose: Bool
    /// How gateways on one broker share the lamps.
    public var sharing = SharePolicy()
    /// The MQTT keepalive: the broker publishes a silent gateway's will after 1.5 times this.
    public var keepaliveSeconds = 5

    public init(brokerHost: String, brokerPort: Int = 1883, topicPrefix: String = "attled",
                discoveryPrefix: String = "homeassistant", gatewayID: String = "gateway") {
        self.brokerHost = brokerHost
        self.brokerPort = brokerPort
        self.topicPrefix = topicPrefix
        self.discoveryPrefix = discoveryPrefix
        self.gatewayID = gatewayID
        names = []
        addresses = []
        keeper = DeviceKeeper.Policy()
        security = SecurityPolicy()
        verbose = false
    }

    /// The topics this configuration names.
    /// - Throws: `GatewayError.configuration` for an unusable prefix or id.
    public func topics() throws -> HATopics {
        do {
            return try HATopics(topicPrefix: topicPrefix, discoveryPrefix: discoveryPrefix, gatewayID: gatewayID)
        } catch {
            throw GatewayError.configuration("\(error)")
        }
    }

    /// The broker password: `password`, or read from `passwordFile` (its
    /// trailing newlines dropped).
    /// - Throws: `GatewayError.passwordFileUnreadable`.
    public func brokerPassword() throws -> String? {
        guard let f = passwordFile else { return password }
        let raw: [UInt8]
        do { raw = try SystemIO.contents(of: f, limit: 4096) } catch {
            throw GatewayError.passwordFileUnreadable(path: f, errno: error.code)
        }
        var text = String(decoding: raw, as: UTF8.self)
        while text.hasSuffix("\n") || text.hasSuffix("\r") { text.removeLast() }
        return text
    }

    /// Whether the gateway keeps `d`: one of the names or addresses, or
    /// (without any) a device advertising a known LED service.
    public func wants(_ d: DiscoveredDevice) -> Bool {
        if names.isEmpty && addresses.isEmpty { return LEDProfile.detect(d.serviceUUIDs) != nil }
        if addresses.contains(where: { $0.address == d.address.address }) { return true }
        guard let n = d.name else { return false }
        return names.contains(n)
    }
}

/// Why a gateway could not start.
public enum GatewayError: Error, Sendable, CustomStringConvertible {
    /// The configuration cannot work (a bad prefix or id).
    case configuration(String)
    /// `GatewayConfig.passwordFile` cannot be read: its path and errno.
    case passwordFileUnreadable(path: String, errno: Int32)
    /// The MQTT client could not be made.
    case broker(String)

    public var description: String {
        switch self {
        case .configuration(let m): return m
        case let .passwordFileUnreadable(path, e): return "cannot read the MQTT password file \(path): \(SystemIO.errorText(e))"
        case .broker(let m): return "MQTT: \(m)"
        }
    }
}
