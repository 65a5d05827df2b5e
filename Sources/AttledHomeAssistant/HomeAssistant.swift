// Home Assistant MQTT discovery and the JSON light contract, as pure functions:
// what to publish where, how to read a command, what to write to the device and
// what state to report. No I/O here; the gateway does the publishing.
//
// The contract followed (https://www.home-assistant.io/integrations/mqtt/ and
// /integrations/light.mqtt/#json-schema, /integrations/button.mqtt/):
// - a config is published, retained, to `<discovery_prefix>/<component>/<node_id>/<object_id>/config`;
//   an empty retained payload there removes the entity;
// - Home Assistant announces itself on `<discovery_prefix>/status` with `online`,
//   after which configs are published again;
// - a JSON-schema light gets commands such as
//   `{"state":"ON","brightness":128,"color":{"r":200,"g":100,"b":50}}` (brightness on the
//   0...255 `brightness_scale`, the colour unscaled because `brightness` is true, and
//   `transition` / `flash` when the user asks for them) and reads state in the same
//   shape with `color_mode`;
// - availability entries default to the payloads `online` / `offline`; with
//   `availability_mode: all` an entity is available only while every listed topic says `online`.

import LEDProfile
import BLEWire
import AttledJSON

// MARK: - Topics

/// A configuration value Home Assistant or MQTT would not accept.
public enum HAError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A topic prefix that is empty, has a wildcard (`+`, `#`), a NUL, or a leading or trailing `/`.
    case invalidPrefix(String, why: String)
    /// An id with nothing left after keeping `[a-z0-9_-]`.
    case invalidID(String)

    public var description: String {
        switch self {
        case let .invalidPrefix(p, why): return "invalid topic prefix \"\(p)\": \(why)"
        case .invalidID(let id): return "invalid id \"\(id)\": it needs at least one letter or digit"
        }
    }
}

/// Where the gateway's topics live: its own tree under `topicPrefix` and the
/// discovery tree under `discoveryPrefix`.
public struct HATopics: Sendable, Equatable {
    public let topicPrefix: String
    public let discoveryPrefix: String
    /// This gateway's id (sanitised: `[a-z0-9_-]`), so several gateways can share a broker.
    public let gatewayID: String

    /// Validates both prefixes and sanitises `gatewayID`.
    /// - Throws: `HAError.invalidPrefix` for a prefix that is empty, over 200
    ///   bytes, has `+`, `#` or NUL, or starts or ends with `/`;
    ///   `HAError.invalidID` when `gatewayID` keeps no letter or digit.
    public init(topicPrefix: String = "attled", discoveryPrefix: String = "homeassistant", gatewayID: String = "gateway") throws(HAError) {
        try HATopics.validate(topicPrefix)
        try HATopics.validate(discoveryPrefix)
        self.topicPrefix = topicPrefix
        self.discoveryPrefix = discoveryPrefix
        self.gatewayID = try HATopics.sanitise(gatewayID)
    }

    /// The gateway's own availability: the will publishes `offline` here.
    public var gatewayAvailability: String { "\(topicPrefix)/\(gatewayID)/availability" }
    /// Home Assistant's birth and will topic (`online` / `offline`).
    public var homeAssistantStatus: String { "\(discoveryPrefix)/status" }
    /// The identifier of the gateway in Home Assistant's device registry (the lights' `via_device`).
    public var gatewayDeviceID: String { "attled_\(gatewayID)" }

