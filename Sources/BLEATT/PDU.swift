import BLEWire

/// Handle and value pair (Read By Type, notifications).
public struct HandleValue: Hashable, Sendable {
    public var handle: UInt16
    public var value: [UInt8]
    /// Pairs an attribute handle with its value.
    public init(handle: UInt16, value: [UInt8]) { self.handle = handle; self.value = value }
}

/// A group found by Read By Group Type: start handle, end group handle, value.
public struct GroupValue: Hashable, Sendable {
    public var handle: UInt16
    public var endGroup: UInt16
    public var value: [UInt8]
    /// A group from its start handle, End Group Handle and attribute value.
    public init(handle: UInt16, endGroup: UInt16, value: [UInt8]) { self.handle = handle; self.endGroup = endGroup; self.value = value }
}

/// One entry of a Find By Type Value Response (3.4.3.4): the attribute
/// found and the end of its group.
public struct HandlesInformation: Hashable, Sendable {
    public var found: UInt16
    public var groupEnd: UInt16
    /// An entry from the Found Attribute Handle and the Group End Handle.
    public init(found: UInt16, groupEnd: UInt16) { self.found = found; self.groupEnd = groupEnd }
}

/// Handle and type pair (Find Information).
public struct HandleUUID: Hashable, Sendable {
    public var handle: UInt16
    public var uuid: BluetoothUUID
    /// Pairs an attribute handle with its attribute type.
    public init(handle: UInt16, uuid: BluetoothUUID) { self.handle = handle; self.uuid = uuid }
}

/// An ATT PDU (Core Vol 3 Part F 3.4). Encoding and decoding sit together,
/// in field order; a round-trip test holds them to each other.
public enum ATTPDU: Hashable, Sendable {
    case errorResponse(request: ATTOpcode, handle: UInt16, error: ATTErrorCode)
    case exchangeMTURequest(mtu: UInt16)
    case exchangeMTUResponse(mtu: UInt16)
    case findInformationRequest(start: UInt16, end: UInt16)
    case findInformationResponse([HandleUUID])
    case findByTypeValueRequest(start: UInt16, end: UInt16, type: UInt16, value: [UInt8])
    case findByTypeValueResponse([HandlesInformation])
    case readByTypeRequest(start: UInt16, end: UInt16, type: BluetoothUUID)
    case readByTypeResponse([HandleValue])
    case readRequest(handle: UInt16)
    case readResponse([UInt8])
    case readBlobRequest(handle: UInt16, offset: UInt16)
    case readBlobResponse([UInt8])
    case readMultipleRequest([UInt16])
    case readMultipleResponse([UInt8])
    case readByGroupTypeRequest(start: UInt16, end: UInt16, type: BluetoothUUID)
    case readByGroupTypeResponse([GroupValue])
    case writeRequest(handle: UInt16, value: [UInt8])
    case writeResponse
    case writeCommand(handle: UInt16, value: [UInt8])
    case signedWriteCommand(handle: UInt16, value: [UInt8], signature: [UInt8])
    case prepareWriteRequest(handle: UInt16, offset: UInt16, value: [UInt8])
    case prepareWriteResponse(handle: UInt16, offset: UInt16, value: [UInt8])
    case executeWriteRequest(flags: UInt8)
    case executeWriteResponse
    case handleValueNotification(handle: UInt16, value: [UInt8])
    case handleValueIndication(handle: UInt16, value: [UInt8])
    case handleValueConfirmation
    /// Any other opcode, with its parameters.
    case unknown(ATTOpcode, [UInt8])


    public var opcode: ATTOpcode {
        switch self {
        case .errorResponse: return .errorResponse
        case .exchangeMTURequest: return .exchangeMTURequest
        case .exchangeMTUResponse: return .exchangeMTUResponse
        case .findInformationRequest: return .findInformationRequest
        case .findInformationResponse: return .findInformationResponse
        case .findByTypeValueRequest: return .findByTypeValueRequest
        case .findByTypeValueResponse: return .findByTypeValueResponse
        case .readByTypeRequest: return .readByTypeRequest
        case .readByTypeResponse: return .readByTypeResponse
        case .readRequest: return .readRequest
        case .readResponse: return .readResponse
        case .readBlobRequest: return .readBlobRequest
        case .readBlobResponse: return .readBlobResponse
        case .readMultipleRequest: return .readMultipleRequest
        case .readMultipleResponse: return .readMultipleResponse
        case .readByGroupTypeRequest: return .readByGroupTypeRequest
        case .readByGroupTypeResponse: return .readByGroupTypeResponse
        case .writeRequest: return .writeRequest
        case .writeResponse: return .writeResponse
        case .writeCommand: return .writeCommand
        case .signedWriteCommand: return .signedWriteCommand
        case .prepareWriteRequest: return .prepareWriteRequest
        case .prepareWriteResponse: return .prepareWriteResponse
        case .executeWriteRequest: return .executeWriteRequest
        case .executeWriteResponse: return .executeWriteResponse
        case .handleValueNotification: return .handleValueNotification
        case .handleValueIndication: return .handleValueIndication
        case .handleValueConfirmation: return .handleValueConfirmation
        case .unknown(let op, _): return op
        }
    }

