import BLEWire

/// HCI's one-octet codes (a status, an address type) are BLEWire's `ByteCode`.
public typealias HCIByteCode = ByteCode

extension HCIStatus: ByteCode {}
extension AddressType: ByteCode {}

/// How a field reads in a trace.
public enum HCITrace: ExpressibleByStringLiteral, Sendable {
    /// Its own line, `label: value`.
    case line(String)
    /// Not printed (a field btmon does not show either).
    case hidden
    /// Appended to the line labelled `to`, as `text` then the value
    /// (`HCI version: 5.0 (0x09) - revision 0x0000`).
    case after(String, String)

    public init(stringLiteral label: String) { self = .line(label) }
}

/// The walker of an HCI command's, return parameters' or event's fields, in
/// spec order (Core Vol 4 Part E 7).
///
/// Each packet is declared once, by a `fields` function that names every
/// field (its spec name, for errors), its kind and how it reads in a trace;
/// three walkers give that one declaration its uses: a reader (decoding,
/// every length checked), a writer (encoding) and a printer (the trace).
public protocol HCIFieldWalker {
    /// An octet; `show` spells its value.
    mutating func u8(_ name: String, _ trace: HCITrace, _ v: inout UInt8, _ show: (UInt8) -> String) throws
    /// A 16-bit little-endian field.
    mutating func u16(_ name: String, _ trace: HCITrace, _ v: inout UInt16, secret: Bool, _ show: (UInt16) -> String) throws
    /// A 24-bit little-endian field (the extended advertising intervals, 7.8.53).
    mutating func u24(_ name: String, _ trace: HCITrace, _ v: inout UInt32, _ show: (UInt32) -> String) throws
    /// A 64-bit little-endian field (masks, Rand); a `secret` one is masked in traces unless keys are shown.
    mutating func u64(_ name: String, _ trace: HCITrace, _ v: inout UInt64, secret: Bool, _ show: (UInt64) -> String) throws
    /// A boolean octet (0 false, anything else true; written as 0 or 1).
    mutating func flag(_ name: String, _ trace: HCITrace, _ v: inout Bool, _ show: (Bool) -> String) throws
    /// A one-octet code, printed by its description.
    mutating func code<C: ByteCode>(_ name: String, _ trace: HCITrace, _ v: inout C) throws
    /// An event's Connection_Handle: 12 bits (the upper four, reserved, are masked off when read), `Handle: N`.
    /// Commands carry theirs as a plain 16-bit field (what is sent is what decodes).
    mutating func handle(_ v: inout UInt16) throws
    /// A BD_ADDR (6 octets, least significant first).
    mutating func address(_ name: String, _ trace: HCITrace, _ v: inout BDAddress, _ show: (BDAddress) -> String) throws
    /// An address type octet then a BD_ADDR, printed `label: ADDR (type)`.
    mutating func deviceAddress(_ name: String, _ trace: HCITrace, _ v: inout DeviceAddress) throws
    /// Exactly `count` octets, printed most significant first (keys); a `secret` one is masked unless keys are shown.
    mutating func bytes(_ name: String, _ trace: HCITrace, _ v: inout [UInt8], count: Int, secret: Bool) throws
    /// A length octet named `lengthName`, then that many octets (at most `maximum`), printed as hex.
    mutating func data(_ lengthName: String, _ name: String, _ trace: HCITrace, _ v: inout [UInt8], maximum: Int) throws
    /// A length octet, then always `size` octets of which the first `length` count (advertising data, 7.8.7).
    mutating func paddedData(_ lengthName: String, _ name: String, _ trace: HCITrace, _ v: inout [UInt8], size: Int) throws
    /// The octets to the end of the packet, printed as hex lines.
    mutating func rest(_ name: String, _ v: inout [UInt8]) throws
    /// A count octet, then that many entries (at least `minimum`); each entry's lines follow.
    mutating func list<E: HCIListEntry>(_ countName: String, _ trace: HCITrace, _ v: inout [E], minimum: Int) throws
}