    /// `<topicPrefix>/<node>`: the root of one device's topics.
    public func base(_ device: HADevice) -> String { "\(topicPrefix)/\(device.nodeID)" }
    /// `<topicPrefix>/<node>/set`: where Home Assistant sends the light's JSON commands.
    public func command(_ device: HADevice) -> String { base(device) + "/set" }
    /// `<topicPrefix>/<node>/state`: where the light's JSON state is published.
    public func state(_ device: HADevice) -> String { base(device) + "/state" }
    /// `<topicPrefix>/<node>/availability`: the device's `online` / `offline`.
    public func availability(_ device: HADevice) -> String { base(device) + "/availability" }
    /// Command topic of harness button `number` (1 or 2).
    public func button(_ device: HADevice, _ number: Int) -> String { base(device) + "/button\(number)" }
    /// Where a harness's notifications are published.
    public func notifications(_ device: HADevice) -> String { base(device) + "/notify" }
    /// `<topicPrefix>/<node>/holder`: the gateway holding the lamp, `{"holder":"<gateway>"}`
    /// (several gateways on one broker; the entities' attributes).
    public func holder(_ device: HADevice) -> String { base(device) + "/holder" }
    /// `<topicPrefix>/<node>/applied`: the digest of the last command the holder carried out.
    public func applied(_ device: HADevice) -> String { base(device) + "/applied" }
    /// `<topicPrefix>/<gateway>/heard`: what a gateway hears of the lamps (several gateways on one broker).
    public var heard: String { "\(topicPrefix)/\(gatewayID)/heard" }

    /// The node id of a device id (an address): Home Assistant's `[a-z0-9_-]`.
    public static func nodeID(_ id: String) -> String? { try? sanitise(id) }

    /// `<discovery>/<component>/attled_<node>/<object>/config`.
    public func config(component: String, _ device: HADevice, object: String) -> String {
        "\(discoveryPrefix)/\(component)/attled_\(device.nodeID)/\(object)/config"
    }

    /// Every topic the gateway subscribes to for the devices given (commands,
    /// button presses, and Home Assistant's status).
    public func subscriptions(_ devices: [HADevice]) -> [String] {
        var out = [homeAssistantStatus]
        for d in devices {
            switch d.kind {
            case .light: out.append(command(d))
            case .harness: out.append(button(d, 1)); out.append(button(d, 2))
            }
        }
        return out
    }

    static func validate(_ prefix: String) throws(HAError) {
        if prefix.isEmpty { throw .invalidPrefix(prefix, why: "it is empty") }
        if prefix.utf8.count > 200 { throw .invalidPrefix(prefix, why: "it is longer than 200 bytes") }
        if prefix.contains("+") || prefix.contains("#") { throw .invalidPrefix(prefix, why: "MQTT wildcards are not allowed") }
        if prefix.unicodeScalars.contains(where: { $0.value == 0 }) { throw .invalidPrefix(prefix, why: "it contains NUL") }
        if prefix.hasPrefix("/") || prefix.hasSuffix("/") { throw .invalidPrefix(prefix, why: "it starts or ends with '/'") }
    }

    /// Lower-cases and keeps `[a-z0-9_-]`: Home Assistant's rule for node and object ids.
    static func sanitise(_ id: String) throws(HAError) -> String {
        var out = ""
        for u in id.lowercased().unicodeScalars {
            if (u >= "a" && u <= "z") || (u >= "0" && u <= "9") || u == "_" || u == "-" { out.unicodeScalars.append(u) }
        }
        guard out.contains(where: { $0.isLetter || $0.isNumber }) else { throw .invalidID(id) }
        return out
    }
}

/// One device as Home Assistant sees it.
public struct HADevice: Sendable, Equatable {
    /// What entities the device becomes.
    public enum Kind: Sendable, Equatable {
        /// pycom and particle: an RGB light.
        case light
        /// The Arduino harness: two buttons and a notification sensor.
        case harness
    }

    /// Stable id: the Bluetooth address when there is one ("C0:FF:EE:00:11:22").
    public let id: String
    /// `id` lower-cased with only `[a-z0-9_-]` kept: "c0ffee001122". Used in topics and unique ids.
    public let nodeID: String
    public let name: String
    /// The LED profile, shown as the model: "pycom", "particle", "harness".
    public let model: String
    public let kind: Kind

    /// A device from its stable id, display name, model and kind; `nodeID` is `id` sanitised.
    /// - Throws: `HAError.invalidID` when `id` keeps no letter or digit.
    public init(id: String, name: String, model: String, kind: Kind) throws(HAError) {
        self.id = id
        self.nodeID = try HATopics.sanitise(id)
        self.name = name
        self.model = model
        self.kind = kind
    }

