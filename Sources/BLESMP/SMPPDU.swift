import BLEWire

/// SMP command codes (Core Vol 3 Part H 3.3, Table 3.3). Open: an unknown
/// code survives decoding and prints as hex.
public struct SMPCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt8
    /// Any code byte, including ones not named below.
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    public static let pairingRequest = SMPCode(rawValue: 0x01)
    public static let pairingResponse = SMPCode(rawValue: 0x02)
    public static let pairingConfirm = SMPCode(rawValue: 0x03)
    public static let pairingRandom = SMPCode(rawValue: 0x04)
    public static let pairingFailed = SMPCode(rawValue: 0x05)
    public static let encryptionInformation = SMPCode(rawValue: 0x06)
    public static let centralIdentification = SMPCode(rawValue: 0x07)
    public static let identityInformation = SMPCode(rawValue: 0x08)
    public static let identityAddressInformation = SMPCode(rawValue: 0x09)
    public static let signingInformation = SMPCode(rawValue: 0x0A)
    public static let securityRequest = SMPCode(rawValue: 0x0B)
    public static let pairingPublicKey = SMPCode(rawValue: 0x0C)
    public static let pairingDHKeyCheck = SMPCode(rawValue: 0x0D)
    public static let keypressNotification = SMPCode(rawValue: 0x0E)

    /// One row per command: its name and its fixed parameter length (every
    /// SMP command has one, 3.5 and 3.6), which comes from the PDU's
    /// declaration (`SMPPDU.fields`).
    public struct Info: Sendable {
        public let name: String
        public let parameterLength: Int
    }

    /// The one SMP names table.
    static let names: [UInt8: String] = [
        0x01: "Pairing Request", 0x02: "Pairing Response", 0x03: "Pairing Confirm", 0x04: "Pairing Random",
        0x05: "Pairing Failed", 0x06: "Encryption Information", 0x07: "Central Identification",
        0x08: "Identity Information", 0x09: "Identity Address Information", 0x0A: "Signing Information",
        0x0B: "Security Request", 0x0C: "Pairing Public Key", 0x0D: "Pairing DHKey Check",
        0x0E: "Pairing Keypress Notification",
    ]

    public static let table: [UInt8: Info] = Dictionary(uniqueKeysWithValues: names.compactMap { code, name in
        SMPPDU.blank(SMPCode(rawValue: code)).map { (code, Info(name: name, parameterLength: $0.encoded.count - 1)) }
    })

    public var info: Info? { Self.table[rawValue] }
    /// PDUs whose parameters are key material, masked in traces: those with
    /// a field declared `secret` (`SMPPDU.fields`): the pairing random values
    /// (with Just Works legacy pairing they give the STK away), the LTK,
    /// EDIV/Rand, IRK and CSRK.
    public var carriesSecrets: Bool { Self.secretCodes.contains(rawValue) }
    static let secretCodes: Set<UInt8> = Set(names.keys.filter { c in
        SMPPDU.blank(SMPCode(rawValue: c)).map { !SMPPDU.secretRanges($0.encoded).isEmpty } ?? false
    })
    public var name: String { info?.name ?? "Unknown SMP command 0x\(Hex.int(rawValue, width: 2))" }
    public var description: String { name }
}

/// One SMP PDU (Core Vol 3 Part H 3.5, 3.6): the code octet, then its
/// parameters. Multi-octet values are least significant octet first, as on
/// the wire. Fixed-size fields encode to exactly their size (shorter arrays
/// are zero-padded, longer ones cut), so every encoding decodes.
public enum SMPPDU: Hashable, Sendable {
    case pairingRequest(PairingParameters)
    case pairingResponse(PairingParameters)
    /// Mconfirm / Sconfirm (legacy) or Ca / Cb (Secure Connections), 16 bytes.
    case pairingConfirm([UInt8])
    /// Mrand / Srand or Na / Nb, 16 bytes.
    case pairingRandom([UInt8])
    case pairingFailed(PairingFailedReason)
    case encryptionInformation(ltk: SMPSecret)
    case centralIdentification(ediv: UInt16, rand: UInt64)
    case identityInformation(irk: SMPSecret)
    /// AddrType 0x00 public, 0x01 static random.
    case identityAddressInformation(type: UInt8, address: BDAddress)
    case signingInformation(csrk: SMPSecret)
    case securityRequest(AuthReq)
    /// X and Y, 32 bytes each.
    case pairingPublicKey(x: [UInt8], y: [UInt8])
    /// Ea / Eb, 16 bytes.
    case pairingDHKeyCheck([UInt8])
    case keypressNotification(KeypressNotificationType)
    /// A code this stack does not know, with its parameters.
    case unknown(SMPCode, [UInt8])

