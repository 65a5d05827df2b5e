import BLEWire

/// Describes one attribute value of a Read By Type Response, which ATT
/// carries as opaque bytes, given its handle: lines to show under the
/// handle, or nil to show the value as bytes. GATT supplies one that knows
/// the type the request asked for (`GATTTraceContext` in BLEGATT).
public typealias ATTValueDescriber = (_ handle: UInt16, _ value: [UInt8]) -> [String]?

// The trace's account of each PDU, next to its decoder (PDU.swift): one
// line per field, in spec field order, not indented (the tracer indents).
extension ATTPDU {
    /// The summary of a PDU's bytes: name, opcode and parameter length,
    /// e.g. "Read Blob Request (0x0c) len 4"; "empty PDU" for no bytes.
    public static func traceSummary(_ bytes: [UInt8]) -> String {
        guard let op = bytes.first.map({ ATTOpcode(rawValue: $0) }) else { return "empty PDU" }
        return "\(op.description) len \(bytes.count - 1)"
    }

    /// One line per field of the PDU (Core Vol 3 Part F 3.4).
    /// - Parameter describeValue: interprets the values of a Read By Type
    ///   Response (GATT declarations); without it, or when it returns nil, a
    ///   value is shown as bytes.
    public func traceFields(describeValue: ATTValueDescriber? = nil) -> [String] {
        func h16(_ v: UInt16) -> String { "0x" + Hex.int(v, width: 4) }
        func range(_ s: UInt16, _ e: UInt16) -> String { "\(h16(s))-\(h16(e))" }
        switch self {
        case let .errorResponse(req, h, e):
            return ["\(req.description)", "Handle: \(h16(h))", "Error: \(e)"]
        case .exchangeMTURequest(let m): return ["Client RX MTU: \(m)"]
        case .exchangeMTUResponse(let m): return ["Server RX MTU: \(m)"]
        case let .findInformationRequest(s, e): return ["Handle range: \(range(s, e))"]
        case .findInformationResponse(let l):
            return ["Format: \(l.first?.uuid.width == 2 ? "UUID-16 (0x01)" : "UUID-128 (0x02)")"]
                + l.map { "Handle: \(h16($0.handle))  UUID: \($0.uuid.namedDescription)" }
        case let .findByTypeValueRequest(s, e, t, v):
            return ["Handle range: \(range(s, e))", "Attribute type: \(BluetoothUUID(uint16: t).namedDescription)",
                    "UUID: " + (BluetoothUUID(wire: v).map(\.namedDescription) ?? Hex.string(v))]
        case .findByTypeValueResponse(let l):
            return l.map { "Handle range: \(range($0.found, $0.groupEnd))" }
        case let .readByTypeRequest(s, e, t), let .readByGroupTypeRequest(s, e, t):
            return ["Handle range: \(range(s, e))", "Attribute type: \(t.namedDescription)"]
        case .readByTypeResponse(let l):
            var f = ["Attribute data length: \((l.first?.value.count ?? 0) + 2)"]
            for hv in l {
                f.append("Handle: \(h16(hv.handle))")
                if let lines = describeValue?(hv.handle, hv.value) { f += lines.map { "  " + $0 } }
                else { f.append("  Value: \(Self.traceValue(hv.value))") }
            }
            return f
        case .readByGroupTypeResponse(let l):
            return ["Attribute data length: \((l.first?.value.count ?? 0) + 4)"] + l.map { g in
                "Attribute group list: \(range(g.handle, g.endGroup))  UUID: " + (BluetoothUUID(wire: g.value).map(\.namedDescription) ?? Hex.string(g.value))
            }
        case .readRequest(let h): return ["Handle: \(h16(h))"]
        case let .readBlobRequest(h, o): return ["Handle: \(h16(h))", "Offset: \(o)"]
        case .readResponse(let v), .readBlobResponse(let v), .readMultipleResponse(let v): return ["Value: \(Self.traceValue(v))"]
        case .readMultipleRequest(let hs): return ["Handles: " + hs.map(h16).joined(separator: " ")]
        case let .writeRequest(h, v), let .writeCommand(h, v), let .handleValueNotification(h, v), let .handleValueIndication(h, v):
            return ["Handle: \(h16(h))", "Data: \(Self.traceValue(v))"]
        case let .signedWriteCommand(h, v, s): return ["Handle: \(h16(h))", "Data: \(Self.traceValue(v))", "Signature: \(Hex.string(s))"]
        case let .prepareWriteRequest(h, o, v), let .prepareWriteResponse(h, o, v):
            return ["Handle: \(h16(h))", "Offset: \(o)", "Data: \(Self.traceValue(v))"]
        case .executeWriteRequest(let fl):
            let meaning = fl == 0 ? "Cancel all prepared writes" : fl == 1 ? "Immediately write all pending values" : "reserved"
            return ["Flags: \(meaning) (0x\(Hex.int(fl, width: 2)))"]
        case .writeResponse, .executeWriteResponse, .handleValueConfirmation: return []
        case .unknown(_, let p): return Hex.lines(p)
        }
    }

    /// A value as hex, followed by its text in quotes when every byte is
    /// printable ASCII; "(empty)" for no bytes.
    public static func traceValue(_ b: [UInt8]) -> String {
        guard !b.isEmpty else { return "(empty)" }
        let printable = b.allSatisfy { $0 >= 0x20 && $0 < 0x7F }
        return Hex.string(b) + (printable ? " \"" + String(decoding: b, as: UTF8.self) + "\"" : "")
    }
}
