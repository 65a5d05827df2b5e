import BLEWire

/// An AD type (Bluetooth Assigned Numbers 2.3; Core Supplement Part A). Open.
public struct ADType: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt8
    /// Any AD type byte, including ones not named below.
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    public static let flags = ADType(rawValue: 0x01)
    public static let incomplete16 = ADType(rawValue: 0x02)
    public static let complete16 = ADType(rawValue: 0x03)
    public static let incomplete32 = ADType(rawValue: 0x04)
    public static let complete32 = ADType(rawValue: 0x05)
    public static let incomplete128 = ADType(rawValue: 0x06)
    public static let complete128 = ADType(rawValue: 0x07)
    public static let shortenedName = ADType(rawValue: 0x08)
    public static let completeName = ADType(rawValue: 0x09)
    public static let txPower = ADType(rawValue: 0x0A)
    public static let classOfDevice = ADType(rawValue: 0x0D)
    public static let peripheralConnectionIntervalRange = ADType(rawValue: 0x12)
    public static let solicitation16 = ADType(rawValue: 0x14)
    public static let solicitation128 = ADType(rawValue: 0x15)
    public static let serviceData16 = ADType(rawValue: 0x16)
    public static let publicTargetAddress = ADType(rawValue: 0x17)
    public static let randomTargetAddress = ADType(rawValue: 0x18)
    public static let appearance = ADType(rawValue: 0x19)
    public static let advertisingInterval = ADType(rawValue: 0x1A)
    public static let leBluetoothDeviceAddress = ADType(rawValue: 0x1B)
    public static let leRole = ADType(rawValue: 0x1C)
    public static let solicitation32 = ADType(rawValue: 0x1F)
    public static let serviceData32 = ADType(rawValue: 0x20)
    public static let serviceData128 = ADType(rawValue: 0x21)
    public static let uri = ADType(rawValue: 0x24)
    public static let manufacturerData = ADType(rawValue: 0xFF)

    static let names: [UInt8: String] = [
        0x01: "Flags", 0x02: "Incomplete List of 16-bit Service UUIDs", 0x03: "Complete List of 16-bit Service UUIDs",
        0x04: "Incomplete List of 32-bit Service UUIDs", 0x05: "Complete List of 32-bit Service UUIDs",
        0x06: "Incomplete List of 128-bit Service UUIDs", 0x07: "Complete List of 128-bit Service UUIDs",
        0x08: "Shortened Local Name", 0x09: "Complete Local Name", 0x0A: "Tx Power Level", 0x0D: "Class of Device",
        0x10: "Device ID", 0x12: "Peripheral Connection Interval Range", 0x14: "List of 16-bit Service Solicitation UUIDs",
        0x15: "List of 128-bit Service Solicitation UUIDs", 0x16: "Service Data - 16-bit UUID",
        0x17: "Public Target Address", 0x18: "Random Target Address", 0x19: "Appearance", 0x1A: "Advertising Interval",
        0x1B: "LE Bluetooth Device Address", 0x1C: "LE Role", 0x1F: "List of 32-bit Service Solicitation UUIDs",
        0x20: "Service Data - 32-bit UUID", 0x21: "Service Data - 128-bit UUID", 0x24: "URI",
        0x2A: "Mesh Message", 0x2B: "Mesh Beacon", 0x2C: "BIGInfo", 0x2D: "Broadcast Code", 0x30: "Broadcast Name",
        0xFF: "Manufacturer Specific Data",
    ]
    public var name: String { Self.names[rawValue] ?? "Unknown AD type" }
    public var description: String { "\(name) (0x\(Hex.int(rawValue, width: 2)))" }
}

/// One decoded AD structure.
public enum ADField: Hashable, Sendable {
    case flags(UInt8)
    case serviceUUIDs([BluetoothUUID], complete: Bool)
    case solicitationUUIDs([BluetoothUUID])
    case localName(String, complete: Bool)
    case txPower(Int8)
    case appearance(UInt16)
    case manufacturerData(company: UInt16, data: [UInt8])
    case serviceData(uuid: BluetoothUUID, data: [UInt8])
    case uri(String)
    case advertisingInterval(UInt32)
    case connectionIntervalRange(min: UInt16, max: UInt16)
    case targetAddresses([BDAddress], random: Bool)
    case leRole(UInt8)
    case classOfDevice(UInt32)
    case leAddress(BDAddress, random: Bool)
    /// A type attled does not decode, or one whose contents were malformed.
    case raw([UInt8])
}