    public var code: SMPCode {
        switch self {
        case .pairingRequest: return .pairingRequest
        case .pairingResponse: return .pairingResponse
        case .pairingConfirm: return .pairingConfirm
        case .pairingRandom: return .pairingRandom
        case .pairingFailed: return .pairingFailed
        case .encryptionInformation: return .encryptionInformation
        case .centralIdentification: return .centralIdentification
        case .identityInformation: return .identityInformation
        case .identityAddressInformation: return .identityAddressInformation
        case .signingInformation: return .signingInformation
        case .securityRequest: return .securityRequest
        case .pairingPublicKey: return .pairingPublicKey
        case .pairingDHKeyCheck: return .pairingDHKeyCheck
        case .keypressNotification: return .keypressNotification
        case let .unknown(c, _): return c
        }
    }

    /// The one declaration of every PDU's parameters (3.5, 3.6), in
    /// order: the encoder, the decoder and both printers walk it.
    public mutating func fields(_ f: inout some SMPFieldWalker) throws {
        switch self {
        case var .pairingRequest(p): try f.parameters(&p); self = .pairingRequest(p)
        case var .pairingResponse(p): try f.parameters(&p); self = .pairingResponse(p)
        case var .pairingConfirm(v):
            try f.value("Confirm value", inline: nil, &v, count: 16, secret: false); self = .pairingConfirm(v)
        case var .pairingRandom(v):
            try f.value("Random value", inline: nil, &v, count: 16, secret: true); self = .pairingRandom(v)
        case var .pairingFailed(r): try f.code("Reason", inline: nil, &r); self = .pairingFailed(r)
        case let .encryptionInformation(k):
            var b = k.bytes
            try f.value("Long term key", inline: "LTK", &b, count: 16, secret: true); self = .encryptionInformation(ltk: SMPSecret(b))
        case var .centralIdentification(ediv, rand):
            try f.u16("EDIV", inline: "EDIV", &ediv, secret: true)
            try f.u64("Rand", inline: "Rand", &rand, secret: true)
            self = .centralIdentification(ediv: ediv, rand: rand)
        case let .identityInformation(k):
            var b = k.bytes
            try f.value("Identity resolving key", inline: "IRK", &b, count: 16, secret: true); self = .identityInformation(irk: SMPSecret(b))
        case var .identityAddressInformation(type, address):
            try f.address("Identity address", &type, &address); self = .identityAddressInformation(type: type, address: address)
        case let .signingInformation(k):
            var b = k.bytes
            try f.value("Signature key", inline: "CSRK", &b, count: 16, secret: true); self = .signingInformation(csrk: SMPSecret(b))
        case var .securityRequest(a): try f.code("Authentication requirement", inline: "AuthReq", &a); self = .securityRequest(a)
        case var .pairingPublicKey(x, y):
            try f.value("Public key X", inline: "X", &x, count: 32, secret: false)
            try f.value("Public key Y", inline: "Y", &y, count: 32, secret: false)
            self = .pairingPublicKey(x: x, y: y)
        case var .pairingDHKeyCheck(v):
            try f.value("DHKey check", inline: nil, &v, count: 16, secret: false); self = .pairingDHKeyCheck(v)
        case var .keypressNotification(t): try f.code("Notification type", inline: nil, &t); self = .keypressNotification(t)
        case .unknown(let c, var p): try f.rest(&p); self = .unknown(c, p)
        }
    }

    /// A PDU of `code` with every field zero, for the decoder to fill; nil for an unknown code.
    static func blank(_ code: SMPCode) -> SMPPDU? {
        let zeroParameters = PairingParameters(ioCapability: .displayOnly, authReq: [], maxEncryptionKeySize: 0,
                                               initiatorKeyDistribution: [], responderKeyDistribution: [])
        switch code {
        case .pairingRequest: return .pairingRequest(zeroParameters)
        case .pairingResponse: return .pairingResponse(zeroParameters)
        case .pairingConfirm: return .pairingConfirm([])
        case .pairingRandom: return .pairingRandom([])
        case .pairingFailed: return .pairingFailed(PairingFailedReason(rawValue: 0))
        case .encryptionInformation: return .encryptionInformation(ltk: SMPSecret([]))
        case .centralIdentification: return .centralIdentification(ediv: 0, rand: 0)
        case .identityInformation: return .identityInformation(irk: SMPSecret([]))
        case .identityAddressInformation: return .identityAddressInformation(type: 0, address: .zero)
        case .signingInformation: return .signingInformation(csrk: SMPSecret([]))
        case .securityRequest: return .securityRequest([])
        case .pairingPublicKey: return .pairingPublicKey(x: [], y: [])
        case .pairingDHKeyCheck: return .pairingDHKeyCheck([])
        case .keypressNotification: return .keypressNotification(KeypressNotificationType(rawValue: 0))
        default: return nil
        }
    }

