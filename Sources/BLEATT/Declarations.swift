import BLEWire

/// Every ATT PDU attled speaks (Core Vol 3 Part F 3.4), each declared once:
/// its row of the opcode table and its fields in spec order. Adding a PDU is
/// a struct here and its line in `all`.
public enum ATT {
    /// The declared PDUs; the opcode table (`ATTOpcode.table`), the decoder and
    /// the tracer all come from this list.
    public static let all: [any ATTDeclaredPDU.Type] = [
        ErrorResponse.self, ExchangeMTURequest.self, ExchangeMTUResponse.self,
        FindInformationRequest.self, FindInformationResponse.self,
        FindByTypeValueRequest.self, FindByTypeValueResponse.self,
        ReadByTypeRequest.self, ReadByTypeResponse.self,
        ReadRequest.self, ReadResponse.self, ReadBlobRequest.self, ReadBlobResponse.self,
        ReadMultipleRequest.self, ReadMultipleResponse.self,
        ReadByGroupTypeRequest.self, ReadByGroupTypeResponse.self,
        WriteRequest.self, WriteResponse.self, WriteCommand.self, SignedWriteCommand.self,
        PrepareWriteRequest.self, PrepareWriteResponse.self, ExecuteWriteRequest.self, ExecuteWriteResponse.self,
        HandleValueNotification.self, HandleValueIndication.self, HandleValueConfirmation.self,
        ReadMultipleVariableRequest.self, ReadMultipleVariableResponse.self,
        MultipleHandleValueNotification.self,
    ]

    /// The opcode table, by opcode.
    static let table: [UInt8: ATTOpcode.Declaration] = Dictionary(
        all.map { ($0.declaration.opcode.rawValue, $0.declaration) }, uniquingKeysWith: { first, _ in first })

    // MARK: Error handling (3.4.1)

    /// Error Response (3.4.1.1): the request that failed, the handle, why.
    public struct ErrorResponse: ATTDeclaredPDU {
        public static let declaration = ATTOpcode.Declaration(.errorResponse, "Error Response", .response)
        public var request: ATTOpcode
        public var handle: UInt16
        public var error: ATTErrorCode
        public init(request: ATTOpcode = ATTOpcode(rawValue: 0), handle: UInt16 = 0, error: ATTErrorCode = ATTErrorCode(rawValue: 0)) {
            self.request = request; self.handle = handle; self.error = error
        }
        public init() { self.init(request: ATTOpcode(rawValue: 0)) }
        public mutating func fields(_ f: inout some ATTFieldWalker) throws {
            try f.code("Request Opcode In Error", &request, labelled: false)
            try f.u16("Handle", &handle)
            try f.code("Error", &error)
        }
    }

    // MARK: MTU exchange (3.4.2)

    /// Exchange MTU Request (3.4.2.1): the client's receive MTU.
    public struct ExchangeMTURequest: ATTDeclaredPDU {
        public static let declaration = ATTOpcode.Declaration(.exchangeMTURequest, "Exchange MTU Request", .request, response: .exchangeMTUResponse)
        public var mtu: UInt16
        public init(mtu: UInt16 = 0) { self.mtu = mtu }
        public init() { self.init(mtu: 0) }
        public mutating func fields(_ f: inout some ATTFieldWalker) throws { try f.u16("Client RX MTU", &mtu, .decimal) }
    }

    /// Exchange MTU Response (3.4.2.2): the server's receive MTU.
    public struct ExchangeMTUResponse: ATTDeclaredPDU {
        public static let declaration = ATTOpcode.Declaration(.exchangeMTUResponse, "Exchange MTU Response", .response)
        public var mtu: UInt16
        public init(mtu: UInt16 = 0) { self.mtu = mtu }
        public init() { self.init(mtu: 0) }
        public mutating func fields(_ f: inout some ATTFieldWalker) throws { try f.u16("Server RX MTU", &mtu, .decimal) }
    }

    // MARK: Find information (3.4.3)

    /// Find Information Request (3.4.3.1): the types of the handles in a range.
    public struct FindInformationRequest: ATTDeclaredPDU {
        public static let declaration = ATTOpcode.Declaration(.findInformationRequest, "Find Information Request", .request, response: .findInformationResponse)
        public var start: UInt16, end: UInt16
        public init(start: UInt16 = 0, end: UInt16 = 0) { self.start = start; self.end = end }
        public init() { self.init(start: 0) }
        public mutating func fields(_ f: inout some ATTFieldWalker) throws { try f.handleRange("Handle range", &start, &end) }
    }

