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
    /// topic and the gateway's. With `availability_mode: all` the entity goes
    /// unavailable when either the device link or the gateway is down.
    static func availability(_ device: HADevice, _ topics: HATopics) -> JSONValue {
        [
            ["topic": .string(topics.availability(device)), "payload_available": .string(online), "payload_not_available": .string(offline)],
            ["topic": .string(topics.gatewayAvailability), "payload_available": .string(online), "payload_not_available": .string(offline)],
        ]
    }

    static func deviceBlock(_ device: HADevice, _ topics: HATopics) -> JSONValue {
        var members: [(String, JSONValue)] = [
            ("identifiers", [.string("attled_\(device.nodeID)")]),
            ("name", .string(device.name)),
            ("model", .string(device.model)),
            ("manufacturer", "attled"),
            ("via_device", .string(topics.gatewayDeviceID)),
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
    public static func lightConfig(_ device: HADevice, topics: HATopics) -> HAMessage {
        let payload: JSONValue = [
            "name": nil,
            "unique_id": .string("attled_\(device.nodeID)_light"),
            "schema": "json",
            "command_topic": .string(topics.command(device)),
            "state_topic": .string(topics.state(device)),
            "brightness": true,
            "supported_color_modes": ["rgb"],
            "availability": availability(device, topics),
            "availability_mode": "all",
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
    public static func harnessConfigs(_ device: HADevice, topics: HATopics) -> [HAMessage] {
        var out: [HAMessage] = []
        for n in 1...2 {
            let payload: JSONValue = [
                "name": .string("Button \(n)"),
                "unique_id": .string("attled_\(device.nodeID)_button\(n)"),
                "command_topic": .string(topics.button(device, n)),
                "payload_press": .string(pressPayload),
                "availability": availability(device, topics),
                "availability_mode": "all",
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
            "availability": availability(device, topics),
            "availability_mode": "all",
            "device": deviceBlock(device, topics),
            "origin": origin,
        ]
        out.append(HAMessage(topic: topics.config(component: "sensor", device, object: "notify"), payload: sensor, retain: true))
        return out
    }

    /// All discovery configs of one device.
    public static func configs(_ device: HADevice, topics: HATopics) -> [HAMessage] {
        switch device.kind {
        case .light: return [lightConfig(device, topics: topics)]
        case .harness: return harnessConfigs(device, topics: topics)
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

// MARK: - Light commands

/// A colour, 0...255 per channel, as Home Assistant sends it. (LEDProfile has its
/// own `RGB`; this module does not depend on it, so the gateway converts.)
public struct LightColor: Sendable, Hashable, CustomStringConvertible {
    public var r: UInt8
    public var g: UInt8
    public var b: UInt8
    /// A colour from its red, green and blue values.
    public init(_ r: UInt8, _ g: UInt8, _ b: UInt8) { self.r = r; self.g = g; self.b = b }
    public static let black = LightColor(0, 0, 0)
    public static let white = LightColor(255, 255, 255)
    public var isBlack: Bool { r == 0 && g == 0 && b == 0 }
    public var description: String { "\(r),\(g),\(b)" }

    /// Each channel × `brightness` / 255, rounded to nearest. 255 × 255 fits in
    /// Int, and since 255 is odd no product lands exactly on .5, so
    /// `(c × b + 127) / 255` is exact rounding: (200,100,50) at 128 → (100,50,25).
    public func scaled(by brightness: UInt8) -> LightColor {
        func s(_ c: UInt8) -> UInt8 { UInt8((Int(c) * Int(brightness) + 127) / 255) }
        return LightColor(s(r), s(g), s(b))
    }
}

/// Why a command payload was refused. The gateway logs it and ignores the message.
public enum LightCommandError: Error, Equatable, Sendable, CustomStringConvertible {
    case tooLarge(bytes: Int, limit: Int)
    case json(JSONError)
    case notAnObject(got: String)
    case missingField(String)
    case unknownField(String)
    case wrongType(field: String, expected: String, got: String)
    case outOfRange(field: String, value: String, allowed: String)

    public var description: String {
        switch self {
        case let .tooLarge(n, limit): return "light command of \(n) bytes is larger than \(limit)"
        case .json(let e): return "light command: \(e)"
        case .notAnObject(let got): return "light command must be a JSON object, got \(got)"
        case .missingField(let f): return "light command has no \"\(f)\""
        case .unknownField(let f): return "light command has unknown field \"\(f)\""
        case let .wrongType(f, expected, got): return "light command field \"\(f)\" must be \(expected), got \(got)"
        case let .outOfRange(f, v, allowed): return "light command field \"\(f)\" is \(v), allowed \(allowed)"
        }
    }
}

/// A Home Assistant JSON-schema light command, validated.
public struct LightCommand: Sendable, Equatable {
    public var on: Bool
    public var brightness: UInt8?
    public var color: LightColor?
    /// Seconds; accepted because Home Assistant sends it when asked, ignored (the devices cannot fade).
    public var transition: Double?
    /// Seconds; accepted because Home Assistant sends it when asked, ignored (the devices cannot flash).
    public var flash: Int?

    /// A command; every field but `on` defaults to absent.
    public init(on: Bool, brightness: UInt8? = nil, color: LightColor? = nil, transition: Double? = nil, flash: Int? = nil) {
        self.on = on
        self.brightness = brightness
        self.color = color
        self.transition = transition
        self.flash = flash
    }

    /// Largest payload read; a real command is under 100 bytes.
    public static let maxPayloadBytes = 1024

    /// Parses `{"state":"ON"|"OFF", "brightness":0...255, "color":{"r","g","b"},
    /// "transition":s, "flash":s}`. `state` is required; any other member, a
    /// wrong type, a fractional or out-of-range value is refused with the field named.
    /// - Throws: `LightCommandError`: `.tooLarge` over `maxPayloadBytes`, `.json`
    ///   for invalid JSON (nesting limit 4), `.notAnObject`, `.missingField`,
    ///   `.unknownField`, `.wrongType` or `.outOfRange`.
    public static func parse(_ payload: [UInt8]) throws(LightCommandError) -> LightCommand {
        guard payload.count <= maxPayloadBytes else { throw .tooLarge(bytes: payload.count, limit: maxPayloadBytes) }
        let doc: JSONValue
        do { doc = try JSONValue.parse(payload, maxDepth: 4) } catch { throw .json(error) }
        guard case .object(let members) = doc else { throw .notAnObject(got: doc.kindName) }

        var cmd = LightCommand(on: false)
        var sawState = false
        for (key, value) in members {
            switch key {
            case "state":
                guard let s = value.stringValue else { throw .wrongType(field: key, expected: "\"ON\" or \"OFF\"", got: value.kindName) }
                switch s {
                case "ON": cmd.on = true
                case "OFF": cmd.on = false
                default: throw .outOfRange(field: key, value: "\"\(s)\"", allowed: "\"ON\" or \"OFF\"")
                }
                sawState = true
            case "brightness":
                cmd.brightness = try channel(value, field: key)
            case "color":
                cmd.color = try color(value)
            case "transition":
                guard let t = value.doubleValue else { throw .wrongType(field: key, expected: "a number", got: value.kindName) }
                guard t >= 0 && t <= 3600 else { throw .outOfRange(field: key, value: "\(t)", allowed: "0...3600") }
                cmd.transition = t
            case "flash":
                guard let f = value.integerValue else { throw .wrongType(field: key, expected: "an integer", got: value.kindName) }
                guard f >= 0 && f <= 3600 else { throw .outOfRange(field: key, value: "\(f)", allowed: "0...3600") }
                cmd.flash = Int(f)
            default:
                throw .unknownField(key)
            }
        }
        guard sawState else { throw .missingField("state") }
        return cmd
    }

    /// Parses a command given as text.
    /// - Throws: `LightCommandError`, as `parse(_:)` on the UTF-8 bytes.
    public static func parse(_ text: String) throws(LightCommandError) -> LightCommand { try parse(Array(text.utf8)) }

    static func channel(_ v: JSONValue, field: String) throws(LightCommandError) -> UInt8 {
        guard let d = v.doubleValue else { throw .wrongType(field: field, expected: "an integer 0...255", got: v.kindName) }
        guard let i = v.integerValue else { throw .wrongType(field: field, expected: "an integer 0...255", got: "\(d)") }
        guard i >= 0 && i <= 255 else { throw .outOfRange(field: field, value: "\(i)", allowed: "0...255") }
        return UInt8(i)
    }

    static func color(_ v: JSONValue) throws(LightCommandError) -> LightColor {
        guard case .object(let members) = v else { throw .wrongType(field: "color", expected: "an object {r,g,b}", got: v.kindName) }
        var r: UInt8?, g: UInt8?, b: UInt8?
        for (key, value) in members {
            switch key {
            case "r": r = try channel(value, field: "color.r")
            case "g": g = try channel(value, field: "color.g")
            case "b": b = try channel(value, field: "color.b")
            default: throw .unknownField("color.\(key)")
            }
        }
        guard let r else { throw .missingField("color.r") }
        guard let g else { throw .missingField("color.g") }
        guard let b else { throw .missingField("color.b") }
        return LightColor(r, g, b)
    }
}

// MARK: - Light state

/// What a light is, as Home Assistant sees it: on or off, the colour last
/// chosen and the brightness. OFF keeps colour and brightness, so a bare ON
/// restores them. The device is written `deviceColor`: the colour scaled by
/// brightness, or black when off.
public struct LightState: Sendable, Equatable {
    public var on: Bool
    /// The colour as chosen in Home Assistant, before brightness.
    public var color: LightColor
    public var brightness: UInt8

    /// A state from on/off, the chosen colour and the brightness (0 ... 255).
    public init(on: Bool, color: LightColor, brightness: UInt8) {
        self.on = on
        self.color = color
        self.brightness = brightness
    }

    /// Before anything is known: off, and ON alone gives full white.
    public static let initial = LightState(on: false, color: .white, brightness: 255)

    /// The state that matches what was read back from the device on connect:
    /// black is off (ON alone then gives full white); any other colour is on at
    /// full brightness, with that colour.
    public static func readBack(_ device: LightColor) -> LightState {
        device.isBlack ? .initial : LightState(on: true, color: device, brightness: 255)
    }

    /// The state after `command`: fields present replace the stored ones, `state` sets on or off.
    public func applying(_ command: LightCommand) -> LightState {
        var next = self
        next.on = command.on
        if let c = command.color { next.color = c }
        if let b = command.brightness { next.brightness = b }
        return next
    }

    /// What to write to the device.
    public var deviceColor: LightColor { on ? color.scaled(by: brightness) : .black }

    /// The state message: `{"state":"ON","color_mode":"rgb","brightness":128,"color":{"r":200,"g":100,"b":50}}`.
    /// Colour and brightness are sent when off too, so Home Assistant shows
    /// what an ON will restore.
    public var stateJSON: JSONValue {
        [
            "state": on ? "ON" : "OFF",
            "color_mode": "rgb",
            "brightness": .int(Int64(brightness)),
            "color": ["r": .int(Int64(color.r)), "g": .int(Int64(color.g)), "b": .int(Int64(color.b))],
        ]
    }

    /// The state message for `device`, retained so Home Assistant starts with the right state.
    public func stateMessage(_ device: HADevice, topics: HATopics) -> HAMessage {
        HAMessage(topic: topics.state(device), payload: stateJSON, retain: true)
    }
}