/// An entry of a list field, declared by its fields like a packet.
public protocol HCIListEntry: Sendable {
    /// What an entry is called in an error ("0 reports").
    static var unit: String { get }
    init()
    mutating func fields(_ f: inout some HCIFieldWalker) throws
}

extension HCIListEntry {
    public static var unit: String { "entries" }
}

/// The spellings traces use, in one place.
public enum HCIShow {
    public static func dec<T: BinaryInteger>(_ v: T) -> String { String(v) }
    public static func h8(_ v: UInt8) -> String { "0x" + Hex.int(v, width: 2) }
    public static func h16(_ v: UInt16) -> String { "0x" + Hex.int(v, width: 4) }
    public static func h64(_ v: UInt64) -> String { "0x" + Hex.int(v, width: 16) }
    /// A duration in 0.625 ms units (scan interval and window, CE length).
    public static func ms625(_ v: UInt16) -> String { ms(v, 625) }
    /// A connection interval (1.25 ms units).
    public static func ms1250(_ v: UInt16) -> String { ms(v, 1250) }
    /// A supervision timeout (10 ms units).
    public static func timeout(_ v: UInt16) -> String { formatMs(us: UInt64(v) * 10_000, decimals: 0) + " msec" }
    /// Microseconds.
    public static func usec(_ v: UInt16) -> String { "\(v) usec" }
    public static func enabled(_ v: Bool) -> String { v ? "Enabled" : "Disabled" }
    public static func phy(_ v: UInt8) -> String { "LE " + LEPHYUpdateComplete.name(v) }
    static func ms(_ units: UInt16, _ unitUs: UInt64) -> String { formatMs(us: UInt64(units) * unitUs, decimals: 3) + " msec" }
}

extension HCIFieldWalker {
    /// A 16-bit count or length, in decimal.
    mutating func u16(_ name: String, _ trace: HCITrace, _ v: inout UInt16) throws { try u16(name, trace, &v, secret: false, HCIShow.dec) }
    mutating func u16(_ name: String, _ trace: HCITrace, _ v: inout UInt16, _ show: (UInt16) -> String) throws {
        try u16(name, trace, &v, secret: false, show)
    }
    mutating func u8(_ name: String, _ trace: HCITrace, _ v: inout UInt8) throws { try u8(name, trace, &v, HCIShow.h8) }
}

// MARK: - Reader

/// Decodes fields from bytes; every length is checked and a violation throws
/// `WireError` naming the field. It notes where the fields declared `secret`
/// lie, for a masked hex dump.
struct HCIFieldReader: HCIFieldWalker {
    var r: ByteReader
    /// The byte ranges of the `secret` fields read so far; one the bytes cut
    /// short runs to their end.
    var secrets: [Range<Int>] = []
    init(_ bytes: [UInt8]) { r = ByteReader(bytes) }

    private mutating func note(_ secret: Bool, _ size: Int) {
        if secret { secrets.append(r.offset..<r.offset + min(size, r.remaining)) }
    }