    /// Find Information Response (3.4.3.2): a Format octet, then handle-UUID
    /// pairs of the one width it names. The only PDU whose entries' size an
    /// earlier field sets: its Format and entries are written out here, and
    /// its trace by hand.
    public struct FindInformationResponse: ATTDeclaredPDU {
        public static let declaration = ATTOpcode.Declaration(.findInformationResponse, "Find Information Response", .response)
        public var information: [HandleUUID]
        public init(_ information: [HandleUUID] = []) { self.information = information }
        public init() { self.init([]) }
        public mutating func fields(_ f: inout some ATTFieldWalker) throws {
            // Sent as format 1 only when every UUID has a 16-bit form: one list holds one width.
            var format: UInt8 = information.allSatisfy { $0.uuid.uint16 != nil } ? 1 : 2
            try f.u8("Format", &format) { "0x" + Hex.int($0, width: 2) }
            guard format == 1 || format == 2 else {
                throw WireError.invalid(field: "Format", reason: "0x\(Hex.int(format, width: 2)) is neither 1 (16-bit) nor 2 (128-bit)")
            }
            var entries = information.map { Entry(handle: $0.handle, uuid: format == 1 ? $0.uuid.attWire : $0.uuid.bytes128) }
            try f.list("Information Data", &entries, size: format == 1 ? 4 : 18)
            information = entries.map { HandleUUID(handle: $0.handle, uuid: BluetoothUUID(wire: $0.uuid) ?? BluetoothUUID(uint16: 0)) }
        }

        /// One pair, its UUID in the width Format gives (the rest of its entry).
        struct Entry: ATTListEntry {
            var handle: UInt16 = 0
            var uuid: [UInt8] = []
            mutating func fields(_ f: inout some ATTFieldWalker) throws {
                try f.u16("Handle", &handle)
                try f.value("UUID", &uuid, .uuidOrHex)
            }
        }

        /// The format the entries arrived in (their width), then one line per pair.
        public func traceFields(describeValue: ATTValueDescriber? = nil) -> [String] {
            ["Format: \(information.first?.uuid.width == 2 ? "UUID-16 (0x01)" : "UUID-128 (0x02)")"]
                + information.map { "Handle: \(ATTFieldPrinter.h16($0.handle))  UUID: \($0.uuid.namedDescription)" }
        }
    }

    /// Find By Type Value Request (3.4.3.3): attributes of a 16-bit type with a value.
    public struct FindByTypeValueRequest: ATTDeclaredPDU {
        public static let declaration = ATTOpcode.Declaration(.findByTypeValueRequest, "Find By Type Value Request", .request, response: .findByTypeValueResponse)
        public var start: UInt16, end: UInt16, type: UInt16
        public var value: [UInt8]
        public init(start: UInt16 = 0, end: UInt16 = 0, type: UInt16 = 0, value: [UInt8] = []) {
            self.start = start; self.end = end; self.type = type; self.value = value
        }
        public init() { self.init(start: 0) }
        public mutating func fields(_ f: inout some ATTFieldWalker) throws {
            try f.handleRange("Handle range", &start, &end)
            try f.uuid16("Attribute type", &type)
            try f.value("UUID", &value, .uuidOrHex)
        }
    }

    /// Find By Type Value Response (3.4.3.4): found handles and their group ends.
    public struct FindByTypeValueResponse: ATTDeclaredPDU {
        public static let declaration = ATTOpcode.Declaration(.findByTypeValueResponse, "Find By Type Value Response", .response)
        public var handles: [HandlesInformation]
        public init(_ handles: [HandlesInformation] = []) { self.handles = handles }
        public init() { self.init([]) }
        public mutating func fields(_ f: inout some ATTFieldWalker) throws { try f.list("Handles Information List", &handles, size: 4) }
    }

    // MARK: Reading attributes (3.4.4)

    /// Read By Type Request (3.4.4.1): values of the attributes of one type in a range.
    public struct ReadByTypeRequest: ATTDeclaredPDU {
        public static let declaration = ATTOpcode.Declaration(.readByTypeRequest, "Read By Type Request", .request, response: .readByTypeResponse)
        public var start: UInt16, end: UInt16
        public var type: BluetoothUUID
        public init(start: UInt16 = 0, end: UInt16 = 0, type: BluetoothUUID = BluetoothUUID(uint16: 0)) { self.start = start; self.end = end; self.type = type }
        public init() { self.init(start: 0) }
        public mutating func fields(_ f: inout some ATTFieldWalker) throws {
            try f.handleRange("Handle range", &start, &end)
            try f.uuid("Attribute type", &type)
        }
    }

