import BLEWire

// The trace's account of LE signalling commands, next to their decoders
// (Signalling.swift); SMP describes its own PDUs (BLESMP). One line per field, not indented (the tracer
// indents).

/// One 16-bit field of a signalling command: its name and how a trace spells it.
public struct SignallingField: Sendable {
    public let name: String
    public let show: @Sendable (UInt16) -> String
    /// A field shown as `0xHHHH` (CIDs, codes), or by `show`.
    public init(_ name: String, _ show: @escaping @Sendable (UInt16) -> String = { "0x" + Hex.int($0, width: 4) }) {
        self.name = name; self.show = show
    }
    static func decimal(_ name: String) -> SignallingField { SignallingField(name) { String($0) } }
}

extension SignallingCommand {
    /// One command, declared once: its code, name, whether it is a request,
    /// and its data as 16-bit fields (every LE signalling field is one,
    /// Core Vol 3 Part A 4); `trailing` when data may follow them (Command
    /// Reject's reason data). Encoding, decoding and the trace's lines come
    /// from it.
    public struct Declaration: Sendable {
        public let code: UInt8
        public let name: String
        public let isRequest: Bool
        public let fields: [SignallingField]
        public let trailing: Bool
        init(_ code: UInt8, _ name: String, request: Bool = false, _ fields: [SignallingField], trailing: Bool = false) {
            self.code = code; self.name = name; self.isRequest = request; self.fields = fields; self.trailing = trailing
        }
    }

    private static func intervalText(_ v: UInt16) -> String { "\(v) (\(formatMs(us: UInt64(v) * 1250, decimals: 3)) msec)" }

    /// The LE signalling commands (Core Vol 3 Part A 4.1-4.26).
    public static let declarations: [Declaration] = [
        Declaration(0x01, "Command Reject", [SignallingField("Reason") { r in
            let names = ["Command not understood", "Signaling MTU exceeded", "Invalid CID in request"]
            return "\(r < 3 ? names[Int(r)] : "reserved") (0x\(Hex.int(r, width: 4)))"
        }], trailing: true),
        Declaration(0x06, "Disconnection Request", request: true, [SignallingField("Destination CID"), SignallingField("Source CID")]),
        Declaration(0x07, "Disconnection Response", [SignallingField("Destination CID"), SignallingField("Source CID")]),
        Declaration(0x12, "Connection Parameter Update Request", request: true, [
            SignallingField("Min interval", intervalText), SignallingField("Max interval", intervalText),
            .decimal("Peripheral latency"),
            SignallingField("Timeout multiplier") { "\($0) (\(formatMs(us: UInt64($0) * 10_000, decimals: 0)) msec)" },
        ]),
        Declaration(0x13, "Connection Parameter Update Response", [SignallingField("Result") { r in
            "\(r == 0 ? "Connection Parameters accepted" : r == 1 ? "Connection Parameters rejected" : "reserved") (0x\(Hex.int(r, width: 4)))"
        }]),
        Declaration(0x14, "LE Credit Based Connection Request", request: true, [
            SignallingField("SPSM"), SignallingField("Source CID"), .decimal("MTU"), .decimal("MPS"), .decimal("Initial credits"),
        ]),
        Declaration(0x15, "LE Credit Based Connection Response", [
            SignallingField("Destination CID"), .decimal("MTU"), .decimal("MPS"), .decimal("Initial credits"), SignallingField("Result"),
        ]),
        Declaration(0x16, "Flow Control Credit Indication", [SignallingField("CID"), .decimal("Credits")]),
        Declaration(0x17, "Credit Based Connection Request", request: true, [], trailing: true),
        Declaration(0x18, "Credit Based Connection Response", [], trailing: true),
        Declaration(0x19, "Credit Based Reconfigure Request", request: true, [], trailing: true),
        Declaration(0x1A, "Credit Based Reconfigure Response", [SignallingField("Result")]),
    ]

    private static let byCode: [UInt8: Declaration] = Dictionary(declarations.map { ($0.code, $0) }, uniquingKeysWith: { a, _ in a })

    /// The declaration of `code`, nil for a code Core Vol 3 Part A 4 does not define on LE.
    public static func declaration(_ code: UInt8) -> Declaration? { byCode[code] }

    /// A command from its declared fields' values, in order.
    public static func make(_ code: UInt8, identifier: UInt8, _ values: [UInt16]) -> SignallingCommand {
        var w = ByteWriter(capacity: 2 * values.count)
        for v in values { w.u16(v) }
        return SignallingCommand(code: code, identifier: identifier, data: w.bytes)
    }

    /// The declared fields' values (the data must hold exactly them, or at
    /// least them for a command with trailing data).
    /// - Throws: `WireError` for an undeclared code or data of the wrong length.
    public func values() throws -> [UInt16] {
        guard let d = Self.declaration(code) else { throw WireError.invalid(field: "Code", reason: "0x\(Hex.int(code, width: 2)) is not an LE signalling command") }
        var r = ByteReader(data)
        let v = try d.fields.map { try r.u16($0.name) }
        if !d.trailing { try r.expectEnd(d.name) }
        return v
    }

    /// Name, code, identifier and data length, e.g.
    /// "Command Reject (0x01) ident 2 len 2".
    public var traceSummary: String {
        "\(Self.name(code)) (0x\(Hex.int(code, width: 2))) ident \(identifier) len \(data.count)"
    }

    /// One line per declared field; an undeclared command, or trailing data, as hex.
    public var traceFields: [String] {
        guard let d = Self.declaration(code), !d.fields.isEmpty else { return Hex.lines(data) }
        guard let v = try? values() else { return ["malformed: " + Hex.string(data)] }
        return zip(d.fields, v).map { "\($0.name): \($0.show($1))" } + (d.trailing && data.count > 2 * v.count ? Hex.lines(Array(data.dropFirst(2 * v.count))) : [])
    }
}
