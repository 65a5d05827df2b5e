import BLEWire
import BLEATT

/// The value of an include declaration (Core Vol 3 Part G 3.2): the included
/// service's handle range and, for a 16-bit service UUID only, the UUID.
public struct IncludeDeclaration: Hashable, Sendable {
    /// The included service's declaration handle (Included Service Attribute Handle).
    public var start: UInt16
    /// The included service's End Group Handle.
    public var end: UInt16
    /// The included service's UUID; nil when the declaration leaves it out, as
    /// it must for a 128-bit UUID (read it from the service declaration at `start`).
    public var uuid: BluetoothUUID?

    /// An include from the included service's range and optional 16-bit UUID.
    public init(start: UInt16, end: UInt16, uuid: BluetoothUUID?) {
        self.start = start; self.end = end; self.uuid = uuid
    }

    /// Decodes an include declaration value: 4 bytes, or 6 with a 16-bit UUID.
    /// - Throws: `WireError` when the value is shorter than 4 bytes, its UUID
    ///   part is not 0 or 2 bytes, or the range is empty or starts at 0x0000.
    public static func decode(_ value: [UInt8]) throws -> IncludeDeclaration {
        var r = ByteReader(value)
        let s = try r.u16("Included Service Attribute Handle")
        let e = try r.u16("End Group Handle")
        guard s > 0, e >= s else {
            throw WireError.invalid(field: "End Group Handle", reason: "included range 0x\(Hex.int(s, width: 4))-0x\(Hex.int(e, width: 4))")
        }
        let rest = r.rest()
        switch rest.count {
        case 0: return IncludeDeclaration(start: s, end: e, uuid: nil)
        case 2: return IncludeDeclaration(start: s, end: e, uuid: BluetoothUUID(wire: rest))
        default: throw WireError.invalid(field: "Service UUID", reason: "\(rest.count) bytes (an include carries 2 or none)")
        }
    }

    /// The trace's lines: the included range and the UUID or why it is absent.
    public var traceFields: [String] {
        ["Included service: 0x\(Hex.int(start, width: 4))-0x\(Hex.int(end, width: 4))",
         "UUID: " + (uuid?.namedDescription ?? "none (128-bit, in the service declaration at 0x\(Hex.int(start, width: 4)))")]
    }
}

extension Characteristic {
    /// The trace's lines for a characteristic declaration value: properties
    /// (`CharacteristicProperties.names`), value handle and UUID.
    public var declarationTraceFields: [String] {
        ["Properties: 0x\(Hex.int(properties.rawValue, width: 2)) (\(properties.names.joined(separator: ", ")))",
         "Value handle: 0x\(Hex.int(valueHandle, width: 4))", "Value UUID: \(uuid.namedDescription)"]
    }
}

/// GATT's reading of attribute values for the tracer (Core Vol 3 Part G 3):
/// service, include and characteristic declarations decoded and named.
public enum GATTDescription {
    /// Lines describing the value of a declaration of `type` at `handle`; nil
    /// when `type` is not a declaration. A value that does not decode gives
    /// its bytes and the reason.
    public static func declarationFields(type: BluetoothUUID, handle: UInt16, value: [UInt8]) -> [String]? {
        func malformed(_ error: Error) -> [String] { ["Value: \(ATT.traceValue(value))", "malformed \(type.assignedName ?? "declaration"): \(error)"] }
        switch type {
        case GATTUUID.primaryService, GATTUUID.secondaryService:
            guard value.count == 2 || value.count == 16, let u = BluetoothUUID(wire: value) else {
                return malformed(WireError.invalid(field: "Service UUID", reason: "\(value.count) bytes (must be 2 or 16)"))
            }
            return ["Service UUID: \(u.namedDescription)"]
        case GATTUUID.include:
            do { return try IncludeDeclaration.decode(value).traceFields } catch { return malformed(error) }
        case GATTUUID.characteristic:
            do { return try Characteristic.decodeDeclaration(handle: handle, value: value).declarationTraceFields } catch { return malformed(error) }
        default:
            return nil
        }
    }
}

/// What the tracer knows of one connection's GATT exchange, to describe
/// responses by the request they answer: the attribute type a Read By Type
/// asked for, and the handles of service declarations learned from
/// discovery, so a Read of one (the UUID of a 128-bit include) is named.
public struct GATTTraceContext: Sendable {
    /// The outstanding request of each side (key: sent by this host).
    private var pending: [Bool: any ATTPDU] = [:]
    /// Handles known to hold a service declaration (key: the side that owns the
    /// database, i.e. did not send the discovery request).
    private var serviceDeclarations: [Bool: Set<UInt16>] = [:]
    private static let serviceDeclarationLimit = 4096

    /// A context that has seen no PDU.
    public init() {}

    /// The trace's lines for `pdu`, which travelled from this host when
    /// `sentByUs` is true, and notes what later responses need.
    public mutating func traceFields(_ pdu: any ATTPDU, sentByUs: Bool) -> [String] {
        let kind = pdu.opcode.kind
        if kind == .request { pending[sentByUs] = pdu }
        // A response (or error) answers the other side's request.
        let request = kind == .response ? pending.removeValue(forKey: !sentByUs) : nil
        var readByType: BluetoothUUID?
        if let t = (request as? ATT.ReadByTypeRequest)?.type { readByType = t }
        var f = pdu.traceFields { handle, value in
            if let t = readByType { return GATTDescription.declarationFields(type: t, handle: handle, value: value) }
            // The request was not seen (a capture started mid-exchange): a value
            // that decodes as a characteristic declaration is shown as one.
            guard value.count == 5 || value.count == 19,
                  let c = try? Characteristic.decodeDeclaration(handle: handle, value: value) else { return nil }
            return c.declarationTraceFields
        }
        let services = [GATTUUID.primaryService, GATTUUID.secondaryService]
        switch (pdu, request) {
        case let (r as ATT.ReadByTypeResponse, _) where readByType == GATTUUID.include:
            for it in r.values { if let inc = try? IncludeDeclaration.decode(it.value) { note(inc.start, server: sentByUs) } }
        case let (r as ATT.ReadByGroupTypeResponse, q as ATT.ReadByGroupTypeRequest) where services.contains(q.type):
            for g in r.groups { note(g.handle, server: sentByUs) }
        case let (r as ATT.FindByTypeValueResponse, q as ATT.FindByTypeValueRequest) where services.contains(BluetoothUUID(uint16: q.type)):
            for h in r.handles { note(h.found, server: sentByUs) }
        case let (r as ATT.ReadResponse, q as ATT.ReadRequest) where serviceDeclarations[sentByUs]?.contains(q.handle) == true:
            if let lines = GATTDescription.declarationFields(type: GATTUUID.primaryService, handle: q.handle, value: r.value) {
                f += lines.map { "  " + $0 }
            }
        default: break
        }
        return f
    }

    private mutating func note(_ handle: UInt16, server: Bool) {
        guard (serviceDeclarations[server]?.count ?? 0) < Self.serviceDeclarationLimit else { return }
        serviceDeclarations[server, default: []].insert(handle)
    }
}
