import BLEWire
import BLEATT
import BLEGATT
import BLESMP

/// What a client may do with an attribute (Core Vol 3 Part F 3.2.5), and
/// the security it needs for it.
public struct AttributePermissions: OptionSet, Hashable, Sendable {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    public static let read = AttributePermissions(rawValue: 0x01)
    public static let write = AttributePermissions(rawValue: 0x02)
    /// Reading needs an encrypted link.
    public static let readEncrypted = AttributePermissions(rawValue: 0x04)
    /// Writing needs an encrypted link.
    public static let writeEncrypted = AttributePermissions(rawValue: 0x08)

    /// Readable and writable only over an encrypted link.
    public static let encrypted: AttributePermissions = [.readEncrypted, .writeEncrypted]
}

/// One attribute of the server's database: handle, type, value, permissions.
public struct Attribute: Hashable, Sendable {
    public let handle: UInt16
    public let type: BluetoothUUID
    /// The value all clients share (per-client values live in the session).
    public var value: [UInt8]
    public var permissions: AttributePermissions
    /// The longest value a write may leave (Core Vol 3 Part F 3.2.9: 512).
    public var maxLength: Int
    /// Each client has its own value (a CCCD, Client Supported Features).
    public var perClient: Bool

    public init(handle: UInt16, type: BluetoothUUID, value: [UInt8], permissions: AttributePermissions,
                maxLength: Int = 512, perClient: Bool = false) {
        self.handle = handle; self.type = type; self.value = value; self.permissions = permissions
        self.maxLength = maxLength; self.perClient = perClient
    }

    /// A service declaration (0x2800 or 0x2801): it opens a group.
    public var isServiceDeclaration: Bool { type == GATTUUID.primaryService || type == GATTUUID.secondaryService }
}

/// A characteristic as the server knows it: where its declaration, value
/// and descriptors are, and its properties.
public struct ServedCharacteristic: Hashable, Sendable {
    public let declarationHandle: UInt16
    public let valueHandle: UInt16
    public let uuid: BluetoothUUID
    public let properties: CharacteristicProperties
    /// Its Client Characteristic Configuration descriptor, if it has one.
    public let cccdHandle: UInt16?
    /// The last handle of the characteristic (its last descriptor, or the value).
    public let end: UInt16
}

/// The server's attributes in handle order, with the groups and
/// characteristics they form; built from definitions (`GATTServerDatabase(services:)`).
public struct GATTServerDatabase: Sendable {
    /// Every attribute, handles strictly increasing.
    public private(set) var attributes: [Attribute]
    /// The services: declaration handle and group end.
    public let groups: [(start: UInt16, end: UInt16, type: BluetoothUUID)]
    public let characteristics: [ServedCharacteristic]

    init(attributes: [Attribute], groups: [(UInt16, UInt16, BluetoothUUID)], characteristics: [ServedCharacteristic]) {
        self.attributes = attributes
        self.groups = groups.map { (start: $0.0, end: $0.1, type: $0.2) }
        self.characteristics = characteristics
    }

    /// The index of the attribute with `handle`.
    func index(_ handle: UInt16) -> Int? {
        var lo = 0, hi = attributes.count - 1
        while lo <= hi {
            let mid = (lo + hi) / 2
            let h = attributes[mid].handle
            if h == handle { return mid }
            if h < handle { lo = mid + 1 } else { hi = mid - 1 }
        }
        return nil
    }

    public subscript(handle: UInt16) -> Attribute? { index(handle).map { attributes[$0] } }

    /// The attributes with handles in `start...end`, in order.
    public func range(_ start: UInt16, _ end: UInt16) -> ArraySlice<Attribute> {
        guard start <= end, let first = attributes.firstIndex(where: { $0.handle >= start }) else { return [] }
        let last = attributes[first...].firstIndex(where: { $0.handle > end }) ?? attributes.endIndex
        return attributes[first..<last]
    }

    /// The database with every characteristic value outside the GAP and
    /// GATT services (and their CCCDs) behind encryption (`--secure`).
    public func requiringEncryption() -> GATTServerDatabase {
        var copy = self
        let standard: Set<BluetoothUUID> = [BluetoothUUID(uint16: 0x1800), BluetoothUUID(uint16: 0x1801)]
        for g in groups where !standard.contains(g.type) {
            for c in characteristics where c.valueHandle > g.start && c.valueHandle <= g.end {
                for h in [c.valueHandle] + (c.cccdHandle.map { [$0] } ?? []) {
                    if let i = copy.index(h) { copy.attributes[i].permissions.formUnion(.encrypted) }
                }
            }
        }
        return copy
    }

    /// Sets a shared value.
    mutating func set(_ handle: UInt16, _ value: [UInt8]) {
        if let i = index(handle) { attributes[i].value = value }
    }

    /// The end of the group `handle` opens (a service declaration), or `handle` itself.
    public func groupEnd(_ handle: UInt16) -> UInt16 { groups.first { $0.start == handle }?.end ?? handle }

    /// The characteristic whose value is at `handle`, or whose CCCD is.
    public func characteristic(value handle: UInt16) -> ServedCharacteristic? { characteristics.first { $0.valueHandle == handle } }
    public func characteristic(cccd handle: UInt16) -> ServedCharacteristic? { characteristics.first { $0.cccdHandle == handle } }

    // MARK: Database Hash (Core Vol 3 Part G 7.3)

    /// The octets the hash covers: for every service, include and
    /// characteristic declaration and Characteristic Extended Properties,
    /// handle, type and value; for every User Description, CCCD, SCCD,
    /// Presentation Format and Aggregate Format descriptor, handle and type;
    /// nothing of the others. Handles and 16-bit types least significant first.
    public var hashInput: [UInt8] {
        var w = ByteWriter()
        for a in attributes {
            guard let t = a.type.uint16 else { continue }
            switch t {
            case 0x2800, 0x2801, 0x2802, 0x2803, 0x2900: w.u16(a.handle); w.u16(t); w.append(a.value)
            case 0x2901, 0x2902, 0x2903, 0x2904, 0x2905: w.u16(a.handle); w.u16(t)
            default: break
            }
        }
        return w.bytes
    }

    /// AES-CMAC with a zero key over `hashInput`, least significant octet
    /// first (as the Database Hash characteristic carries it).
    /// - Throws: `SMPCryptoError` when libcrypto fails.
    public func databaseHash() throws -> [UInt8] {
        Array(try SMPCrypto.aesCMAC(key: [UInt8](repeating: 0, count: 16), message: hashInput).reversed())
    }
}
