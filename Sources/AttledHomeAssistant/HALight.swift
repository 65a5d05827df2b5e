import BLEWire
import AttledJSON

// MARK: - Light commands

/// A colour, 0...255 per channel, as Home Assistant sends it. (LEDProfile has its
/// own `RGB`, the device's; the gateway converts.)
public struct LightColour: Sendable, Hashable, CustomStringConvertible {
    public var r: UInt8
    public var g: UInt8
    public var b: UInt8
    /// A colour from its red, green and blue values.
    public init(_ r: UInt8, _ g: UInt8, _ b: UInt8) { self.r = r; self.g = g; self.b = b }
    public static let black = LightColour(0, 0, 0)
    public static let white = LightColour(255, 255, 255)
    public var isBlack: Bool { r == 0 && g == 0 && b == 0 }
    public var description: String { "\(r),\(g),\(b)" }

    /// Each channel × `brightness` / 255, rounded to nearest. 255 × 255 fits in
    /// Int, and since 255 is odd no product lands exactly on .5, so
    /// `(c × b + 127) / 255` is exact rounding: (200,100,50) at 128 → (100,50,25).
    public func scaled(by brightness: UInt8) -> LightColour {
        func s(_ c: UInt8) -> UInt8 { UInt8((Int(c) * Int(brightness) + 127) / 255) }
        return LightColour(s(r), s(g), s(b))
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
    public var colour: LightColour?
    /// Seconds; accepted because Home Assistant sends it when asked, ignored (the devices cannot fade).
    public var transition: Double?
    /// Seconds; accepted because Home Assistant sends it when asked, ignored (the devices cannot flash).
    public var flash: Int?

    /// A command; every field but `on` defaults to absent.
    public init(on: Bool, brightness: UInt8? = nil, colour: LightColour? = nil, transition: Double? = nil, flash: Int? = nil) {
        self.on = on
        self.brightness = brightness
        self.colour = colour
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
                cmd.colour = try colour(value)
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

    static func colour(_ v: JSONValue) throws(LightCommandError) -> LightColour {
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
        return LightColour(r, g, b)
    }
}

// MARK: - Light state

/// What a light is, as Home Assistant sees it: on or off, the colour last
/// chosen and the brightness. OFF keeps colour and brightness, so a bare ON
/// restores them. The device is written `deviceColour`: the colour scaled by
/// brightness, or black when off.
public struct LightState: Sendable, Equatable {
    public var on: Bool
    /// The colour as chosen in Home Assistant, before brightness.
    public var colour: LightColour
    public var brightness: UInt8

    /// A state from on/off, the chosen colour and the brightness (0 ... 255).
    public init(on: Bool, colour: LightColour, brightness: UInt8) {
        self.on = on
        self.colour = colour
        self.brightness = brightness
    }

    /// Before anything is known: off, and ON alone gives full white.
    public static let initial = LightState(on: false, colour: .white, brightness: 255)

    /// The state that matches what was read back from the device on connect:
    /// black is off (ON alone then gives full white); any other colour is on at
    /// full brightness, with that colour.
    public static func readBack(_ device: LightColour) -> LightState {
        device.isBlack ? .initial : LightState(on: true, colour: device, brightness: 255)
    }

    /// The state after `command`: fields present replace the stored ones, `state` sets on or off.
    public func applying(_ command: LightCommand) -> LightState {
        var next = self
        next.on = command.on
        if let c = command.colour { next.colour = c }
        if let b = command.brightness { next.brightness = b }
        return next
    }

    /// What to write to the device.
    public var deviceColour: LightColour { on ? colour.scaled(by: brightness) : .black }

    /// The state message: `{"state":"ON","color_mode":"rgb","brightness":128,"color":{"r":200,"g":100,"b":50}}`.
    /// Colour and brightness are sent when off too, so Home Assistant shows
    /// what an ON will restore.
    public var stateJSON: JSONValue {
        [
            "state": on ? "ON" : "OFF",
            "color_mode": "rgb",
            "brightness": .int(Int64(brightness)),
            "color": ["r": .int(Int64(colour.r)), "g": .int(Int64(colour.g)), "b": .int(Int64(colour.b))],
        ]
    }

    /// The state message for `device`, retained so Home Assistant starts with the right state.
    public func stateMessage(_ device: HADevice, topics: HATopics) -> HAMessage {
        HAMessage(topic: topics.state(device), payload: stateJSON, retain: true)
    }
}