/// An AD structure as it appeared: its type, its bytes, its decoding.
public struct ADStructure: Hashable, Sendable {
    public var type: ADType
    public var data: [UInt8]
    public var field: ADField
    /// Why `field` is `.raw` for a type attled knows (malformed contents).
    public var problem: String?
}

/// Advertising or scan response data: a sequence of length-type-value AD
/// structures (Core Vol 3 Part C 11). Malformed input is reported in
/// `problems`, never trusted and never trapped on.
public struct AdvertisingData: Hashable, Sendable {
    public var structures: [ADStructure] = []
    public var problems: [String] = []

    /// Empty data: no structures, no problems.
    public init() {}

    /// Splits `bytes` into AD structures and decodes the known types. Parsing
    /// stops at a zero length octet (the rest should be zero padding) or at a
    /// structure that overruns the input; each irregularity is added to `problems`.
    public init(_ bytes: [UInt8]) {
        var i = 0
        while i < bytes.count {
            let len = Int(bytes[i])
            if len == 0 {
                // A zero length ends the significant part; anything after should be zero padding.
                if bytes[(i + 1)...].contains(where: { $0 != 0 }) {
                    problems.append("zero-length AD structure at offset \(i); \(bytes.count - i - 1) byte(s) after it ignored")
                }
                break
            }
            guard i + 1 + len <= bytes.count else {
                problems.append("AD structure at offset \(i) claims \(len) byte(s) but only \(bytes.count - i - 1) remain")
                break
            }
            let type = ADType(rawValue: bytes[i + 1])
            let data = Array(bytes[(i + 2)..<(i + 1 + len)])
            let (field, problem) = Self.decode(type, data)
            structures.append(ADStructure(type: type, data: data, field: field, problem: problem))
            if let p = problem { problems.append("\(type.name) at offset \(i): \(p)") }
            i += 1 + len
        }
    }

    static func uuids(_ data: [UInt8], width: Int) -> [BluetoothUUID]? {
        guard data.count % width == 0 else { return nil }
        return stride(from: 0, to: data.count, by: width).compactMap { BluetoothUUID(wire: Array(data[$0..<$0 + width])) }
    }

    static func text(_ data: [UInt8]) -> String {
        var d = data
        while d.last == 0 { d.removeLast() }
        return String(decoding: d, as: UTF8.self)
    }

    static func decode(_ type: ADType, _ data: [UInt8]) -> (ADField, String?) {
        func bad(_ why: String) -> (ADField, String?) { (.raw(data), why) }
        var r = ByteReader(data)
        switch type {
        case .flags:
            guard data.count >= 1 else { return bad("empty") }
            return (.flags(data[0]), nil)
        case .incomplete16, .complete16, .incomplete32, .complete32, .incomplete128, .complete128:
            let w = [2, 2, 4, 4, 16, 16][Int(type.rawValue) - 2]
            guard let list = uuids(data, width: w) else { return bad("\(data.count) bytes is not a multiple of \(w)") }
            return (.serviceUUIDs(list, complete: type.rawValue & 1 == 1), nil)
        case .solicitation16, .solicitation32, .solicitation128:
            let w = type == .solicitation16 ? 2 : type == .solicitation32 ? 4 : 16
            guard let list = uuids(data, width: w) else { return bad("\(data.count) bytes is not a multiple of \(w)") }
            return (.solicitationUUIDs(list), nil)
        case .shortenedName, .completeName:
            return (.localName(text(data), complete: type == .completeName), nil)
        case .txPower:
            guard data.count == 1 else { return bad("expected 1 byte") }
            return (.txPower(Int8(bitPattern: data[0])), nil)
        case .appearance:
            guard data.count == 2, let v = try? r.u16() else { return bad("expected 2 bytes") }
            return (.appearance(v), nil)
        case .manufacturerData:
            guard data.count >= 2, let c = try? r.u16() else { return bad("shorter than the 2-byte company identifier") }
            return (.manufacturerData(company: c, data: r.rest()), nil)
        case .serviceData16, .serviceData32, .serviceData128:
            let w = type == .serviceData16 ? 2 : type == .serviceData32 ? 4 : 16
            guard data.count >= w, let u = BluetoothUUID(wire: Array(data[0..<w])) else { return bad("shorter than its \(w)-byte UUID") }
            return (.serviceData(uuid: u, data: Array(data[w...])), nil)
        case .uri:
            guard !data.isEmpty else { return bad("empty") }
            return (.uri(uriText(data)), nil)
        case .advertisingInterval:
            guard (2...4).contains(data.count) else { return bad("expected 2 to 4 bytes") }
            var v: UInt32 = 0
            for (k, b) in data.enumerated() { v |= UInt32(b) << (8 * UInt32(k)) }
            return (.advertisingInterval(v), nil)
        case .peripheralConnectionIntervalRange:
            guard data.count == 4, let a = try? r.u16(), let b = try? r.u16() else { return bad("expected 4 bytes") }
            return (.connectionIntervalRange(min: a, max: b), nil)
        case .publicTargetAddress, .randomTargetAddress:
            guard data.count % 6 == 0, !data.isEmpty else { return bad("not a multiple of 6 bytes") }
            let list = stride(from: 0, to: data.count, by: 6).map { BDAddress(wire: Array(data[$0..<$0 + 6])) }
            return (.targetAddresses(list, random: type == .randomTargetAddress), nil)
        case .leRole:
            guard data.count == 1 else { return bad("expected 1 byte") }
            return (.leRole(data[0]), nil)
        case .classOfDevice:
            guard data.count == 3, let v = try? r.u24() else { return bad("expected 3 bytes") }
            return (.classOfDevice(v), nil)
        case .leBluetoothDeviceAddress:
            guard data.count == 7 else { return bad("expected 7 bytes") }
            return (.leAddress(BDAddress(wire: Array(data[0..<6])), random: data[6] & 1 == 1), nil)
        default:
            return (.raw(data), nil)
        }
    }

