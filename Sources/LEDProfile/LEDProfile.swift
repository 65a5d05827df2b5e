import BLEWire
import BLEGATT

/// How an LED device is driven: which service, which characteristics.
public struct LEDProfile: Hashable, Sendable {
    /// How the colour reaches the device.
    public enum Shape: Hashable, Sendable {
        /// Three 1-byte characteristics: red, green, blue.
        case rgb(red: BluetoothUUID, green: BluetoothUUID, blue: BluetoothUUID)
        /// A command characteristic found by its write property, and values
        /// that come back as notifications (the Arduino harness).
        case command
    }

    public var name: String
    public var service: BluetoothUUID
    public var shape: Shape

    /// A profile from its name, service UUID and shape.
    public init(name: String, service: BluetoothUUID, shape: Shape) {
        self.name = name; self.service = service; self.shape = shape
    }

    static func u(_ s: String) -> BluetoothUUID { BluetoothUUID(s)! }

    /// Pycom LoPy4: 1-byte values, Write Request, readable.
    public static let pycom = LEDProfile(
        name: "pycom", service: u("36353433-3231-3039-3837-363534333231"),
        shape: .rgb(red: u("36353433-3231-3039-3837-363534336261"), green: u("36353433-3231-3039-3837-363534336262"),
                    blue: u("36353433-3231-3039-3837-363534336263")))

    /// Particle Xenon/Mesh: 1-byte values, Write Command (write without response), readable.
    public static let particle = LEDProfile(
        name: "particle", service: u("b4250400-fb4b-4746-b2b0-93f0e61122c6"),
        shape: .rgb(red: u("b4250401-fb4b-4746-b2b0-93f0e61122c6"), green: u("b4250402-fb4b-4746-b2b0-93f0e61122c6"),
                    blue: u("b4250403-fb4b-4746-b2b0-93f0e61122c6")))

    /// Arduino harness controller: 1-byte commands (1/0, 3/4: press/release of two buttons), notifies.
    public static let harness = LEDProfile(name: "harness", service: u("19B10010-E8F2-537E-4F6C-D104768A1214"), shape: .command)

    public static let known: [LEDProfile] = [.pycom, .particle, .harness]

    /// Any other RGB device, described by its service and three characteristic UUIDs.
    /// - Returns: a profile named "custom".
    public static func custom(service: BluetoothUUID, red: BluetoothUUID, green: BluetoothUUID, blue: BluetoothUUID) -> LEDProfile {
        LEDProfile(name: "custom", service: service, shape: .rgb(red: red, green: green, blue: blue))
    }

    /// True for a profile described on the command line rather than one of the known devices.
    public var isCustom: Bool { !LEDProfile.known.contains(self) }

    /// The known profile called `n` (case-insensitive), nil if there is none.
    public static func named(_ n: String) -> LEDProfile? { known.first { $0.name == n.lowercased() } }

    /// The first known profile whose service UUID appears in `uuids`.
    public static func detect(_ uuids: [BluetoothUUID]) -> LEDProfile? {
        known.first { uuids.contains($0.service) }
    }

    /// Characteristic UUIDs that discovery must find (empty for `.command`, found by properties).
    public var requiredCharacteristics: [BluetoothUUID] {
        if case let .rgb(r, g, b) = shape { return [r, g, b] }
        return []
    }

    public var isRGB: Bool { if case .rgb = shape { return true } else { return false } }
}

/// The characteristics a run resolved for a profile.
public struct ResolvedLED: Sendable {
    public var profile: LEDProfile
    public var service: Service
    public var characteristics: [Characteristic]
    /// RGB profiles: red, green, blue in that order.
    public var rgb: [Characteristic]?
    /// Harness: the writable command characteristic.
    public var command: Characteristic?
    /// Harness: the characteristic that notifies.
    public var notifier: Characteristic?

    /// Whether discovery has found everything this profile needs.
    public static func isComplete(_ profile: LEDProfile, _ chars: [Characteristic]) -> Bool {
        switch profile.shape {
        case let .rgb(r, g, b):
            return [r, g, b].allSatisfy { u in chars.contains { $0.uuid == u } }
        case .command:
            // Both a writable and a notifying characteristic, and the notifier's end known
            // (another declaration after it) is not required: descriptors are searched to the service end.
            return chars.contains { $0.properties.contains(.write) || $0.properties.contains(.writeWithoutResponse) }
                && chars.contains { $0.properties.contains(.notify) || $0.properties.contains(.indicate) }
        }
    }