    mutating func u8(_ name: String, _ trace: HCITrace, _ v: inout UInt8, _ show: (UInt8) -> String) throws { v = try r.u8(name) }
    mutating func u16(_ name: String, _ trace: HCITrace, _ v: inout UInt16, secret: Bool, _ show: (UInt16) -> String) throws {
        note(secret, 2); v = try r.u16(name)
    }
    mutating func u24(_ name: String, _ trace: HCITrace, _ v: inout UInt32, _ show: (UInt32) -> String) throws { v = try r.u24(name) }
    mutating func u64(_ name: String, _ trace: HCITrace, _ v: inout UInt64, secret: Bool, _ show: (UInt64) -> String) throws {
        note(secret, 8); v = try r.u64(name)
    }
    mutating func flag(_ name: String, _ trace: HCITrace, _ v: inout Bool, _ show: (Bool) -> String) throws { v = try r.u8(name) != 0 }
    mutating func code<C: ByteCode>(_ name: String, _ trace: HCITrace, _ v: inout C) throws { v = C(rawValue: try r.u8(name)) }
    mutating func handle(_ v: inout UInt16) throws { v = try r.u16("Connection_Handle") & 0x0FFF }
    mutating func address(_ name: String, _ trace: HCITrace, _ v: inout BDAddress, _ show: (BDAddress) -> String) throws {
        v = try BDAddress.read(&r, name)
    }
    mutating func deviceAddress(_ name: String, _ trace: HCITrace, _ v: inout DeviceAddress) throws {
        let t = AddressType(rawValue: try r.u8(name + "_Type"))
        v = DeviceAddress(try BDAddress.read(&r, name), t)
    }
    mutating func bytes(_ name: String, _ trace: HCITrace, _ v: inout [UInt8], count: Int, secret: Bool) throws {
        note(secret, count); v = try r.bytes(count, name)
    }
    mutating func data(_ lengthName: String, _ name: String, _ trace: HCITrace, _ v: inout [UInt8], maximum: Int) throws {
        let n = Int(try r.u8(lengthName))
        guard n <= maximum else { throw WireError.invalid(field: lengthName, reason: "\(n) > \(maximum)") }
        v = try r.bytes(n, name)
    }
    mutating func paddedData(_ lengthName: String, _ name: String, _ trace: HCITrace, _ v: inout [UInt8], size: Int) throws {
        let n = Int(try r.u8(lengthName))
        guard n <= size else { throw WireError.invalid(field: lengthName, reason: "\(n) > \(size)") }
        v = Array(try r.bytes(size, name).prefix(n))
    }
    mutating func rest(_ name: String, _ v: inout [UInt8]) throws { v = r.rest() }
    mutating func list<E: HCIListEntry>(_ countName: String, _ trace: HCITrace, _ v: inout [E], minimum: Int) throws {
        let n = Int(try r.u8(countName))
        guard n >= minimum else { throw WireError.invalid(field: countName, reason: "\(n) \(E.unit)") }
        v = []
        for _ in 0..<n { var e = E(); try e.fields(&self); v.append(e) }
    }
}

// MARK: - Writer

/// Encodes fields, in declaration order. Fixed-size fields encode to exactly
/// their size (shorter arrays are zero-padded, longer ones cut), so every
/// encoding decodes.
struct HCIFieldWriter: HCIFieldWalker {
    var w = ByteWriter()

    mutating func u8(_ name: String, _ trace: HCITrace, _ v: inout UInt8, _ show: (UInt8) -> String) { w.u8(v) }
    mutating func u16(_ name: String, _ trace: HCITrace, _ v: inout UInt16, secret: Bool, _ show: (UInt16) -> String) { w.u16(v) }
    mutating func u24(_ name: String, _ trace: HCITrace, _ v: inout UInt32, _ show: (UInt32) -> String) { w.u24(v & 0xFF_FFFF) }
    mutating func u64(_ name: String, _ trace: HCITrace, _ v: inout UInt64, secret: Bool, _ show: (UInt64) -> String) { w.u64(v) }
    mutating func flag(_ name: String, _ trace: HCITrace, _ v: inout Bool, _ show: (Bool) -> String) { w.u8(v ? 1 : 0) }
    mutating func code<C: ByteCode>(_ name: String, _ trace: HCITrace, _ v: inout C) { w.u8(v.rawValue) }
    mutating func handle(_ v: inout UInt16) { w.u16(v) }
    mutating func address(_ name: String, _ trace: HCITrace, _ v: inout BDAddress, _ show: (BDAddress) -> String) { v.write(&w) }
    mutating func deviceAddress(_ name: String, _ trace: HCITrace, _ v: inout DeviceAddress) { w.u8(v.type.rawValue); v.address.write(&w) }
    mutating func bytes(_ name: String, _ trace: HCITrace, _ v: inout [UInt8], count: Int, secret: Bool) {
        w.append(v.prefix(count)); for _ in 0..<max(0, count - v.count) { w.u8(0) }
    }
    mutating func data(_ lengthName: String, _ name: String, _ trace: HCITrace, _ v: inout [UInt8], maximum: Int) {
        let d = v.prefix(maximum)
        w.u8(UInt8(d.count)); w.append(d)
    }
    mutating func paddedData(_ lengthName: String, _ name: String, _ trace: HCITrace, _ v: inout [UInt8], size: Int) {
        let d = v.prefix(size)
        w.u8(UInt8(d.count)); w.append(d); for _ in 0..<(size - d.count) { w.u8(0) }
    }
    mutating func rest(_ name: String, _ v: inout [UInt8]) { w.append(v) }
    mutating func list<E: HCIListEntry>(_ countName: String, _ trace: HCITrace, _ v: inout [E], minimum: Int) throws {
        w.u8(UInt8(truncatingIfNeeded: v.count))
        for i in v.indices { try v[i].fields(&self) }
    }
}