    /// URI: first byte is a scheme code from Assigned Numbers (0x01 = empty scheme), rest UTF-8.
    static func uriText(_ data: [UInt8]) -> String {
        let schemes: [UInt8: String] = [0x01: "", 0x16: "http:", 0x17: "https:", 0x0A: "coap:", 0x0B: "coaps:",
                                        0x25: "mailto:", 0x2D: "tel:", 0x14: "ftp:", 0x18: "irc:"]
        let body = text(Array(data.dropFirst()))
        if let s = schemes[data[0]] { return s + body }
        return "scheme(0x\(Hex.int(data[0], width: 2)))" + body
    }

    // MARK: convenience views

    /// The complete local name, else the shortened one.
    public var localName: String? {
        var short: String? = nil
        for s in structures {
            if case let .localName(n, complete) = s.field {
                if complete { return n }
                short = short ?? n
            }
        }
        return short
    }

    public var isNameComplete: Bool {
        structures.contains { if case .localName(_, true) = $0.field { return true } else { return false } }
    }

    /// Every advertised service UUID, complete and incomplete lists, in order.
    public var serviceUUIDs: [BluetoothUUID] {
        var out: [BluetoothUUID] = []
        for s in structures { if case let .serviceUUIDs(l, _) = s.field { for u in l where !out.contains(u) { out.append(u) } } }
        return out
    }

    public var flags: UInt8? {
        for s in structures { if case let .flags(f) = s.field { return f } }
        return nil
    }

    public var txPower: Int8? {
        for s in structures { if case let .txPower(t) = s.field { return t } }
        return nil
    }

    public var appearance: UInt16? {
        for s in structures { if case let .appearance(a) = s.field { return a } }
        return nil
    }

    public var manufacturerData: [(company: UInt16, data: [UInt8])] {
        structures.compactMap { if case let .manufacturerData(c, d) = $0.field { return (c, d) } else { return nil } }
    }

    public var serviceData: [(uuid: BluetoothUUID, data: [UInt8])] {
        structures.compactMap { if case let .serviceData(u, d) = $0.field { return (u, d) } else { return nil } }
    }

    /// Flags bits as words (Core Supplement Part A 1.3).
    public static func flagNames(_ f: UInt8) -> [String] {
        let names = ["LE Limited Discoverable", "LE General Discoverable", "BR/EDR Not Supported",
                     "LE and BR/EDR Controller", "LE and BR/EDR Host"]
        return (0..<8).compactMap { f & (1 << UInt8($0)) != 0 ? ($0 < names.count ? names[$0] : "bit \($0)") : nil }
    }

    // MARK: encoding (tests, tools)

    /// Encodes fields back to AD bytes.
    public static func encode(_ items: [(ADType, [UInt8])]) -> [UInt8] {
        var out: [UInt8] = []
        for (t, d) in items { out.append(UInt8(truncatingIfNeeded: d.count + 1)); out.append(t.rawValue); out += d }
        return out
    }
}