    /// Read By Type Response (3.4.4.2): handle-value pairs of one length.
    public struct ReadByTypeResponse: ATTDeclaredPDU {
        public static let declaration = ATTOpcode.Declaration(.readByTypeResponse, "Read By Type Response", .response)
        public var values: [HandleValue]
        public init(_ values: [HandleValue] = []) { self.values = values }
        public init() { self.init([]) }
        public mutating func fields(_ f: inout some ATTFieldWalker) throws { try f.lengthPrefixedList("Attribute Data List", &values, minimum: 2) }
    }

    /// Read Request (3.4.4.3): one attribute's value.
    public struct ReadRequest: ATTDeclaredPDU {
        public static let declaration = ATTOpcode.Declaration(.readRequest, "Read Request", .request, response: .readResponse)
        public var handle: UInt16
        public init(handle: UInt16 = 0) { self.handle = handle }
        public init() { self.init(handle: 0) }
        public mutating func fields(_ f: inout some ATTFieldWalker) throws { try f.u16("Handle", &handle) }
    }

    /// Read Response (3.4.4.4): the value (at most MTU-1 bytes of it).
    public struct ReadResponse: ATTValueLayout {
        public static let declaration = ATTOpcode.Declaration(.readResponse, "Read Response", .response)
        public var value: [UInt8]
        public init(_ value: [UInt8] = []) { self.value = value }
    }

    /// Read Blob Request (3.4.4.5): part of a long value, from an offset.
    public struct ReadBlobRequest: ATTDeclaredPDU {
        public static let declaration = ATTOpcode.Declaration(.readBlobRequest, "Read Blob Request", .request, response: .readBlobResponse)
        public var handle: UInt16, offset: UInt16
        public init(handle: UInt16 = 0, offset: UInt16 = 0) { self.handle = handle; self.offset = offset }
        public init() { self.init(handle: 0) }
        public mutating func fields(_ f: inout some ATTFieldWalker) throws {
            try f.u16("Handle", &handle)
            try f.u16("Offset", &offset, .decimal)
        }
    }

    /// Read Blob Response (3.4.4.6): the part from the offset.
    public struct ReadBlobResponse: ATTValueLayout {
        public static let declaration = ATTOpcode.Declaration(.readBlobResponse, "Read Blob Response", .response)
        public var value: [UInt8]
        public init(_ value: [UInt8] = []) { self.value = value }
    }

    /// Read Multiple Request (3.4.4.7): two or more values of known lengths.
    public struct ReadMultipleRequest: ATTDeclaredPDU {
        public static let declaration = ATTOpcode.Declaration(.readMultipleRequest, "Read Multiple Request", .request, response: .readMultipleResponse)
        public var handles: [UInt16]
        public init(_ handles: [UInt16] = []) { self.handles = handles }
        public init() { self.init([]) }
        public mutating func fields(_ f: inout some ATTFieldWalker) throws { try f.handles("Handles", &handles, minimum: 2) }
    }

    /// Read Multiple Response (3.4.4.8): the values concatenated, without lengths.
    public struct ReadMultipleResponse: ATTDeclaredPDU {
        public static let declaration = ATTOpcode.Declaration(.readMultipleResponse, "Read Multiple Response", .response)
        public var values: [UInt8]
        public init(_ values: [UInt8] = []) { self.values = values }
        public init() { self.init([]) }
        public mutating func fields(_ f: inout some ATTFieldWalker) throws { try f.value("Value", &values) }
    }

    /// Read By Group Type Request (3.4.4.9): groups (services) of a type in a range.
    public struct ReadByGroupTypeRequest: ATTDeclaredPDU {
        public static let declaration = ATTOpcode.Declaration(.readByGroupTypeRequest, "Read By Group Type Request", .request, response: .readByGroupTypeResponse)
        public var start: UInt16, end: UInt16
        public var type: BluetoothUUID
        public init(start: UInt16 = 0, end: UInt16 = 0, type: BluetoothUUID = BluetoothUUID(uint16: 0)) { self.start = start; self.end = end; self.type = type }
        public init() { self.init(start: 0) }
        public mutating func fields(_ f: inout some ATTFieldWalker) throws {
            try f.handleRange("Handle range", &start, &end)
            try f.uuid("Attribute type", &type)
        }
    }

    /// Read By Group Type Response (3.4.4.10): groups of one entry length.
    public struct ReadByGroupTypeResponse: ATTDeclaredPDU {
        public static let declaration = ATTOpcode.Declaration(.readByGroupTypeResponse, "Read By Group Type Response", .response)
        public var groups: [GroupValue]
        public init(_ groups: [GroupValue] = []) { self.groups = groups }
        public init() { self.init([]) }
        public mutating func fields(_ f: inout some ATTFieldWalker) throws { try f.lengthPrefixedList("Attribute Data List", &groups, minimum: 4) }
    }

