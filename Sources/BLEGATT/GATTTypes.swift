import BLEWire

/// Well-known GATT attribute types (Assigned Numbers 3.5, 3.8).
public enum GATTUUID {
    public static let primaryService = BluetoothUUID(uint16: 0x2800)
    public static let secondaryService = BluetoothUUID(uint16: 0x2801)
    public static let include = BluetoothUUID(uint16: 0x2802)
    public static let characteristic = BluetoothUUID(uint16: 0x2803)
    public static let extendedProperties = BluetoothUUID(uint16: 0x2900)
    public static let userDescription = BluetoothUUID(uint16: 0x2901)
    public static let clientCharacteristicConfiguration = BluetoothUUID(uint16: 0x2902)
    public static let presentationFormat = BluetoothUUID(uint16: 0x2904)
    public static let deviceName = BluetoothUUID(uint16: 0x2A00)
    public static let appearance = BluetoothUUID(uint16: 0x2A01)
    public static let serviceChanged = BluetoothUUID(uint16: 0x2A05)
    public static let databaseHash = BluetoothUUID(uint16: 0x2B2A)

    /// A human name for well-known 16-bit UUIDs, nil otherwise: the one
    /// table in BLEWire (`BluetoothUUID.assignedName`).
    public static func name(_ u: BluetoothUUID) -> String? { u.assignedName }
}

/// Characteristic properties (Core Vol 3 Part G 3.3.1.1).
public struct CharacteristicProperties: OptionSet, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt8
    /// Properties from the bit field of a Characteristic declaration.
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    public static let broadcast = CharacteristicProperties(rawValue: 0x01)
    public static let read = CharacteristicProperties(rawValue: 0x02)
    public static let writeWithoutResponse = CharacteristicProperties(rawValue: 0x04)
    public static let write = CharacteristicProperties(rawValue: 0x08)
    public static let notify = CharacteristicProperties(rawValue: 0x10)
    public static let indicate = CharacteristicProperties(rawValue: 0x20)
    public static let authenticatedSignedWrites = CharacteristicProperties(rawValue: 0x40)
    public static let extendedProperties = CharacteristicProperties(rawValue: 0x80)

    /// The names of the set bits in bit order ("read", "write", ...): the one
    /// list the CLI and the tracer print.
    public var names: [String] {
        let all = ["broadcast", "read", "write-without-response", "write", "notify", "indicate", "signed-write", "extended"]
        return (0..<8).compactMap { rawValue & (1 << UInt8($0)) != 0 ? all[$0] : nil }
    }
    /// The names joined by commas, without spaces.
    public var description: String { names.joined(separator: ",") }
}

/// A service: its UUID, handle range, and whether it is primary (declared
/// with 0x2800) or secondary (0x2801, reachable only through an include).
public struct Service: Hashable, Sendable {
    public var uuid: BluetoothUUID
    public var start: UInt16
    public var end: UInt16
    /// False for a secondary service (Core Vol 3 Part G 3.1).
    public var isPrimary: Bool
    /// A service from its UUID and its first and last attribute handles.
    public init(uuid: BluetoothUUID, start: UInt16, end: UInt16, isPrimary: Bool = true) {
        self.uuid = uuid; self.start = start; self.end = end; self.isPrimary = isPrimary
    }
}

/// An include declaration (Core Vol 3 Part G 3.2): where it sits, and the
/// service it includes.
public struct IncludedService: Hashable, Sendable {
    /// The handle of the include declaration itself.
    public var handle: UInt16
    /// The included service's UUID (read from its declaration when the
    /// include omits it, as it must for 128-bit UUIDs).
    public var uuid: BluetoothUUID
    /// The included service's first handle.
    public var start: UInt16
    /// The included service's last handle.
    public var end: UInt16
    /// An include from its declaration handle and the included service.
    public init(handle: UInt16, uuid: BluetoothUUID, start: UInt16, end: UInt16) {
        self.handle = handle; self.uuid = uuid; self.start = start; self.end = end
    }
}

/// A characteristic: declaration handle, properties, value handle, UUID, and
/// the last handle that belongs to it (known once the next declaration or the
/// service end is seen).
public struct Characteristic: Hashable, Sendable {
    public var declarationHandle: UInt16
    public var properties: CharacteristicProperties
    public var valueHandle: UInt16
    public var uuid: BluetoothUUID
    public var end: UInt16
    /// A characteristic from its declaration fields and the last handle that belongs to it.
    public init(declarationHandle: UInt16, properties: CharacteristicProperties, valueHandle: UInt16, uuid: BluetoothUUID, end: UInt16) {
        self.declarationHandle = declarationHandle; self.properties = properties
        self.valueHandle = valueHandle; self.uuid = uuid; self.end = end
    }

