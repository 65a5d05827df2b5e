import BLEWire
import BLEHCI

/// Fixed channel identifiers on an LE-U link (Core Vol 3 Part A 2.1).
public enum CID {
    public static let att: UInt16 = 0x0004
    public static let leSignalling: UInt16 = 0x0005
    public static let smp: UInt16 = 0x0006

    /// A human name for a channel ID: the fixed channels, "dynamic" from 0x0040, "reserved" otherwise.
    public static func name(_ cid: UInt16) -> String {
        switch cid {
        case att: return "ATT"
        case leSignalling: return "LE Signalling"
        case smp: return "SMP"
        case 0x0001: return "BR/EDR Signalling"
        case 0x0003: return "AMP Manager"
        case 0x0007: return "BR/EDR Security Manager"
        default: return cid >= 0x0040 ? "dynamic" : "reserved"
        }
    }
}

/// An L2CAP LE signalling command (Core Vol 3 Part A 4).
public struct SignallingCommand: Hashable, Sendable {
    public var code: UInt8
    public var identifier: UInt8
    public var data: [UInt8]

    /// A command from its code, identifier (to match a response to its request) and data.
    public init(code: UInt8, identifier: UInt8, data: [UInt8]) {
        self.code = code; self.identifier = identifier; self.data = data
    }

    public static let commandReject: UInt8 = 0x01
    public static let disconnectionRequest: UInt8 = 0x06
    public static let disconnectionResponse: UInt8 = 0x07
    public static let connectionParameterUpdateRequest: UInt8 = 0x12
    public static let connectionParameterUpdateResponse: UInt8 = 0x13
    public static let leCreditBasedConnectionRequest: UInt8 = 0x14
    public static let leCreditBasedConnectionResponse: UInt8 = 0x15
    public static let flowControlCredit: UInt8 = 0x16

    /// The spec name of a signalling command code (Core Vol 3 Part A 4), or "Unknown signalling command".
    public static func name(_ code: UInt8) -> String { declaration(code)?.name ?? "Unknown signalling command" }

    /// Codes that are requests (expect an answer) on the LE signalling channel.
    public static func isRequest(_ code: UInt8) -> Bool { declaration(code)?.isRequest ?? false }

    public var encoded: [UInt8] {
        var w = ByteWriter(capacity: 4 + data.count)
        w.u8(code); w.u8(identifier); w.u16(UInt16(truncatingIfNeeded: data.count)); w.append(data)
        return w.bytes
    }

    /// Decodes one command from a C-frame payload (LE carries one command per frame).
    /// - Throws: `WireError` if the data is shorter than its Length field or followed by extra bytes.
    public static func decode(_ bytes: [UInt8]) throws -> SignallingCommand {
        var r = ByteReader(bytes)
        let code = try r.u8("Code")
        let id = try r.u8("Identifier")
        let len = Int(try r.u16("Length"))
        let data = try r.bytes(len, "Data")
        try r.expectEnd("signalling command")
        return SignallingCommand(code: code, identifier: id, data: data)
    }

    // Builders and decoders for the commands attled handles, from the declarations.

    /// Command Reject (4.1) answering the request `identifier`; reason 0x0000 is "Command not understood".
    public static func commandReject(identifier: UInt8, reason: UInt16 = 0x0000) -> SignallingCommand {
        make(commandReject, identifier: identifier, [reason])
    }

    /// Connection Parameter Update Response (4.21): result 0x0000 accepted, 0x0001 rejected.
    public static func connectionParameterUpdateResponse(identifier: UInt8, accepted: Bool) -> SignallingCommand {
        make(connectionParameterUpdateResponse, identifier: identifier, [accepted ? 0 : 1])
    }

    /// Connection Parameter Update Request (4.20): interval min and max, latency
    /// and timeout from `p` (the CE lengths have no field in this command).
    public static func connectionParameterUpdateRequest(identifier: UInt8, _ p: ConnectionParameters) -> SignallingCommand {
        make(connectionParameterUpdateRequest, identifier: identifier, [p.intervalMin, p.intervalMax, p.latency, p.supervisionTimeout])
    }

    /// The parameters of a Connection Parameter Update Request (4.20).
    /// - Throws: `WireError` if the data is not exactly 8 bytes.
    public func connectionParameters() throws -> ConnectionParameters {
        guard code == Self.connectionParameterUpdateRequest else {
            throw WireError.invalid(field: "Code", reason: "\(Self.name(code)) is not a Connection Parameter Update Request")
        }
        let v = try values()
        return ConnectionParameters(intervalMin: v[0], intervalMax: v[1], latency: v[2], supervisionTimeout: v[3])
    }
}
