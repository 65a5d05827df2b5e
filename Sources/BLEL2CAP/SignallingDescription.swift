import BLEWire

// The trace's account of LE signalling commands, next to their decoders
// (Signalling.swift); SMP describes its own PDUs (BLESMP). One line per field, not indented (the tracer
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
