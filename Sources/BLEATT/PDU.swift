import BLEWire

/// An ATT PDU (Core Vol 3 Part F 3.4): what the bearer sends and receives.
/// Each one is a struct in `ATT` declared once by its fields; encoding,
/// decoding and the trace's lines all come from that declaration.
public protocol ATTPDU: Sendable {
    /// The opcode octet.
    var opcode: ATTOpcode { get }
    /// The PDU's bytes: opcode, then parameters.
    var encoded: [UInt8] { get }
    /// One line per field, in spec field order (the tracer indents them).
    /// - Parameter describeValue: interprets the attribute values of a Read
    ///   By Type Response (GATT declarations); without it, or when it returns
    ///   nil, a value is shown as bytes.
    func traceFields(describeValue: ATTValueDescriber?) -> [String]
}

/// Describes one attribute value of a Read By Type Response, which ATT
/// carries as opaque bytes, given its handle: lines to show under the
/// handle, or nil to show the value as bytes. GATT supplies one that knows
/// the type the request asked for (`GATTTraceContext` in BLEGATT).
public typealias ATTValueDescriber = (_ handle: UInt16, _ value: [UInt8]) -> [String]?

/// A PDU declared by its fields: its row of the opcode table and a `fields`
/// function that the reader, writer and printer walk.
public protocol ATTDeclaredPDU: ATTPDU, Hashable {
    /// The opcode and its row (name, kind, the response a request expects).
    static var declaration: ATTOpcode.Declaration { get }
    /// A PDU with every field zero or empty, for the reader to fill.
    init()
    /// Walks the fields in spec order (see `ATTFieldWalker`).
    mutating func fields(_ f: inout some ATTFieldWalker) throws
    /// Decodes the parameters after the opcode (a requirement, so each
    /// PDU's decoder is specialised: the default below is the only one).
    static func decodeParameters(_ r: inout ByteReader) throws -> Self
}

extension ATTDeclaredPDU {
    public var opcode: ATTOpcode { Self.declaration.opcode }

    public var encoded: [UInt8] {
        var w = ATTFieldWriter()
        w.w.u8(opcode.rawValue)
        var copy = self
        try? copy.fields(&w)  // the writer never throws
        return w.w.bytes
    }

    public func traceFields(describeValue: ATTValueDescriber? = nil) -> [String] {
        var p = ATTFieldPrinter(describeValue: describeValue)
        var copy = self
        try? copy.fields(&p)  // the printer never throws
        return p.lines
    }

    /// The first handle the PDU names (a request's Attribute Handle or
    /// Starting Handle), nil when it names none.
    public var firstHandle: UInt16? {
        var h = ATTFirstHandle()
        var copy = self
        try? copy.fields(&h)
        return h.handle
    }

    /// Decodes the parameters that follow the opcode; every length rule is
    /// checked and nothing may be left over.
    public static func decodeParameters(_ r: inout ByteReader) throws -> Self {
        var reader = ATTFieldReader(r)
        var pdu = Self()
        try pdu.fields(&reader)
        try reader.r.expectEnd(declaration.name)
        r = reader.r
        return pdu
    }
}

/// A PDU whose opcode attled does not know, with its parameters.
public struct ATTUnknownPDU: ATTPDU, Hashable {
    public let opcode: ATTOpcode
    public var parameters: [UInt8]
    /// An unknown PDU from its opcode and parameter bytes.
    public init(opcode: ATTOpcode, parameters: [UInt8]) { self.opcode = opcode; self.parameters = parameters }
    public var encoded: [UInt8] { [opcode.rawValue] + parameters }
    public func traceFields(describeValue: ATTValueDescriber? = nil) -> [String] { Hex.lines(parameters) }
}

extension ATTPDU {
    /// The trace's lines, attribute values shown as bytes.
    public func traceFields() -> [String] { traceFields(describeValue: nil) }
    /// The first handle the PDU names, nil for an unknown PDU or one that names none.
    public var firstHandle: UInt16? { (self as? any ATTDeclaredPDU)?.firstHandle }
}

extension ATT {
    /// Decodes one PDU. Every length rule of Core Vol 3 Part F 3.4 is
    /// checked; a violation throws `WireError`, never traps. An opcode
    /// without a declaration decodes as `ATTUnknownPDU`.
    /// - Throws: `WireError` for a truncated PDU, trailing bytes or a field value the spec forbids.
    public static func decode(_ bytes: [UInt8]) throws -> any ATTPDU {
        var r = ByteReader(bytes)
        let op = ATTOpcode(rawValue: try r.u8("opcode"))
        guard let type = declared[Int(op.rawValue)] else { return ATTUnknownPDU(opcode: op, parameters: r.rest()) }
        return try type.decodeParameters(&r)
    }

