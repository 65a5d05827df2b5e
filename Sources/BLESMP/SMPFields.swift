import BLEWire

/// SMP's one-octet fields the peer sends (a reason, AuthReq, a keypress
/// type) are BLEWire's `ByteCode`.
public typealias SMPByteCode = ByteCode

extension PairingFailedReason: ByteCode {}
extension AuthReq: ByteCode {}
extension KeypressNotificationType: ByteCode {}

/// The walker of an SMP PDU's fields, in spec order. Each PDU's fields are
/// declared once (`SMPPDU.fields`); a reader decodes them, a writer encodes
/// them, and two printers give the trace's lines and the one-line
/// description. `inline` is a field's label in the one-line form (nil: the
/// value alone); a `secret` field is masked unless keys are shown.
public protocol SMPFieldWalker {
    /// The six octets of Pairing Request / Response (3.5.1).
    mutating func parameters(_ v: inout PairingParameters) throws
    /// Exactly `count` octets, least significant first (printed most significant first).
    mutating func value(_ name: String, inline: String?, _ v: inout [UInt8], count: Int, secret: Bool) throws
    /// One octet with a meaning.
    mutating func code<C: ByteCode>(_ name: String, inline: String?, _ v: inout C) throws
    /// A 16-bit value (EDIV).
    mutating func u16(_ name: String, inline: String?, _ v: inout UInt16, secret: Bool) throws
    /// A 64-bit value (Rand).
    mutating func u64(_ name: String, inline: String?, _ v: inout UInt64, secret: Bool) throws
    /// AddrType (0 public, 1 static random) and BD_ADDR (3.6.5).
    mutating func address(_ name: String, _ type: inout UInt8, _ v: inout BDAddress) throws
    /// The rest of an unknown PDU.
    mutating func rest(_ v: inout [UInt8]) throws
}

/// Decodes fields, noting where the `secret` ones lie (for a masked hex dump).
struct SMPFieldReader: SMPFieldWalker {
    var r: ByteReader
    /// The byte ranges of the `secret` fields read so far (offsets into
    /// `r.bytes`); one the bytes cut short runs to their end.
    var secrets: [Range<Int>] = []
    private mutating func note(_ secret: Bool, _ size: Int) {
        if secret { secrets.append(r.offset..<r.offset + min(size, r.remaining)) }
    }
    mutating func parameters(_ v: inout PairingParameters) throws { v = try PairingParameters.read(&r) }
    mutating func value(_ name: String, inline: String?, _ v: inout [UInt8], count: Int, secret: Bool) throws {
        note(secret, count); v = try r.bytes(count, name)
    }
    mutating func code<C: ByteCode>(_ name: String, inline: String?, _ v: inout C) throws { v = C(rawValue: try r.u8(name)) }
    mutating func u16(_ name: String, inline: String?, _ v: inout UInt16, secret: Bool) throws { note(secret, 2); v = try r.u16(name) }
    mutating func u64(_ name: String, inline: String?, _ v: inout UInt64, secret: Bool) throws { note(secret, 8); v = try r.u64(name) }
    mutating func address(_ name: String, _ type: inout UInt8, _ v: inout BDAddress) throws {
        type = try r.u8("AddrType"); v = try BDAddress.read(&r, "BD_ADDR")
    }
    mutating func rest(_ v: inout [UInt8]) throws { v = r.rest() }
}

/// Fixed-size fields encode to exactly their size (shorter arrays are
/// zero-padded, longer ones cut), so every encoding decodes.
struct SMPFieldWriter: SMPFieldWalker {
    var w = ByteWriter(capacity: 65)
    mutating func parameters(_ v: inout PairingParameters) { v.write(&w) }
    mutating func value(_ name: String, inline: String?, _ v: inout [UInt8], count: Int, secret: Bool) {
        w.append(v.prefix(count)); for _ in 0..<max(0, count - v.count) { w.u8(0) }
    }
    mutating func code<C: ByteCode>(_ name: String, inline: String?, _ v: inout C) { w.u8(v.rawValue) }
    mutating func u16(_ name: String, inline: String?, _ v: inout UInt16, secret: Bool) { w.u16(v) }
    mutating func u64(_ name: String, inline: String?, _ v: inout UInt64, secret: Bool) { w.u64(v) }
    mutating func address(_ name: String, _ type: inout UInt8, _ v: inout BDAddress) { w.u8(type); v.write(&w) }
    mutating func rest(_ v: inout [UInt8]) { w.append(v) }
}

/// Prints fields: `lines` one per field (`Name: value`, the trace), or
/// `inline` all on one line (`LTK <hidden>`, the one-line description).
struct SMPFieldPrinter: SMPFieldWalker {
    let showKeys: Bool
    var lines: [String] = []
    var inline: [String] = []

    private mutating func put(_ name: String, _ label: String?, _ text: String) {
        lines.append("\(name): \(text)")
        inline.append(label.map { "\($0) \(text)" } ?? text)
    }
    static func addressType(_ t: UInt8) -> String { t == 0 ? "public" : t == 1 ? "static random" : "reserved 0x\(Hex.int(t, width: 2))" }

    mutating func parameters(_ p: inout PairingParameters) {
        lines += ["IO capability: 0x\(Hex.int(p.ioCapability.rawValue, width: 2)) (\(p.ioCapability))",
                  "OOB data: 0x\(Hex.int(p.oobDataFlag.rawValue, width: 2))",
                  "Authentication requirement: \(p.authReq)",
                  "Max encryption key size: \(p.maxEncryptionKeySize)",
                  "Initiator key distribution: \(p.initiatorKeyDistribution)",
                  "Responder key distribution: \(p.responderKeyDistribution)"]
        inline.append(p.description)
    }
    mutating func value(_ name: String, inline label: String?, _ v: inout [UInt8], count: Int, secret: Bool) {
        put(name, label, secret && !showKeys ? "<hidden>" : Hex.string(v.reversed(), separator: ""))
    }
    mutating func code<C: ByteCode>(_ name: String, inline label: String?, _ v: inout C) { put(name, label, v.description) }
    mutating func u16(_ name: String, inline label: String?, _ v: inout UInt16, secret: Bool) {
        put(name, label, secret && !showKeys ? "<hidden>" : "0x" + Hex.int(v, width: 4))
    }
    mutating func u64(_ name: String, inline label: String?, _ v: inout UInt64, secret: Bool) {
        put(name, label, secret && !showKeys ? "<hidden>" : "0x" + Hex.int(v, width: 16))
    }
    mutating func address(_ name: String, _ type: inout UInt8, _ v: inout BDAddress) {
        put(name, nil, "\(v) (\(Self.addressType(type)))")
    }
    mutating func rest(_ v: inout [UInt8]) { put("Parameters", nil, Hex.string(v)) }
}