    /// Read Multiple Variable Length Request (3.4.4.11): two or more values of any length.
    public struct ReadMultipleVariableRequest: ATTDeclaredPDU {
        public static let declaration = ATTOpcode.Declaration(.readMultipleVariableRequest, "Read Multiple Variable Request", .request, response: .readMultipleVariableResponse)
        public var handles: [UInt16]
        public init(_ handles: [UInt16] = []) { self.handles = handles }
        public init() { self.init([]) }
        public mutating func fields(_ f: inout some ATTFieldWalker) throws { try f.handles("Handles", &handles, minimum: 2) }
    }

    /// Read Multiple Variable Length Response (3.4.4.12): each value with its length.
    public struct ReadMultipleVariableResponse: ATTDeclaredPDU {
        public static let declaration = ATTOpcode.Declaration(.readMultipleVariableResponse, "Read Multiple Variable Response", .response)
        public var values: [LengthValue]
        public init(_ values: [LengthValue] = []) { self.values = values }
        public init() { self.init([]) }
        public mutating func fields(_ f: inout some ATTFieldWalker) throws { try f.list("Length Value Tuple List", &values, size: nil) }
    }

    // MARK: Writing attributes (3.4.5, 3.4.6)

    /// Write Request (3.4.5.1): a value, answered by a Write Response.
    public struct WriteRequest: ATTHandleValueLayout {
        public static let declaration = ATTOpcode.Declaration(.writeRequest, "Write Request", .request, response: .writeResponse)
        public var handle: UInt16
        public var value: [UInt8]
        public init(handle: UInt16 = 0, value: [UInt8] = []) { self.handle = handle; self.value = value }
    }

    /// Write Response (3.4.5.2).
    public struct WriteResponse: ATTDeclaredPDU {
        public static let declaration = ATTOpcode.Declaration(.writeResponse, "Write Response", .response)
        public init() {}
        public mutating func fields(_ f: inout some ATTFieldWalker) throws {}
    }

    /// Write Command (3.4.5.3): a value, unanswered.
    public struct WriteCommand: ATTHandleValueLayout {
        public static let declaration = ATTOpcode.Declaration(.writeCommand, "Write Command", .command)
        public var handle: UInt16
        public var value: [UInt8]
        public init(handle: UInt16 = 0, value: [UInt8] = []) { self.handle = handle; self.value = value }
    }

    /// Signed Write Command (3.4.5.4): a value and a 12-byte signature.
    public struct SignedWriteCommand: ATTDeclaredPDU {
        public static let declaration = ATTOpcode.Declaration(.signedWriteCommand, "Signed Write Command", .command)
        public var handle: UInt16
        public var value: [UInt8]
        public var signature: [UInt8]
        public init(handle: UInt16 = 0, value: [UInt8] = [], signature: [UInt8] = []) { self.handle = handle; self.value = value; self.signature = signature }
        public init() { self.init(handle: 0) }
        public mutating func fields(_ f: inout some ATTFieldWalker) throws {
            try f.u16("Handle", &handle)
            try f.value("Data", &value, .data, reserving: 12)
            try f.bytes("Signature", &signature, count: 12)
        }
    }

    /// Prepare Write Request (3.4.6.1): part of a long value, queued at the server.
    public struct PrepareWriteRequest: ATTHandleOffsetValueLayout {
        public static let declaration = ATTOpcode.Declaration(.prepareWriteRequest, "Prepare Write Request", .request, response: .prepareWriteResponse)
        public var handle: UInt16, offset: UInt16
        public var value: [UInt8]
        public init(handle: UInt16 = 0, offset: UInt16 = 0, value: [UInt8] = []) { self.handle = handle; self.offset = offset; self.value = value }
    }

    /// Prepare Write Response (3.4.6.2): the part echoed back.
    public struct PrepareWriteResponse: ATTHandleOffsetValueLayout {
        public static let declaration = ATTOpcode.Declaration(.prepareWriteResponse, "Prepare Write Response", .response)
        public var handle: UInt16, offset: UInt16
        public var value: [UInt8]
        public init(handle: UInt16 = 0, offset: UInt16 = 0, value: [UInt8] = []) { self.handle = handle; self.offset = offset; self.value = value }
    }