    /// Decodes a Characteristic declaration value (3.3.1): properties, value handle, UUID.
    /// - Throws: `WireError` if the value is truncated, the UUID is not 2 or 16
    ///   bytes, or the value handle does not come after the declaration handle.
    /// - Returns: the characteristic with `end` set to 0xFFFF, to be narrowed by the caller.
    public static func decodeDeclaration(handle: UInt16, value: [UInt8]) throws -> Characteristic {
        var r = ByteReader(value)
        let p = CharacteristicProperties(rawValue: try r.u8("Characteristic Properties"))
        let vh = try r.u16("Characteristic Value Handle")
        let u = r.rest()
        guard let uuid = BluetoothUUID(wire: u), u.count == 2 || u.count == 16 else {
            throw WireError.invalid(field: "Characteristic UUID", reason: "\(u.count) bytes (must be 2 or 16)")
        }
        guard vh > handle else { throw WireError.invalid(field: "Characteristic Value Handle", reason: "0x\(Hex.int(vh, width: 4)) is not after its declaration 0x\(Hex.int(handle, width: 4))") }
        return Characteristic(declarationHandle: handle, properties: p, valueHandle: vh, uuid: uuid, end: 0xFFFF)
    }
}

/// A characteristic descriptor.
public struct Descriptor: Hashable, Sendable {
    public var handle: UInt16
    public var uuid: BluetoothUUID
    /// A descriptor from its handle and type (as Find Information reports them).
    public init(handle: UInt16, uuid: BluetoothUUID) { self.handle = handle; self.uuid = uuid }
}

/// Failures of GATT procedures above ATT.
public enum GATTError: Error, Equatable, Sendable, CustomStringConvertible {
    case serviceNotFound(BluetoothUUID)
    case characteristicNotFound(BluetoothUUID, service: BluetoothUUID)
    case noClientConfiguration(BluetoothUUID)
    case notPermitted(BluetoothUUID, operation: String, properties: CharacteristicProperties)
    case discoveryStalled(procedure: String, handle: UInt16)
    case malformed(procedure: String, reason: String)
    /// Several characteristics have this UUID; their value handles (and services).
    case ambiguous(BluetoothUUID, candidates: [Candidate])
    /// A Prepare Write Response did not echo the part sent (Core Vol 3 Part G
    /// 4.9.4); the prepared writes were cancelled with Execute Write (flags 0).
    case prepareWriteMismatch(handle: UInt16, offset: UInt16)
    /// A value longer than an attribute may hold (512 bytes, Core Vol 3 Part F 3.2.9).
    case valueTooLong(size: Int, limit: Int)
    /// No characteristic or descriptor has this handle.
    case noSuchHandle(UInt16)

    /// One characteristic that matched an ambiguous UUID.
    public struct Candidate: Hashable, Sendable {
        /// Its value handle.
        public var handle: UInt16
        /// The UUID of the service that holds it.
        public var service: BluetoothUUID
        /// A candidate from its value handle and service UUID.
        public init(handle: UInt16, service: BluetoothUUID) { self.handle = handle; self.service = service }
    }

    public var description: String {
        switch self {
        case .serviceNotFound(let u): return "the device has no service \(u)"
        case let .characteristicNotFound(u, s): return "service \(s) has no characteristic \(u)"
        case .noClientConfiguration(let u): return "characteristic \(u) has no Client Characteristic Configuration descriptor: it cannot be subscribed to"
        case let .notPermitted(u, op, p): return "characteristic \(u) does not allow \(op) (its properties: \(p.description.isEmpty ? "none" : p.description))"
        case let .discoveryStalled(proc, h): return "\(proc) stopped advancing at handle 0x\(Hex.int(h, width: 4)) (server bug); discovery abandoned"
        case let .malformed(proc, reason): return "malformed response during \(proc): \(reason)"
        case let .ambiguous(u, cs):
            let list = cs.map { "0x\(Hex.int($0.handle, width: 4)) (service \($0.service))" }.joined(separator: ", ")
            return "\(cs.count) characteristics have UUID \(u): value handles \(list)"
        case let .prepareWriteMismatch(h, o):
            return "the device echoed a different Prepare Write part for handle 0x\(Hex.int(h, width: 4)) at offset \(o): the prepared writes were cancelled (Execute Write, flags 0) and nothing was written"
        case let .valueTooLong(n, limit): return "a value of \(n) bytes is longer than an attribute may hold (\(limit) bytes)"
        case .noSuchHandle(let h): return "no characteristic has value handle 0x\(Hex.int(h, width: 4))"
        }
    }
}