    public var encoded: [UInt8] {
        var w = ByteWriter()
        w.u8(opcode.rawValue)
        switch self {
        case let .errorResponse(req, h, e): w.u8(req.rawValue); w.u16(h); w.u8(e.rawValue)
        case let .exchangeMTURequest(m), let .exchangeMTUResponse(m): w.u16(m)
        case let .findInformationRequest(s, e): w.u16(s); w.u16(e)
        case let .findInformationResponse(list):
            // Format 1 only when every UUID has a 16-bit form: one list holds one width.
            let format: UInt8 = list.allSatisfy { $0.uuid.uint16 != nil } ? 1 : 2
            w.u8(format)
            for hu in list { w.u16(hu.handle); w.append(format == 1 ? hu.uuid.attWire : hu.uuid.bytes128) }
        case let .findByTypeValueRequest(s, e, t, v): w.u16(s); w.u16(e); w.u16(t); w.append(v)
        case let .findByTypeValueResponse(list): for h in list { w.u16(h.found); w.u16(h.groupEnd) }
        case let .readByTypeRequest(s, e, t), let .readByGroupTypeRequest(s, e, t): w.u16(s); w.u16(e); w.append(t.attWire)
        case let .readByTypeResponse(list):
            w.u8(UInt8(truncatingIfNeeded: 2 + (list.first?.value.count ?? 0)))
            for hv in list { w.u16(hv.handle); w.append(hv.value) }
        case let .readRequest(h): w.u16(h)
        case let .readResponse(v), let .readBlobResponse(v), let .readMultipleResponse(v): w.append(v)
        case let .readBlobRequest(h, o): w.u16(h); w.u16(o)
        case let .readMultipleRequest(hs): for h in hs { w.u16(h) }
        case let .readByGroupTypeResponse(list):
            w.u8(UInt8(truncatingIfNeeded: 4 + (list.first?.value.count ?? 0)))
            for g in list { w.u16(g.handle); w.u16(g.endGroup); w.append(g.value) }
        case let .writeRequest(h, v), let .writeCommand(h, v), let .handleValueNotification(h, v), let .handleValueIndication(h, v):
            w.u16(h); w.append(v)
        case let .signedWriteCommand(h, v, s): w.u16(h); w.append(v); w.append(s)
        case let .prepareWriteRequest(h, o, v), let .prepareWriteResponse(h, o, v): w.u16(h); w.u16(o); w.append(v)
        case let .executeWriteRequest(f): w.u8(f)
        case .writeResponse, .executeWriteResponse, .handleValueConfirmation: break
        case let .unknown(_, p): w.append(p)
        }
        return w.bytes
    }