    /// The id as a Bluetooth address ("c0:ff:ee:00:11:22"), when it is one.
    var bluetoothAddress: String? {
        let parts = id.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 6, parts.allSatisfy({ $0.count == 2 && UInt8($0, radix: 16) != nil }) else { return nil }
        return id.lowercased()
    }
}

/// One MQTT message to publish.
public struct HAMessage: Sendable, Equatable {
    public let topic: String
    public let payload: JSONValue
    public let retain: Bool

    /// A message publishing `payload` (serialised as JSON) on `topic`, retained when `retain`.
    public init(topic: String, payload: JSONValue, retain: Bool) {
        self.topic = topic
        self.payload = payload
        self.retain = retain
    }

    public var payloadBytes: [UInt8] { payload.serializedBytes }
}

// MARK: - Discovery

/// Discovery payloads and fixed payloads of the Home Assistant contract.
public enum HomeAssistant {
    public static let online = "online"
    public static let offline = "offline"
    /// The button entities' `payload_press`.
    public static let pressPayload = "PRESS"

    /// The `availability` list every device entity carries: the device's own
    /// topic, which its holder keeps (`online` once its link is set up,
    /// `offline` when it goes down); when the holder dies, another gateway
    /// on the broker says `offline` for it. Shared by several gateways, no
    /// gateway's own topic: every gateway publishes the same config,
    /// whichever holds the lamp. A `lone` gateway (no other on its broker)
    /// adds its own availability, so its lamps go unavailable with it
    /// (`availability_mode: all`), since no survivor would say so.
    static func availability(_ device: HADevice, _ topics: HATopics, lone: Bool) -> JSONValue {
        var list: [JSONValue] = [
            ["topic": .string(topics.availability(device)), "payload_available": .string(online), "payload_not_available": .string(offline)],
        ]
        if lone {
            list.append(["topic": .string(topics.gatewayAvailability), "payload_available": .string(online), "payload_not_available": .string(offline)])
        }
        return .array(list)
    }

    static func deviceBlock(_ device: HADevice, _ topics: HATopics) -> JSONValue {
        var members: [(String, JSONValue)] = [
            ("identifiers", [.string("attled_\(device.nodeID)")]),
            ("name", .string(device.name)),
            ("model", .string(device.model)),
            ("manufacturer", "attled"),
        ]
        if let mac = device.bluetoothAddress {
            members.append(("connections", [["bluetooth", .string(mac)]]))
        }
        return .object(members)
    }

    /// Who published the discovery config, with the software version.
    static let origin: JSONValue = ["name": "attled", "sw_version": .string(AttledVersion.string)]

    /// The gateway's own entry in Home Assistant's device registry: the device
    /// every lamp is "connected via", with a connectivity sensor on the
    /// gateway's availability topic (`online` while it runs; the broker
    /// publishes the will, `offline`, when it is gone). Retained, published to
    /// `<discovery>/binary_sensor/attled_<gateway>/connectivity/config`.
    public static func gatewayConfig(topics: HATopics) -> HAMessage {
        let payload: JSONValue = [
            "name": "Connectivity",
            "unique_id": .string("\(topics.gatewayDeviceID)_connectivity"),
            "device_class": "connectivity",
            "entity_category": "diagnostic",
            "state_topic": .string(topics.gatewayAvailability),
            "payload_on": .string(online),
            "payload_off": .string(offline),
            "device": [
                "identifiers": [.string(topics.gatewayDeviceID)],
                "name": .string("attled gateway \(topics.gatewayID)"),
                "model": "attled gateway",
                "manufacturer": "attled",
                "sw_version": .string(AttledVersion.string),
            ],
            "origin": origin,
        ]
        return HAMessage(topic: "\(topics.discoveryPrefix)/binary_sensor/\(topics.gatewayDeviceID)/connectivity/config",
                         payload: payload, retain: true)
    }