// MARK: - Printer

/// The trace's lines for fields, one per field (`Label: value`), in
/// declaration order; entries of a list print their own lines.
struct HCIFieldPrinter: HCIFieldWalker {
    var lines: [String] = []
    let showKeys: Bool

    init(showKeys: Bool = false) { self.showKeys = showKeys }

    private mutating func put(_ trace: HCITrace, _ text: String) {
        switch trace {
        case .hidden: return
        case .line(let label): lines.append("\(label): \(text)")
        case let .after(label, prefix):
            if let i = lines.lastIndex(where: { $0.hasPrefix(label + ": ") }) { lines[i] += prefix + text }
            else { lines.append("\(label):\(prefix)\(text)") }
        }
    }

    mutating func u8(_ name: String, _ trace: HCITrace, _ v: inout UInt8, _ show: (UInt8) -> String) { put(trace, show(v)) }
    mutating func u16(_ name: String, _ trace: HCITrace, _ v: inout UInt16, secret: Bool, _ show: (UInt16) -> String) {
        let t = secret && !showKeys ? "<hidden>" : show(v); put(trace, t)
    }
    mutating func u24(_ name: String, _ trace: HCITrace, _ v: inout UInt32, _ show: (UInt32) -> String) { put(trace, show(v)) }
    mutating func u64(_ name: String, _ trace: HCITrace, _ v: inout UInt64, secret: Bool, _ show: (UInt64) -> String) {
        let t = secret && !showKeys ? "<hidden>" : show(v); put(trace, t)
    }
    mutating func flag(_ name: String, _ trace: HCITrace, _ v: inout Bool, _ show: (Bool) -> String) { put(trace, show(v)) }
    mutating func code<C: ByteCode>(_ name: String, _ trace: HCITrace, _ v: inout C) { put(trace, v.description) }
    mutating func handle(_ v: inout UInt16) { lines.append("Handle: \(v)") }
    mutating func address(_ name: String, _ trace: HCITrace, _ v: inout BDAddress, _ show: (BDAddress) -> String) { put(trace, show(v)) }
    mutating func deviceAddress(_ name: String, _ trace: HCITrace, _ v: inout DeviceAddress) { put(trace, "\(v.address) (\(v.type))") }
    mutating func bytes(_ name: String, _ trace: HCITrace, _ v: inout [UInt8], count: Int, secret: Bool) {
        let t = secret && !showKeys ? "<\(count)-byte key hidden>" : Hex.string(v.reversed(), separator: ""); put(trace, t)
    }
    mutating func data(_ lengthName: String, _ name: String, _ trace: HCITrace, _ v: inout [UInt8], maximum: Int) {
        put(trace, v.isEmpty ? "(empty)" : Hex.string(v))
    }
    mutating func paddedData(_ lengthName: String, _ name: String, _ trace: HCITrace, _ v: inout [UInt8], size: Int) {
        put(trace, v.isEmpty ? "(empty)" : Hex.string(v))
    }
    mutating func rest(_ name: String, _ v: inout [UInt8]) { lines += Hex.lines(v) }
    mutating func list<E: HCIListEntry>(_ countName: String, _ trace: HCITrace, _ v: inout [E], minimum: Int) throws {
        put(trace, String(v.count))
        for i in v.indices { try v[i].fields(&self) }
    }
}
