import BLEWire

/// ATT opcodes (Core Vol 3 Part F 3.4.8). Open: unknown opcodes survive.
public struct ATTOpcode: RawRepresentable, Hashable, Sendable, CustomStringConvertible, ByteCode {
    public let rawValue: UInt8
    /// Any opcode byte, including ones not named below.
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    public static let errorResponse = ATTOpcode(rawValue: 0x01)
    public static let exchangeMTURequest = ATTOpcode(rawValue: 0x02)
    public static let exchangeMTUResponse = ATTOpcode(rawValue: 0x03)
    public static let findInformationRequest = ATTOpcode(rawValue: 0x04)
    public static let findInformationResponse = ATTOpcode(rawValue: 0x05)
    public static let findByTypeValueRequest = ATTOpcode(rawValue: 0x06)
    public static let findByTypeValueResponse = ATTOpcode(rawValue: 0x07)
    public static let readByTypeRequest = ATTOpcode(rawValue: 0x08)
    public static let readByTypeResponse = ATTOpcode(rawValue: 0x09)
    public static let readRequest = ATTOpcode(rawValue: 0x0A)
    public static let readResponse = ATTOpcode(rawValue: 0x0B)
    public static let readBlobRequest = ATTOpcode(rawValue: 0x0C)
    public static let readBlobResponse = ATTOpcode(rawValue: 0x0D)
    public static let readMultipleRequest = ATTOpcode(rawValue: 0x0E)
    public static let readMultipleResponse = ATTOpcode(rawValue: 0x0F)
    public static let readByGroupTypeRequest = ATTOpcode(rawValue: 0x10)
    public static let readByGroupTypeResponse = ATTOpcode(rawValue: 0x11)
    public static let writeRequest = ATTOpcode(rawValue: 0x12)
    public static let writeResponse = ATTOpcode(rawValue: 0x13)
    public static let prepareWriteRequest = ATTOpcode(rawValue: 0x16)
    public static let prepareWriteResponse = ATTOpcode(rawValue: 0x17)
    public static let executeWriteRequest = ATTOpcode(rawValue: 0x18)
    public static let executeWriteResponse = ATTOpcode(rawValue: 0x19)
    public static let handleValueNotification = ATTOpcode(rawValue: 0x1B)
    public static let handleValueIndication = ATTOpcode(rawValue: 0x1D)
    public static let handleValueConfirmation = ATTOpcode(rawValue: 0x1E)
    public static let readMultipleVariableRequest = ATTOpcode(rawValue: 0x20)
    public static let readMultipleVariableResponse = ATTOpcode(rawValue: 0x21)
    public static let multipleHandleValueNotification = ATTOpcode(rawValue: 0x23)
    public static let writeCommand = ATTOpcode(rawValue: 0x52)
    public static let signedWriteCommand = ATTOpcode(rawValue: 0xD2)

    /// What role a PDU plays in the protocol (Core Vol 3 Part F 3.3).
    public enum Kind: Sendable { case request, response, command, notification, indication, confirmation, unknown }

    /// One row of the opcode table, declared with its PDU (`ATT`'s structs):
    /// name, kind, and for a request (or an indication) the opcode that answers it.
    public struct Declaration: Sendable {
        public let opcode: ATTOpcode
        public let name: String
        public let kind: Kind
        public let response: ATTOpcode?
        /// A row: `response` only for requests and indications.
        public init(_ opcode: ATTOpcode, _ name: String, _ kind: Kind, response: ATTOpcode? = nil) {
            self.opcode = opcode; self.name = name; self.kind = kind; self.response = response
        }
    }

    /// The one opcode table, from the PDUs' declarations.
    public static var table: [UInt8: Declaration] { ATT.table }

    public var info: Declaration? { ATT.table[rawValue] }
    public var name: String { info?.name ?? "Unknown ATT opcode" }
    /// Requests and indications that a peer sends and that attled must answer,
    /// judged by the method bits when the opcode is unknown (command flag 0x40 clear).
    public var kind: Kind { info?.kind ?? .unknown }
    public var isCommandFlagSet: Bool { rawValue & 0x40 != 0 }
    public var description: String { "\(name) (0x\(Hex.int(rawValue, width: 2)))" }
}

/// ATT error codes (Core Vol 3 Part F 3.4.1.1, Core Supplement Part B). Open.
public struct ATTErrorCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible, ByteCode {
    public let rawValue: UInt8
    /// Any error code byte, including ones not named below.
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    public static let invalidHandle = ATTErrorCode(rawValue: 0x01)
    public static let readNotPermitted = ATTErrorCode(rawValue: 0x02)
    public static let writeNotPermitted = ATTErrorCode(rawValue: 0x03)
    public static let invalidPDU = ATTErrorCode(rawValue: 0x04)
    public static let insufficientAuthentication = ATTErrorCode(rawValue: 0x05)
    public static let encryptionKeySizeTooShort = ATTErrorCode(rawValue: 0x0C)
    public static let insufficientEncryption = ATTErrorCode(rawValue: 0x0F)
    public static let requestNotSupported = ATTErrorCode(rawValue: 0x06)
    public static let invalidOffset = ATTErrorCode(rawValue: 0x07)
    public static let attributeNotFound = ATTErrorCode(rawValue: 0x0A)
    public static let attributeNotLong = ATTErrorCode(rawValue: 0x0B)
    public static let insufficientAuthorization = ATTErrorCode(rawValue: 0x08)
    public static let prepareQueueFull = ATTErrorCode(rawValue: 0x09)
    public static let invalidAttributeValueLength = ATTErrorCode(rawValue: 0x0D)
    public static let unlikelyError = ATTErrorCode(rawValue: 0x0E)
    public static let unsupportedGroupType = ATTErrorCode(rawValue: 0x10)

    static let names: [UInt8: String] = [
        0x01: "Invalid Handle", 0x02: "Read Not Permitted", 0x03: "Write Not Permitted", 0x04: "Invalid PDU",
        0x05: "Insufficient Authentication", 0x06: "Request Not Supported", 0x07: "Invalid Offset",
        0x08: "Insufficient Authorization", 0x09: "Prepare Queue Full", 0x0A: "Attribute Not Found",
        0x0B: "Attribute Not Long", 0x0C: "Encryption Key Size Too Short", 0x0D: "Invalid Attribute Value Length",
        0x0E: "Unlikely Error", 0x0F: "Insufficient Encryption", 0x10: "Unsupported Group Type",
        0x11: "Insufficient Resources", 0x12: "Database Out Of Sync", 0x13: "Value Not Allowed",
        0xFC: "Write Request Rejected", 0xFD: "Client Characteristic Configuration Descriptor Improperly Configured",
        0xFE: "Procedure Already in Progress", 0xFF: "Out of Range",
    ]
    public var name: String {
        if let n = Self.names[rawValue] { return n }
        return (0x80...0x9F).contains(rawValue) ? "Application Error" : "Reserved error"
    }
    public var description: String { "\(name) (0x\(Hex.int(rawValue, width: 2)))" }
}
