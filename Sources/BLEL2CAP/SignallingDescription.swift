import BLEWire

// The trace's account of LE signalling commands and SMP PDUs, next to their
// decoders (Signalling.swift): one line per field, not indented (the tracer
// indents).

extension SignallingCommand {
    /// Name, code, identifier and data length, e.g.
    /// "Command Reject (0x01) ident 2 len 2".
    public var traceSummary: String {
        "\(Self.name(code)) (0x\(Hex.int(code, width: 2))) ident \(identifier) len \(data.count)"
    }

    /// One line per field of the commands attled handles (Core Vol 3 Part A
    /// 4.1, 4.20, 4.21); other commands as hex.
    public var traceFields: [String] {
        var r = ByteReader(data)
        switch code {
        case Self.connectionParameterUpdateRequest:
            guard let p = try? connectionParameters() else { return ["malformed: " + Hex.string(data)] }
            func ms(_ v: UInt16) -> String { formatMs(us: UInt64(v) * 1250, decimals: 3) + " msec" }
            return ["Min interval: \(p.intervalMin) (\(ms(p.intervalMin)))", "Max interval: \(p.intervalMax) (\(ms(p.intervalMax)))",
                    "Peripheral latency: \(p.latency)",
                    "Timeout multiplier: \(p.supervisionTimeout) (\(formatMs(us: UInt64(p.supervisionTimeout) * 10_000, decimals: 0)) msec)"]
        case Self.connectionParameterUpdateResponse:
            guard let res = try? r.u16() else { return [] }
            let meaning = res == 0 ? "Connection Parameters accepted" : res == 1 ? "Connection Parameters rejected" : "reserved"
            return ["Result: \(meaning) (0x\(Hex.int(res, width: 4)))"]
        case Self.commandReject:
            guard let reason = try? r.u16() else { return [] }
            let names = ["Command not understood", "Signaling MTU exceeded", "Invalid CID in request"]
            return ["Reason: \(reason < 3 ? names[Int(reason)] : "reserved") (0x\(Hex.int(reason, width: 4)))"]
        default:
            return Hex.lines(data)
        }
    }
}

extension SMP {
    /// Name, code and parameter length of an SMP PDU, e.g.
    /// "Pairing Failed (0x05) len 1"; "empty PDU" for no bytes.
    public static func traceSummary(_ b: [UInt8]) -> String {
        guard let code = b.first else { return "empty PDU" }
        return "\(name(code)) (0x\(Hex.int(code, width: 2))) len \(b.count - 1)"
    }

    /// One line per field of Pairing Request/Response, Pairing Failed and
    /// Security Request (Core Vol 3 Part H 3.5); other PDUs as hex.
    public static func traceFields(_ b: [UInt8]) -> [String] {
        func h8(_ v: UInt8) -> String { "0x" + Hex.int(v, width: 2) }
        var r = ByteReader(b)
        guard let code = try? r.u8() else { return [] }
        switch code {
        case pairingFailed where r.remaining >= 1:
            let reason = (try? r.u8()) ?? 0
            return ["Reason: \(reasonName(reason)) (\(h8(reason)))"]
        case securityRequest where r.remaining >= 1:
            return ["Authentication requirement: \(h8((try? r.u8()) ?? 0))"]
        case pairingRequest, 0x02:
            guard r.remaining == 6, let p = try? r.bytes(6) else { return ["malformed: \(b.count - 1) bytes, expected 6"] }
            return ["IO capability: \(h8(p[0]))", "OOB data: \(h8(p[1]))", "Authentication requirement: \(h8(p[2]))",
                    "Max encryption key size: \(p[3])", "Initiator key distribution: \(h8(p[4]))", "Responder key distribution: \(h8(p[5]))"]
        default:
            return Hex.lines(r.rest())
        }
    }
}