    /// Decodes one PDU. Every length rule of Core Vol 3 Part F 3.4 is checked;
    /// a violation throws `WireError`, never traps.
    /// - Throws: `WireError` for a truncated PDU, trailing bytes or a field value the spec forbids.
    public static func decode(_ bytes: [UInt8]) throws -> ATTPDU {
        var r = ByteReader(bytes)
        let op = ATTOpcode(rawValue: try r.u8("opcode"))
        func end(_ pdu: ATTPDU) throws -> ATTPDU { try r.expectEnd(op.name); return pdu }
        switch op {
        case .errorResponse:
            return try end(.errorResponse(request: ATTOpcode(rawValue: try r.u8("Request Opcode In Error")),
                                          handle: try r.u16("Attribute Handle In Error"),
                                          error: ATTErrorCode(rawValue: try r.u8("Error Code"))))
        case .exchangeMTURequest: return try end(.exchangeMTURequest(mtu: try r.u16("Client Rx MTU")))
        case .exchangeMTUResponse: return try end(.exchangeMTUResponse(mtu: try r.u16("Server Rx MTU")))
        case .findInformationRequest:
            return try end(.findInformationRequest(start: try r.u16("Starting Handle"), end: try r.u16("Ending Handle")))
        case .findInformationResponse:
            let format = try r.u8("Format")
            guard format == 1 || format == 2 else { throw WireError.invalid(field: "Format", reason: "0x\(Hex.int(format, width: 2)) is neither 1 (16-bit) nor 2 (128-bit)") }
            let w = format == 1 ? 2 : 16
            guard r.remaining > 0, r.remaining % (2 + w) == 0 else {
                throw WireError.invalid(field: "Information Data", reason: "\(r.remaining) bytes is not a non-zero multiple of \(2 + w)")
            }
            var out: [HandleUUID] = []
            while !r.isAtEnd {
                let h = try r.u16("Handle")
                guard let u = BluetoothUUID(wire: try r.bytes(w, "UUID")) else { throw WireError.invalid(field: "UUID", reason: "bad width") }
                out.append(HandleUUID(handle: h, uuid: u))
            }
            return .findInformationResponse(out)
        case .findByTypeValueRequest:
            return .findByTypeValueRequest(start: try r.u16("Starting Handle"), end: try r.u16("Ending Handle"),
                                           type: try r.u16("Attribute Type"), value: r.rest())
        case .findByTypeValueResponse:
            guard r.remaining > 0, r.remaining % 4 == 0 else {
                throw WireError.invalid(field: "Handles Information List", reason: "\(r.remaining) bytes is not a non-zero multiple of 4")
            }
            var out: [HandlesInformation] = []
            while !r.isAtEnd { out.append(HandlesInformation(found: try r.u16("Found Attribute Handle"), groupEnd: try r.u16("Group End Handle"))) }
            return .findByTypeValueResponse(out)
        case .readByTypeRequest, .readByGroupTypeRequest:
            let s = try r.u16("Starting Handle"), e = try r.u16("Ending Handle")
            let t = r.rest()
            guard t.count == 2 || t.count == 16, let u = BluetoothUUID(wire: t) else {
                throw WireError.invalid(field: "Attribute Type", reason: "\(t.count) bytes (must be 2 or 16)")
            }
            return op == .readByTypeRequest ? .readByTypeRequest(start: s, end: e, type: u) : .readByGroupTypeRequest(start: s, end: e, type: u)
        case .readByTypeResponse:
            let len = Int(try r.u8("Length"))
            guard len >= 2 else { throw WireError.invalid(field: "Length", reason: "\(len) is shorter than a handle") }
            guard r.remaining > 0, r.remaining % len == 0 else {
                throw WireError.invalid(field: "Attribute Data List", reason: "\(r.remaining) bytes is not a non-zero multiple of \(len)")
            }
            var out: [HandleValue] = []
            while !r.isAtEnd { out.append(HandleValue(handle: try r.u16("Handle"), value: try r.bytes(len - 2, "Value"))) }
            return .readByTypeResponse(out)
        case .readRequest: return try end(.readRequest(handle: try r.u16("Attribute Handle")))
        case .readResponse: return .readResponse(r.rest())
        case .readBlobRequest: return try end(.readBlobRequest(handle: try r.u16("Attribute Handle"), offset: try r.u16("Value Offset")))
        case .readBlobResponse: return .readBlobResponse(r.rest())
        case .readMultipleRequest:
            guard r.remaining >= 4, r.remaining % 2 == 0 else { throw WireError.invalid(field: "Set Of Handles", reason: "need two or more handles") }
            var hs: [UInt16] = []
            while !r.isAtEnd { hs.append(try r.u16("Handle")) }
            return .readMultipleRequest(hs)
        case .readMultipleResponse: return .readMultipleResponse(r.rest())
        case .readByGroupTypeResponse:
            let len = Int(try r.u8("Length"))
            guard len >= 4 else { throw WireError.invalid(field: "Length", reason: "\(len) is shorter than two handles") }
            guard r.remaining > 0, r.remaining % len == 0 else {
                throw WireError.invalid(field: "Attribute Data List", reason: "\(r.remaining) bytes is not a non-zero multiple of \(len)")
            }
            var out: [GroupValue] = []
            while !r.isAtEnd {
                out.append(GroupValue(handle: try r.u16("Attribute Handle"), endGroup: try r.u16("End Group Handle"), value: try r.bytes(len - 4, "Value")))
            }
            return .readByGroupTypeResponse(out)
        case .writeRequest: return .writeRequest(handle: try r.u16("Attribute Handle"), value: r.rest())
        case .writeResponse: return try end(.writeResponse)
        case .writeCommand: return .writeCommand(handle: try r.u16("Attribute Handle"), value: r.rest())
        case .signedWriteCommand:
            let h = try r.u16("Attribute Handle")
            guard r.remaining >= 12 else { throw WireError.truncated(field: "Authentication Signature", needed: 12, available: r.remaining) }
            let v = try r.bytes(r.remaining - 12, "Attribute Value")
            return .signedWriteCommand(handle: h, value: v, signature: r.rest())
        case .prepareWriteRequest:
            return .prepareWriteRequest(handle: try r.u16("Attribute Handle"), offset: try r.u16("Value Offset"), value: r.rest())
        case .prepareWriteResponse:
            return .prepareWriteResponse(handle: try r.u16("Attribute Handle"), offset: try r.u16("Value Offset"), value: r.rest())
        case .executeWriteRequest: return try end(.executeWriteRequest(flags: try r.u8("Flags")))
        case .executeWriteResponse: return try end(.executeWriteResponse)
        case .handleValueNotification: return .handleValueNotification(handle: try r.u16("Attribute Handle"), value: r.rest())
        case .handleValueIndication: return .handleValueIndication(handle: try r.u16("Attribute Handle"), value: r.rest())
        case .handleValueConfirmation: return try end(.handleValueConfirmation)
        default: return .unknown(op, r.rest())
        }
    }
}
