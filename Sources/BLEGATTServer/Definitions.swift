import BLEWire
import BLEATT
import BLEGATT

/// A descriptor to serve. `handle` nil: the next free one.
public struct DescriptorDefinition: Sendable {
    public var uuid: BluetoothUUID
    public var value: [UInt8]
    public var permissions: AttributePermissions
    public var handle: UInt16?
    public init(uuid: BluetoothUUID, value: [UInt8] = [], permissions: AttributePermissions = .read, handle: UInt16? = nil) {
        self.uuid = uuid; self.value = value; self.permissions = permissions; self.handle = handle
    }
}

/// A characteristic to serve: its declaration, value and descriptors. A
/// characteristic that notifies or indicates gets a CCCD (one value per
/// client) unless `descriptors` has one. Handles nil: the next free ones.
public struct CharacteristicDefinition: Sendable {
    public var uuid: BluetoothUUID
    public var properties: CharacteristicProperties
    public var value: [UInt8]
    /// nil: from the properties (read; write for write and write without response).
    public var permissions: AttributePermissions?
    public var maxLength: Int
    /// Each client sees its own value (Client Supported Features).
    public var perClient: Bool
    public var descriptors: [DescriptorDefinition]
    public var declarationHandle: UInt16?
    public var valueHandle: UInt16?

    public init(uuid: BluetoothUUID, properties: CharacteristicProperties, value: [UInt8] = [], permissions: AttributePermissions? = nil,
                maxLength: Int = 512, perClient: Bool = false, descriptors: [DescriptorDefinition] = [],
                declarationHandle: UInt16? = nil, valueHandle: UInt16? = nil) {
        self.uuid = uuid; self.properties = properties; self.value = value; self.permissions = permissions
        self.maxLength = maxLength; self.perClient = perClient; self.descriptors = descriptors
        self.declarationHandle = declarationHandle; self.valueHandle = valueHandle
    }

    /// The permissions the properties imply.
    public var effectivePermissions: AttributePermissions {
        if let permissions { return permissions }
        var p: AttributePermissions = []
        if properties.contains(.read) { p.insert(.read) }
        if !properties.isDisjoint(with: [.write, .writeWithoutResponse, .authenticatedSignedWrites]) { p.insert(.write) }
        return p
    }
}

/// An include declaration: the service with UUID `uuid` starting at `start`
/// (resolved when the database is built), at `handle` or the next free one.
public struct IncludeDefinition: Sendable {
    public var uuid: BluetoothUUID
    public var handle: UInt16?
    /// The included service's start handle; nil: the first service with `uuid`.
    public var start: UInt16?
    public init(uuid: BluetoothUUID, handle: UInt16? = nil, start: UInt16? = nil) { self.uuid = uuid; self.handle = handle; self.start = start }
}

/// A service to serve. `handle` nil: the next free one; `end` nil: its last attribute.
public struct ServiceDefinition: Sendable {
    public var uuid: BluetoothUUID
    public var primary: Bool
    public var includes: [IncludeDefinition]
    public var characteristics: [CharacteristicDefinition]
    public var handle: UInt16?
    public var end: UInt16?
    public init(uuid: BluetoothUUID, primary: Bool = true, includes: [IncludeDefinition] = [],
                characteristics: [CharacteristicDefinition], handle: UInt16? = nil, end: UInt16? = nil) {
        self.uuid = uuid; self.primary = primary; self.includes = includes; self.characteristics = characteristics
        self.handle = handle; self.end = end
    }
}

/// A database that cannot be served as defined.
public struct GATTDatabaseError: Error, Equatable, Sendable, CustomStringConvertible {
    public let reason: String
    public init(_ reason: String) { self.reason = reason }
    public var description: String { "invalid GATT database: \(reason)" }
}