    /// Picks what `profile` needs from the discovered characteristics. RGB: the
    /// three UUIDs. Command: a Write (else Write Without Response) characteristic,
    /// and a Notify (else Indicate) one when there is one (`notifier` may stay nil).
    /// - Throws: `GATTError.characteristicNotFound` when an RGB characteristic is
    ///   missing; `GATTError.malformed` when a command profile has nothing writable.
    public init(profile: LEDProfile, service: Service, characteristics: [Characteristic]) throws {
        self.profile = profile; self.service = service; self.characteristics = characteristics
        switch profile.shape {
        case let .rgb(r, g, b):
            var list: [Characteristic] = []
            for u in [r, g, b] {
                guard let c = characteristics.first(where: { $0.uuid == u }) else {
                    throw GATTError.characteristicNotFound(u, service: profile.service)
                }
                list.append(c)
            }
            rgb = list
        case .command:
            command = characteristics.first { $0.properties.contains(.write) } ?? characteristics.first { $0.properties.contains(.writeWithoutResponse) }
            notifier = characteristics.first { $0.properties.contains(.notify) } ?? characteristics.first { $0.properties.contains(.indicate) }
            if command == nil {
                throw GATTError.malformed(procedure: "harness discovery", reason: "service \(profile.service) has no writable characteristic")
            }
        }
    }
}

/// A colour: "255,0,0", "#ff0000", "ff0000" or a name.
public struct RGB: Hashable, Sendable, CustomStringConvertible {
    public var r: UInt8, g: UInt8, b: UInt8
    /// A colour from its red, green and blue values.
    public init(_ r: UInt8, _ g: UInt8, _ b: UInt8) { self.r = r; self.g = g; self.b = b }

    public static let names: [String: RGB] = [
        "off": RGB(0, 0, 0), "black": RGB(0, 0, 0), "white": RGB(255, 255, 255), "on": RGB(255, 255, 255),
        "red": RGB(255, 0, 0), "green": RGB(0, 255, 0), "blue": RGB(0, 0, 255), "yellow": RGB(255, 255, 0),
        "cyan": RGB(0, 255, 255), "magenta": RGB(255, 0, 255), "orange": RGB(255, 165, 0), "purple": RGB(128, 0, 128),
        "pink": RGB(255, 192, 203),
    ]

    /// Why a colour did not parse.
    public struct ParseError: Error, Sendable { public var message: String }

    /// Parses a colour, or says why it is not one.
    public static func parse(_ text: String) -> Result<RGB, ParseError> {
        let t = text.trimmingWhitespace().lowercased()
        if let n = names[t] { return .success(n) }
        if t.hasPrefix("#") || (t.count == 6 && t.allSatisfy(\.isHexDigit)) {
            let h = t.hasPrefix("#") ? String(t.dropFirst()) : t
            guard h.count == 6, let bytes = Hex.parse(h), bytes.count == 3 else { return .failure(ParseError(message: "'\(text)' is not a #rrggbb colour")) }
            return .success(RGB(bytes[0], bytes[1], bytes[2]))
        }
        let parts = t.split(separator: ",", omittingEmptySubsequences: false)
        guard parts.count == 3 else {
            return .failure(ParseError(message: "'\(text)' is not a colour: use R,G,B (0-255 each), #rrggbb, or one of \(names.keys.sorted().joined(separator: ", "))"))
        }
        var v: [UInt8] = []
        for p in parts {
            let s = p.trimmingWhitespace()
            guard let n = Int(s), (0...255).contains(n) else { return .failure(ParseError(message: "'\(s)' in '\(text)' is not a number from 0 to 255")) }
            v.append(UInt8(n))
        }
        return .success(RGB(v[0], v[1], v[2]))
    }

    public var hex: String { "#" + Hex.string([r, g, b], separator: "") }
    public var description: String { "\(r),\(g),\(b) (\(hex))" }
}

extension StringProtocol {
    func trimmingWhitespace() -> String {
        var s = Substring(self)
        while let f = s.first, f.isWhitespace { s.removeFirst() }
        while let l = s.last, l.isWhitespace { s.removeLast() }
        return String(s)
    }
}
