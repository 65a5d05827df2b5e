import BLEWire

/// ATT opcodes (Core Vol 3 Part F 3.4.8). Open: unknown opcodes survive.
public struct ATTOpcode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
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

    /// One row of the opcode table: name, kind, and for requests the response opcode.
    public struct Info: Sendable {
        public let name: String
        public let kind: Kind
        public let response: ATTOpcode?
    }

    static let table: [UInt8: Info] = [
        0x01: Info(name: "Error Response", kind: .response, response: nil),
        0x02: Info(name: "Exchange MTU Request", kind: .request, response: ATTOpcode(rawValue: 0x03)),
        0x03: Info(name: "Exchange MTU Response", kind: .response, response: nil),
        0x04: Info(name: "Find Information Request", kind: .request, response: ATTOpcode(rawValue: 0x05)),
        0x05: Info(name: "Find Information Response", kind: .response, response: nil),
        0x06: Info(name: "Find By Type Value Request", kind: .request, response: ATTOpcode(rawValue: 0x07)),
        0x07: Info(name: "Find By Type Value Response", kind: .response, response: nil),
        0x08: Info(name: "Read By Type Request", kind: .request, response: ATTOpcode(rawValue: 0x09)),
        0x09: Info(name: "Read By Type Response", kind: .response, response: nil),
        0x0A: Info(name: "Read Request", kind: .request, response: ATTOpcode(rawValue: 0x0B)),
        0x0B: Info(name: "Read Response", kind: .response, response: nil),
        0x0C: Info(name: "Read Blob Request", kind: .request, response: ATTOpcode(rawValue: 0x0D)),
        0x0D: Info(name: "Read Blob Response", kind: .response, response: nil),
        0x0E: Info(name: "Read Multiple Request", kind: .request, response: ATTOpcode(rawValue: 0x0F)),
        0x0F: Info(name: "Read Multiple Response", kind: .response, response: nil),
        0x10: Info(name: "Read By Group Type Request", kind: .request, response: ATTOpcode(rawValue: 0x11)),
        0x11: Info(name: "Read By Group Type Response", kind: .response, response: nil),
        0x12: Info(name: "Write Request", kind: .request, response: ATTOpcode(rawValue: 0x13)),
        0x13: Info(name: "Write Response", kind: .response, response: nil),
        0x16: Info(name: "Prepare Write Request", kind: .request, response: ATTOpcode(rawValue: 0x17)),
        0x17: Info(name: "Prepare Write Response", kind: .response, response: nil),
        0x18: Info(name: "Execute Write Request", kind: .request, response: ATTOpcode(rawValue: 0x19)),
        0x19: Info(name: "Execute Write Response", kind: .response, response: nil),
        0x1B: Info(name: "Handle Value Notification", kind: .notification, response: nil),
        0x1D: Info(name: "Handle Value Indication", kind: .indication, response: ATTOpcode(rawValue: 0x1E)),
        0x1E: Info(name: "Handle Value Confirmation", kind: .confirmation, response: nil),
        0x20: Info(name: "Read Multiple Variable Request", kind: .request, response: ATTOpcode(rawValue: 0x21)),
        0x21: Info(name: "Read Multiple Variable Response", kind: .response, response: nil),
        0x23: Info(name: "Multiple Handle Value Notification", kind: .notification, response: nil),
        0x52: Info(name: "Write Command", kind: .command, response: nil),
        0xD2: Info(name: "Signed Write Command", kind: .command, response: nil),
    ]

    public var info: Info? { Self.table[rawValue] }
    public var name: String { info?.name ?? "Unknown ATT opcode" }
    /// Requests and indications that a peer sends and that attled must answer,
    /// judged by the method bits when the opcode is unknown (command flag 0x40 clear).
    public var kind: Kind { info?.kind ?? .unknown }
    public var isCommandFlagSet: Bool { rawValue & 0x40 != 0 }
    public var description: String { "\(name) (0x\(Hex.int(rawValue, width: 2)))" }
}

/// ATT error codes (Core Vol 3 Part F 3.4.1.1, Core Supplement Part B). Open.
public struct ATTErrorCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
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