    /// The bytes of this PDU, code first.
    public var encoded: [UInt8] {
        var w = SMPFieldWriter()
        w.w.u8(code.rawValue)
        var copy = self
        try? copy.fields(&w)  // the writer never throws
        return w.w.bytes
    }

    /// Decodes one PDU. A known code must carry exactly its parameter length
    /// (3.3); a violation throws `WireError`, never traps. An unknown code
    /// decodes to `.unknown` with whatever follows it.
    /// - Throws: `WireError.truncated` when a known PDU is shorter than its
    ///   parameter length, `WireError.trailingBytes` when it is longer.
    public static func decode(_ bytes: [UInt8]) throws -> SMPPDU {
        var r = ByteReader(bytes)
        let code = SMPCode(rawValue: try r.u8("SMP code"))
        guard var pdu = blank(code), let info = code.info else { return .unknown(code, r.rest()) }
        if r.remaining < info.parameterLength {
            throw WireError.truncated(field: info.name, needed: info.parameterLength, available: r.remaining)
        }
        var reader = SMPFieldReader(r: r)
        try pdu.fields(&reader)
        try reader.r.expectEnd(info.name)
        return pdu
    }

    // MARK: Tracing

    /// The byte ranges of a PDU's bytes (code first) that hold fields its
    /// declaration marks `secret`: what a hex dump masks. Bytes that do not
    /// match the declaration (cut short, or longer) are masked from its first
    /// secret field to their end; an unknown code has none.
    public static func secretRanges(_ bytes: [UInt8]) -> [Range<Int>] {
        guard let c = bytes.first, var pdu = blank(SMPCode(rawValue: c)) else { return [] }
        var reader = SMPFieldReader(r: ByteReader(bytes, range: 1..<bytes.count))
        do {
            try pdu.fields(&reader)
            try reader.r.expectEnd("parameters")
            return reader.secrets
        } catch {
            return reader.secrets.first.map { [$0.lowerBound..<bytes.count] } ?? []
        }
    }

    /// One line for logs. Key material (LTK, IRK, CSRK, EDIV, Rand and the
    /// pairing random values, which with Just Works legacy pairing give the
    /// STK away) is masked unless `showKeys` is set (`--trace=keys`).
    public func describe(showKeys: Bool) -> String {
        var p = SMPFieldPrinter(showKeys: showKeys)
        var copy = self
        try? copy.fields(&p)
        if case let .unknown(c, params) = self { return "\(c.name): \(Hex.string(params))" }
        return "\(code.name): " + p.inline.joined(separator: " ")
    }

    /// The trace's lines: one per field, keys masked unless `showKeys`.
    public func traceFields(showKeys: Bool) -> [String] {
        var p = SMPFieldPrinter(showKeys: showKeys)
        var copy = self
        try? copy.fields(&p)
        return p.lines
    }

    /// The trace's summary of a PDU's bytes: name, code and parameter length,
    /// e.g. "Pairing Failed (0x05) len 1"; "empty PDU" for no bytes.
    public static func traceSummary(_ bytes: [UInt8]) -> String {
        guard let c = bytes.first else { return "empty PDU" }
        return "\(SMPCode(rawValue: c).info?.name ?? "Unknown SMP command") (0x\(Hex.int(c, width: 2))) len \(bytes.count - 1)"
    }

    /// The trace's lines for a PDU's bytes; an undecodable one gives the
    /// reason and its hex, key material hidden unless `showKeys`.
    public static func traceFields(bytes: [UInt8], showKeys: Bool) -> [String] {
        do {
            return try decode(bytes).traceFields(showKeys: showKeys)
        } catch {
            let secret = bytes.first.map { SMPCode(rawValue: $0).carriesSecrets } ?? false
            return ["malformed (\(error)): " + (secret && !showKeys ? "<\(bytes.count - 1) bytes hidden>" : Hex.string(bytes.dropFirst()))]
        }
    }

    /// Describes an undecodable PDU for the tracer: the reason and its hex.
    /// Key material of a known key PDU stays hidden unless `showKeys`.
    public static func describe(bytes: [UInt8], showKeys: Bool) -> String {
        do {
            return try decode(bytes).describe(showKeys: showKeys)
        } catch {
            guard let c = bytes.first else { return "SMP: empty PDU" }
            let code = SMPCode(rawValue: c)
            let body = code.carriesSecrets && !showKeys ? "<\(bytes.count - 1) bytes hidden>" : Hex.string(bytes.dropFirst())
            return "\(code.name): malformed (\(error)): \(body)"
        }
    }
}

extension SMPPDU: CustomStringConvertible {
    /// Masks keys: `describe(showKeys: false)`.
    public var description: String { describe(showKeys: false) }
}