    /// The summary of a PDU's bytes: name, opcode and parameter length,
    /// e.g. "Read Blob Request (0x0c) len 4"; "empty PDU" for no bytes.
    public static func traceSummary(_ bytes: [UInt8]) -> String {
        guard let op = bytes.first.map({ ATTOpcode(rawValue: $0) }) else { return "empty PDU" }
        return "\(op.description) len \(bytes.count - 1)"
    }

    /// A value as hex, followed by its text in quotes when every byte is
    /// printable ASCII; "(empty)" for no bytes.
    public static func traceValue(_ b: [UInt8]) -> String { ATTFieldPrinter.traceValue(b) }

    /// The declared PDUs, indexed by opcode (256 slots: one look-up per PDU).
    static let declared: [(any ATTDeclaredPDU.Type)?] = {
        var slots = [(any ATTDeclaredPDU.Type)?](repeating: nil, count: 256)
        for t in all where slots[Int(t.declaration.opcode.rawValue)] == nil { slots[Int(t.declaration.opcode.rawValue)] = t }
        return slots
    }()
}

// MARK: - List entries

/// Handle and value pair (Read By Type, notifications).
public struct HandleValue: ATTListEntry {
    public var handle: UInt16
    public var value: [UInt8]
    /// Pairs an attribute handle with its value.
    public init(handle: UInt16 = 0, value: [UInt8] = []) { self.handle = handle; self.value = value }
    public init() { self.init(handle: 0) }
    public mutating func fields(_ f: inout some ATTFieldWalker) throws {
        try f.u16("Handle", &handle)
        try f.attributeValue("Value", &value, of: handle)
    }
}

/// A group found by Read By Group Type: start handle, end group handle, value.
public struct GroupValue: ATTListEntry {
    public var handle: UInt16
    public var endGroup: UInt16
    public var value: [UInt8]
    /// A group from its start handle, End Group Handle and attribute value.
    public init(handle: UInt16 = 0, endGroup: UInt16 = 0, value: [UInt8] = []) { self.handle = handle; self.endGroup = endGroup; self.value = value }
    public init() { self.init(handle: 0) }
    public mutating func fields(_ f: inout some ATTFieldWalker) throws {
        try f.handleRange("Attribute group list", &handle, &endGroup)
        try f.value("UUID", &value, .uuidOrHex)
    }
}

/// One entry of a Find By Type Value Response (3.4.3.4): the attribute
/// found and the end of its group.
public struct HandlesInformation: ATTListEntry {
    public var found: UInt16
    public var groupEnd: UInt16
    /// An entry from the Found Attribute Handle and the Group End Handle.
    public init(found: UInt16 = 0, groupEnd: UInt16 = 0) { self.found = found; self.groupEnd = groupEnd }
    public init() { self.init(found: 0) }
    public mutating func fields(_ f: inout some ATTFieldWalker) throws {
        try f.handleRange("Handle range", &found, &groupEnd)
    }
}

/// Handle and type pair (Find Information).
public struct HandleUUID: Hashable, Sendable {
    public var handle: UInt16
    public var uuid: BluetoothUUID
    /// Pairs an attribute handle with its attribute type.
    public init(handle: UInt16, uuid: BluetoothUUID) { self.handle = handle; self.uuid = uuid }
}

/// A value with its length (Read Multiple Variable Response, 3.4.4.12):
/// `length` is the attribute's; only a response's last value may hold fewer
/// bytes (the server cut it at the MTU).
public struct LengthValue: ATTListEntry {
    public var length: UInt16
    public var value: [UInt8]
    /// A whole value: its length is its byte count.
    public init(_ value: [UInt8]) { self.length = UInt16(truncatingIfNeeded: value.count); self.value = value }
    /// A value and the attribute's length, which may be longer than `value`.
    public init(length: UInt16 = 0, value: [UInt8] = []) { self.length = length; self.value = value }
    public init() { self.init(length: 0) }
    /// Whether the server sent fewer bytes than the value has.
    public var isTruncated: Bool { Int(length) > value.count }
    public mutating func fields(_ f: inout some ATTFieldWalker) throws {
        try f.lengthValue("Value", &length, &value)
    }
}

/// A handle, a length and a value (Multiple Handle Value Notification, 3.4.7.4).
public struct HandleLengthValue: ATTListEntry {
    public var handle: UInt16
    public var length: UInt16
    public var value: [UInt8]
    /// A handle and its whole value.
    public init(handle: UInt16 = 0, value: [UInt8] = []) { self.handle = handle; self.length = UInt16(truncatingIfNeeded: value.count); self.value = value }
    public init() { self.init(handle: 0) }
    public mutating func fields(_ f: inout some ATTFieldWalker) throws {
        try f.u16("Handle", &handle)
        try f.lengthValue("Value", &length, &value)
    }
}