    /// The retained discovery config of a pycom or particle device: a JSON-schema
    /// light with brightness and one colour mode, `rgb`. `name` is null, so the
    /// entity takes the device's name. Published to
    /// `<discovery>/light/attled_<node>/light/config`.
    public static func lightConfig(_ device: HADevice, topics: HATopics, lone: Bool = false) -> HAMessage {
        let payload: JSONValue = [
            "name": nil,
            "unique_id": .string("attled_\(device.nodeID)_light"),
            "schema": "json",
            "command_topic": .string(topics.command(device)),
            "state_topic": .string(topics.state(device)),
            "brightness": true,
            "supported_color_modes": ["rgb"],
            "availability": availability(device, topics, lone: lone),
            "availability_mode": "all",
            "json_attributes_topic": .string(topics.holder(device)),
            "device": deviceBlock(device, topics),
            "origin": origin,
        ]
        return HAMessage(topic: topics.config(component: "light", device, object: "light"), payload: payload, retain: true)
    }

    /// The retained discovery configs of a harness: two `button` entities (a
    /// press publishes `PRESS` on `<base>/button1` or `<base>/button2`) and a
    /// `sensor` for its notifications.
    ///
    /// Why a sensor and not an `event` entity: Home Assistant's MQTT event needs
    /// the list of `event_types` up front and a JSON `{"event_type": ...}`
    /// payload, but the harness's notifications are opaque bytes whose meaning
    /// the gateway does not know. A sensor whose state is the last notification
    /// as hex text ("01") shows every value, works in automations (state
    /// changes), and keeps the notification topic plain text that any MQTT
    /// client can read. The notifications are published not retained, so a
    /// stale value is not replayed as fresh.
    public static func harnessConfigs(_ device: HADevice, topics: HATopics, lone: Bool = false) -> [HAMessage] {
        var out: [HAMessage] = []
        for n in 1...2 {
            let payload: JSONValue = [
                "name": .string("Button \(n)"),
                "unique_id": .string("attled_\(device.nodeID)_button\(n)"),
                "command_topic": .string(topics.button(device, n)),
                "payload_press": .string(pressPayload),
                "availability": availability(device, topics, lone: lone),
                "availability_mode": "all",
                "json_attributes_topic": .string(topics.holder(device)),
                "device": deviceBlock(device, topics),
                "origin": origin,
            ]
            out.append(HAMessage(topic: topics.config(component: "button", device, object: "button\(n)"), payload: payload, retain: true))
        }
        let sensor: JSONValue = [
            "name": "Notification",
            "unique_id": .string("attled_\(device.nodeID)_notify"),
            "state_topic": .string(topics.notifications(device)),
            "icon": "mdi:bell-ring",
            "availability": availability(device, topics, lone: lone),
            "availability_mode": "all",
            "json_attributes_topic": .string(topics.holder(device)),
            "device": deviceBlock(device, topics),
            "origin": origin,
        ]
        out.append(HAMessage(topic: topics.config(component: "sensor", device, object: "notify"), payload: sensor, retain: true))
        return out
    }

    /// All discovery configs of one device.
    /// `lone`: the gateway is the only one on its broker (see `availability`).
    public static func configs(_ device: HADevice, topics: HATopics, lone: Bool = false) -> [HAMessage] {
        switch device.kind {
        case .light: return [lightConfig(device, topics: topics, lone: lone)]
        case .harness: return harnessConfigs(device, topics: topics, lone: lone)
        }
    }

    /// Whether a message on `<discovery>/status` says Home Assistant (re)started,
    /// so every config must be published again.
    public static func isBirth(_ payload: [UInt8]) -> Bool { payload == Array(online.utf8) }

    /// Which harness button a press on `topic` is for (1 or 2), if the payload is `PRESS`.
    public static func buttonPress(topic: String, payload: [UInt8], device: HADevice, topics: HATopics) -> HarnessButton? {
        guard payload == Array(pressPayload.utf8) else { return nil }
        if topic == topics.button(device, 1) { return .one }
        if topic == topics.button(device, 2) { return .two }
        return nil
    }

    /// A harness notification as the text published on its topic: lower-case hex, no spaces ("01", "0304").
    public static func notificationText(_ value: [UInt8]) -> String {
        let digits: [Character] = Array("0123456789abcdef")
        var s = ""
        for b in value {
            s.append(digits[Int(b >> 4)])
            s.append(digits[Int(b & 0x0F)])
        }
        return s
    }
}