extension GATTServerDatabase {
    /// Lays the services out: declarations, values and descriptors at their
    /// given handles or the next free ones, in order.
    /// - Throws: `GATTDatabaseError` when handles are not strictly
    ///   increasing, a group end is before its last attribute, an include
    ///   names no service, or the handles run past 0xFFFF.
    public init(services: [ServiceDefinition]) throws {
        var attrs: [Attribute] = []
        var groups: [(UInt16, UInt16, BluetoothUUID)] = []
        var chars: [ServedCharacteristic] = []
        var next = 1
        func take(_ wanted: UInt16?, _ what: String) throws -> UInt16 {
            let h = wanted.map(Int.init) ?? next
            guard h >= next else { throw GATTDatabaseError("\(what) at 0x\(Hex.int(UInt16(truncatingIfNeeded: h), width: 4)) is not after the attribute before it") }
            guard h <= 0xFFFF else { throw GATTDatabaseError("\(what) does not fit below handle 0xFFFF") }
            next = h + 1
            return UInt16(h)
        }
        var pendingIncludes: [(index: Int, def: IncludeDefinition)] = []
        for s in services {
            let start = try take(s.handle, "service \(s.uuid)")
            attrs.append(Attribute(handle: start, type: s.primary ? GATTUUID.primaryService : GATTUUID.secondaryService,
                                   value: s.uuid.attWire, permissions: .read))
            for inc in s.includes {
                let h = try take(inc.handle, "include of \(inc.uuid)")
                pendingIncludes.append((attrs.count, inc))
                attrs.append(Attribute(handle: h, type: GATTUUID.include, value: [], permissions: .read))
            }
            for c in s.characteristics {
                let decl = try take(c.declarationHandle, "declaration of \(c.uuid)")
                let valueHandle = try take(c.valueHandle, "value of \(c.uuid)")
                var dv = ByteWriter()
                dv.u8(c.properties.rawValue); dv.u16(valueHandle); dv.append(c.uuid.attWire)
                attrs.append(Attribute(handle: decl, type: GATTUUID.characteristic, value: dv.bytes, permissions: .read))
                attrs.append(Attribute(handle: valueHandle, type: c.uuid, value: c.value, permissions: c.effectivePermissions,
                                       maxLength: c.maxLength, perClient: c.perClient))
                var descriptors = c.descriptors
                let cccdType = GATTUUID.clientCharacteristicConfiguration
                if !c.properties.isDisjoint(with: [.notify, .indicate]), !descriptors.contains(where: { $0.uuid == cccdType }) {
                    descriptors.insert(DescriptorDefinition(uuid: cccdType), at: 0)
                }
                var cccd: UInt16? = nil
                for d in descriptors {
                    let h = try take(d.handle, "descriptor \(d.uuid) of \(c.uuid)")
                    let isCCCD = d.uuid == cccdType
                    if isCCCD, cccd == nil { cccd = h }
                    // A CCCD is each client's own, readable and writable (with the value's security).
                    let perm: AttributePermissions = isCCCD
                        ? AttributePermissions([.read, .write]).union(c.effectivePermissions.intersection([.readEncrypted, .writeEncrypted])) : d.permissions
                    attrs.append(Attribute(handle: h, type: d.uuid, value: isCCCD ? [0, 0] : d.value, permissions: perm,
                                           maxLength: isCCCD ? 2 : 512, perClient: isCCCD))
                }
                chars.append(ServedCharacteristic(declarationHandle: decl, valueHandle: valueHandle, uuid: c.uuid, properties: c.properties,
                                                  cccdHandle: cccd, end: UInt16(next - 1)))
            }
            let last = UInt16(next - 1)
            if let e = s.end {
                guard e >= last else { throw GATTDatabaseError("service \(s.uuid) ends at 0x\(Hex.int(e, width: 4)), before its last attribute 0x\(Hex.int(last, width: 4))") }
                next = Int(e) + 1
            }
            groups.append((start, s.end ?? last, s.uuid))
        }
        for (i, inc) in pendingIncludes {
            guard let g = groups.first(where: { $0.2 == inc.uuid && (inc.start == nil || $0.0 == inc.start) }) else {
                throw GATTDatabaseError("an include names service \(inc.uuid), which is not in the database")
            }
            var w = ByteWriter()
            w.u16(g.0); w.u16(g.1)
            if let u = inc.uuid.uint16 { w.u16(u) }
            attrs[i].value = w.bytes
        }
        self.init(attributes: attrs, groups: groups, characteristics: chars)
    }
}