    /// Execute Write Request (3.4.6.3): write (1) or cancel (0) the queue.
    public struct ExecuteWriteRequest: ATTDeclaredPDU {
        public static let declaration = ATTOpcode.Declaration(.executeWriteRequest, "Execute Write Request", .request, response: .executeWriteResponse)
        /// 0x00 cancels all prepared writes, 0x01 writes them.
        public var flags: UInt8
        public init(flags: UInt8 = 0) { self.flags = flags }
        public init() { self.init(flags: 0) }
        public mutating func fields(_ f: inout some ATTFieldWalker) throws {
            try f.u8("Flags", &flags) { fl in
                let meaning = fl == 0 ? "Cancel all prepared writes" : fl == 1 ? "Immediately write all pending values" : "reserved"
                return "\(meaning) (0x\(Hex.int(fl, width: 2)))"
            }
        }
    }

    /// Execute Write Response (3.4.6.4).
    public struct ExecuteWriteResponse: ATTDeclaredPDU {
        public static let declaration = ATTOpcode.Declaration(.executeWriteResponse, "Execute Write Response", .response)
        public init() {}
        public mutating func fields(_ f: inout some ATTFieldWalker) throws {}
    }

    // MARK: Server-initiated (3.4.7)

    /// Handle Value Notification (3.4.7.1).
    public struct HandleValueNotification: ATTHandleValueLayout {
        public static let declaration = ATTOpcode.Declaration(.handleValueNotification, "Handle Value Notification", .notification)
        public var handle: UInt16
        public var value: [UInt8]
        public init(handle: UInt16 = 0, value: [UInt8] = []) { self.handle = handle; self.value = value }
    }

    /// Handle Value Indication (3.4.7.2): answered by a confirmation.
    public struct HandleValueIndication: ATTHandleValueLayout {
        public static let declaration = ATTOpcode.Declaration(.handleValueIndication, "Handle Value Indication", .indication, response: .handleValueConfirmation)
        public var handle: UInt16
        public var value: [UInt8]
        public init(handle: UInt16 = 0, value: [UInt8] = []) { self.handle = handle; self.value = value }
    }

    /// Handle Value Confirmation (3.4.7.3).
    public struct HandleValueConfirmation: ATTDeclaredPDU {
        public static let declaration = ATTOpcode.Declaration(.handleValueConfirmation, "Handle Value Confirmation", .confirmation)
        public init() {}
        public mutating func fields(_ f: inout some ATTFieldWalker) throws {}
    }

    /// Multiple Handle Value Notification (3.4.7.4): several handles' values.
    public struct MultipleHandleValueNotification: ATTDeclaredPDU {
        public static let declaration = ATTOpcode.Declaration(.multipleHandleValueNotification, "Multiple Handle Value Notification", .notification)
        public var values: [HandleLengthValue]
        public init(_ values: [HandleLengthValue] = []) { self.values = values }
        public init() { self.init([]) }
        public mutating func fields(_ f: inout some ATTFieldWalker) throws { try f.list("Handle Length Value Tuple List", &values, size: nil) }
    }
}

// Layouts several PDUs share, each declared once.

/// An attribute handle and a value (Write Request and Command, Handle Value
/// Notification and Indication).
public protocol ATTHandleValueLayout: ATTDeclaredPDU {
    var handle: UInt16 { get set }
    var value: [UInt8] { get set }
    init(handle: UInt16, value: [UInt8])
}

extension ATTHandleValueLayout {
    public init() { self.init(handle: 0, value: []) }
    public mutating func fields(_ f: inout some ATTFieldWalker) throws {
        try f.u16("Handle", &handle)
        try f.value("Data", &value)
    }
}

/// An attribute handle, an offset and part of a value (Prepare Write Request and Response).
public protocol ATTHandleOffsetValueLayout: ATTDeclaredPDU {
    var handle: UInt16 { get set }
    var offset: UInt16 { get set }
    var value: [UInt8] { get set }
    init(handle: UInt16, offset: UInt16, value: [UInt8])
}

extension ATTHandleOffsetValueLayout {
    public init() { self.init(handle: 0, offset: 0, value: []) }
    public mutating func fields(_ f: inout some ATTFieldWalker) throws {
        try f.u16("Handle", &handle)
        try f.u16("Offset", &offset, .decimal)
        try f.value("Data", &value)
    }
}

/// A value alone (Read Response, Read Blob Response).
public protocol ATTValueLayout: ATTDeclaredPDU {
    var value: [UInt8] { get set }
    init(_ value: [UInt8])
}

extension ATTValueLayout {
    public init() { self.init([]) }
    public mutating func fields(_ f: inout some ATTFieldWalker) throws { try f.value("Value", &value) }
}
