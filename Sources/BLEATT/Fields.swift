import BLEWire

/// ATT's one-byte codes (an opcode, an error code) are BLEWire's `ByteCode`.
public typealias ATTByteCode = ByteCode

/// How a 16-bit field reads in a trace.
public enum ATTNumberStyle: Sendable {
    /// 0x0012: attribute handles.
    case handle
    /// 23: MTUs, offsets.
    case decimal
}

/// How a value that runs to the end of its PDU reads in a trace.
public enum ATTValueStyle: Sendable {
    /// Hex, and the text in quotes when every byte is printable.
    case data
    /// A UUID by name when it is 2 or 16 bytes, else hex.
    case uuidOrHex
}

/// The walker of a PDU's fields, in spec field order.
///
/// Each PDU is declared once, by a `fields` function that names every field
/// and its kind; three walkers give that one declaration its uses: a reader
/// (decoding, with every length rule checked), a writer (encoding) and a
/// printer (the trace's lines). The kinds below are the field shapes ATT has
/// (Core Vol 3 Part F 3.4); a new PDU is built from them.
public protocol ATTFieldWalker {
    /// An 8-bit field; `show` spells its value in a trace.
    mutating func u8(_ name: String, _ v: inout UInt8, show: (UInt8) -> String) throws
    /// A 16-bit little-endian field.
    mutating func u16(_ name: String, _ v: inout UInt16, _ style: ATTNumberStyle) throws
    /// A one-byte code; `labelled: false` prints only the code's name.
    mutating func code<C: ByteCode>(_ name: String, _ v: inout C, labelled: Bool) throws
    /// Two handles printed as one range: `name: 0x0001-0xffff`.
    mutating func handleRange(_ name: String, _ start: inout UInt16, _ end: inout UInt16) throws
    /// A 16-bit UUID (Find By Type Value's Attribute Type).
    mutating func uuid16(_ name: String, _ v: inout UInt16) throws
    /// A UUID filling the rest of the PDU: 2 or 16 bytes.
    mutating func uuid(_ name: String, _ v: inout BluetoothUUID) throws
    /// Bytes to the end of the PDU, less `reserving` bytes that later fields take.
    mutating func value(_ name: String, _ v: inout [UInt8], _ style: ATTValueStyle, reserving: Int) throws
    /// Exactly `count` bytes.
    mutating func bytes(_ name: String, _ v: inout [UInt8], count: Int) throws
    /// 16-bit handles to the end of the PDU, at least `minimum` of them.
    mutating func handles(_ name: String, _ v: inout [UInt16], minimum: Int) throws
    /// An attribute value that belongs to `handle`, to the end of its list
    /// entry; a trace may describe it by what the handle holds (GATT).
    mutating func attributeValue(_ name: String, _ v: inout [UInt8], of handle: UInt16) throws
    /// A 16-bit length, then that many bytes (Length Value Tuple, 3.4.4.12).
    /// The last entry of a PDU may be shorter than its length says (the
    /// server cut it at the MTU): the length is the attribute's, kept apart.
    mutating func lengthValue(_ name: String, _ length: inout UInt16, _ v: inout [UInt8]) throws
    /// A list to the end of the PDU whose entries are `size` bytes each
    /// (nil: each entry as long as its own fields); at least one entry.
    mutating func list<E: ATTListEntry>(_ name: String, _ v: inout [E], size: Int?) throws
    /// A Length octet, then entries of that length (Read By Type and Read By
    /// Group Type Responses); the length is at least `minimum`.
    mutating func lengthPrefixedList<E: ATTListEntry>(_ name: String, _ v: inout [E], minimum: Int) throws
}

/// An entry of a list field, declared by its fields like a PDU.
public protocol ATTListEntry: Hashable, Sendable {
    init()
    mutating func fields(_ f: inout some ATTFieldWalker) throws
}

extension ATTFieldWalker {
    mutating func u16(_ name: String, _ v: inout UInt16) throws { try u16(name, &v, .handle) }
    mutating func value(_ name: String, _ v: inout [UInt8], _ style: ATTValueStyle = .data) throws {
        try value(name, &v, style, reserving: 0)
    }
    mutating func code<C: ByteCode>(_ name: String, _ v: inout C) throws { try code(name, &v, labelled: true) }
}

// MARK: - Reader

/// Decodes fields from bytes; every length rule is checked and a violation
/// throws `WireError` naming the field.
struct ATTFieldReader: ATTFieldWalker {
    var r: ByteReader
    init(_ r: ByteReader) { self.r = r }

    mutating func u8(_ name: String, _ v: inout UInt8, show: (UInt8) -> String) throws { v = try r.u8(name) }
    mutating func u16(_ name: String, _ v: inout UInt16, _ style: ATTNumberStyle) throws { v = try r.u16(name) }
    mutating func code<C: ByteCode>(_ name: String, _ v: inout C, labelled: Bool) throws { v = C(rawValue: try r.u8(name)) }
    mutating func handleRange(_ name: String, _ start: inout UInt16, _ end: inout UInt16) throws {
        start = try r.u16(name + " start"); end = try r.u16(name + " end")
    }
    mutating func uuid16(_ name: String, _ v: inout UInt16) throws { v = try r.u16(name) }
    mutating func uuid(_ name: String, _ v: inout BluetoothUUID) throws {
        let t = r.rest()
        guard t.count == 2 || t.count == 16, let u = BluetoothUUID(wire: t) else {
            throw WireError.invalid(field: name, reason: "\(t.count) bytes (must be 2 or 16)")
        }
        v = u
    }
    mutating func value(_ name: String, _ v: inout [UInt8], _ style: ATTValueStyle, reserving: Int) throws {
        guard r.remaining >= reserving else { throw WireError.truncated(field: name, needed: reserving, available: r.remaining) }
        v = try r.bytes(r.remaining - reserving, name)
    }
    mutating func bytes(_ name: String, _ v: inout [UInt8], count: Int) throws { v = try r.bytes(count, name) }
    mutating func handles(_ name: String, _ v: inout [UInt16], minimum: Int) throws {
        guard r.remaining >= 2 * minimum, r.remaining % 2 == 0 else {
            throw WireError.invalid(field: name, reason: "\(r.remaining) bytes is not \(minimum) or more handles")
        }
        v = []
        while !r.isAtEnd { v.append(try r.u16(name)) }
    }
    mutating func attributeValue(_ name: String, _ v: inout [UInt8], of handle: UInt16) throws { v = r.rest() }
    mutating func lengthValue(_ name: String, _ length: inout UInt16, _ v: inout [UInt8]) throws {
        length = try r.u16(name + " Length")
        v = try r.bytes(min(Int(length), r.remaining), name)
    }
    mutating func list<E: ATTListEntry>(_ name: String, _ v: inout [E], size: Int?) throws {
        if let size {
            guard r.remaining > 0, r.remaining % size == 0 else {
                throw WireError.invalid(field: name, reason: "\(r.remaining) bytes is not a non-zero multiple of \(size)")
            }
        } else if r.isAtEnd {
            throw WireError.invalid(field: name, reason: "empty")
        }
        v = []
        while !r.isAtEnd {
            var e = E()
            if let size {
                var sub = ATTFieldReader(try r.sub(size, name))
                try e.fields(&sub)
                try sub.r.expectEnd(name)
            } else {
                try e.fields(&self)
            }
            v.append(e)
        }
    }
    mutating func lengthPrefixedList<E: ATTListEntry>(_ name: String, _ v: inout [E], minimum: Int) throws {
        let len = Int(try r.u8("Length"))
        guard len >= minimum else { throw WireError.invalid(field: "Length", reason: "\(len) is shorter than \(minimum) bytes") }
        try list(name, &v, size: len)
    }
}

// MARK: - Writer

/// Encodes fields into bytes, in declaration order.
struct ATTFieldWriter: ATTFieldWalker {
    var w = ByteWriter()

    mutating func u8(_ name: String, _ v: inout UInt8, show: (UInt8) -> String) { w.u8(v) }
    mutating func u16(_ name: String, _ v: inout UInt16, _ style: ATTNumberStyle) { w.u16(v) }
    mutating func code<C: ByteCode>(_ name: String, _ v: inout C, labelled: Bool) { w.u8(v.rawValue) }
    mutating func handleRange(_ name: String, _ start: inout UInt16, _ end: inout UInt16) { w.u16(start); w.u16(end) }
    mutating func uuid16(_ name: String, _ v: inout UInt16) { w.u16(v) }
    mutating func uuid(_ name: String, _ v: inout BluetoothUUID) { w.append(v.attWire) }
    mutating func value(_ name: String, _ v: inout [UInt8], _ style: ATTValueStyle, reserving: Int) { w.append(v) }
    mutating func bytes(_ name: String, _ v: inout [UInt8], count: Int) { w.append(v) }
    mutating func handles(_ name: String, _ v: inout [UInt16], minimum: Int) { for h in v { w.u16(h) } }
    mutating func attributeValue(_ name: String, _ v: inout [UInt8], of handle: UInt16) { w.append(v) }
    mutating func lengthValue(_ name: String, _ length: inout UInt16, _ v: inout [UInt8]) { w.u16(length); w.append(v) }
    mutating func list<E: ATTListEntry>(_ name: String, _ v: inout [E], size: Int?) throws {
        for i in v.indices { try v[i].fields(&self) }
    }
    mutating func lengthPrefixedList<E: ATTListEntry>(_ name: String, _ v: inout [E], minimum: Int) throws {
        // One Length for the list: the first entry's (a server sends entries of one length).
        var entries: [[UInt8]] = []
        for i in v.indices {
            var sub = ATTFieldWriter()
            try v[i].fields(&sub)
            entries.append(sub.w.bytes)
        }
        w.u8(UInt8(truncatingIfNeeded: entries.first?.count ?? minimum))
        for e in entries { w.append(e) }
    }
}

// MARK: - Printer

/// The trace's lines for fields: one line per field, `Name: value`, a list
/// entry's fields on one line, an attribute value on its own indented lines
/// (described by `describeValue` when it knows the handle's type).
struct ATTFieldPrinter: ATTFieldWalker {
    var lines: [String] = []
    var describeValue: ATTValueDescriber?
    /// Inside a list entry: its fields join into one line.
    private var entry: [String]?
    private var entryTail: [String] = []

    init(describeValue: ATTValueDescriber?) { self.describeValue = describeValue }

    static func h16(_ v: UInt16) -> String { "0x" + Hex.int(v, width: 4) }

    private mutating func emit(_ s: String) {
        if entry != nil { entry!.append(s) } else { lines.append(s) }
    }

    mutating func u8(_ name: String, _ v: inout UInt8, show: (UInt8) -> String) { emit("\(name): \(show(v))") }
    mutating func u16(_ name: String, _ v: inout UInt16, _ style: ATTNumberStyle) {
        emit("\(name): " + (style == .handle ? Self.h16(v) : String(v)))
    }
    mutating func code<C: ByteCode>(_ name: String, _ v: inout C, labelled: Bool) {
        emit(labelled ? "\(name): \(v.description)" : v.description)
    }
    mutating func handleRange(_ name: String, _ start: inout UInt16, _ end: inout UInt16) {
        emit("\(name): \(Self.h16(start))-\(Self.h16(end))")
    }
    mutating func uuid16(_ name: String, _ v: inout UInt16) { emit("\(name): \(BluetoothUUID(uint16: v).namedDescription)") }
    mutating func uuid(_ name: String, _ v: inout BluetoothUUID) { emit("\(name): \(v.namedDescription)") }
    mutating func value(_ name: String, _ v: inout [UInt8], _ style: ATTValueStyle, reserving: Int) {
        switch style {
        case .data: emit("\(name): \(ATTFieldPrinter.traceValue(v))")
        case .uuidOrHex: emit("\(name): " + (BluetoothUUID(wire: v).map(\.namedDescription) ?? Hex.string(v)))
        }
    }
    mutating func bytes(_ name: String, _ v: inout [UInt8], count: Int) { emit("\(name): \(Hex.string(v))") }
    mutating func handles(_ name: String, _ v: inout [UInt16], minimum: Int) {
        emit("\(name): " + v.map(Self.h16).joined(separator: " "))
    }
    mutating func attributeValue(_ name: String, _ v: inout [UInt8], of handle: UInt16) {
        let described = describeValue?(handle, v) ?? ["\(name): \(ATTFieldPrinter.traceValue(v))"]
        entryTail += described.map { "  " + $0 }
    }
    mutating func lengthValue(_ name: String, _ length: inout UInt16, _ v: inout [UInt8]) {
        let cut = Int(length) > v.count ? " (\(v.count) of \(length) bytes)" : ""
        emit("\(name): \(ATTFieldPrinter.traceValue(v))\(cut)")
    }
    mutating func list<E: ATTListEntry>(_ name: String, _ v: inout [E], size: Int?) throws {
        for i in v.indices {
            entry = []; entryTail = []
            try v[i].fields(&self)
            let line = entry!.joined(separator: "  ")
            entry = nil
            if !line.isEmpty { lines.append(line) }
            lines += entryTail
            entryTail = []
        }
    }
    mutating func lengthPrefixedList<E: ATTListEntry>(_ name: String, _ v: inout [E], minimum: Int) throws {
        var sizer = ATTFieldWriter()
        if let first = v.first { var f = first; try f.fields(&sizer) }
        lines.append("Attribute data length: \(v.isEmpty ? minimum : sizer.w.bytes.count)")
        try list(name, &v, size: nil)
    }

    /// A value as hex, followed by its text in quotes when every byte is
    /// printable ASCII; "(empty)" for no bytes.
    static func traceValue(_ b: [UInt8]) -> String {
        guard !b.isEmpty else { return "(empty)" }
        let printable = b.allSatisfy { $0 >= 0x20 && $0 < 0x7F }
        return Hex.string(b) + (printable ? " \"" + String(decoding: b, as: UTF8.self) + "\"" : "")
    }
}

// MARK: - The first handle

/// The first handle a PDU names (a request's Attribute Handle or Starting
/// Handle): what an Error Response about it carries.
struct ATTFirstHandle: ATTFieldWalker {
    var handle: UInt16?
    private mutating func take(_ h: UInt16) { if handle == nil { handle = h } }
    mutating func u8(_ name: String, _ v: inout UInt8, show: (UInt8) -> String) {}
    mutating func u16(_ name: String, _ v: inout UInt16, _ style: ATTNumberStyle) { if style == .handle { take(v) } }
    mutating func code<C: ByteCode>(_ name: String, _ v: inout C, labelled: Bool) {}
    mutating func handleRange(_ name: String, _ start: inout UInt16, _ end: inout UInt16) { take(start) }
    mutating func uuid16(_ name: String, _ v: inout UInt16) {}
    mutating func uuid(_ name: String, _ v: inout BluetoothUUID) {}
    mutating func value(_ name: String, _ v: inout [UInt8], _ style: ATTValueStyle, reserving: Int) {}
    mutating func bytes(_ name: String, _ v: inout [UInt8], count: Int) {}
    mutating func handles(_ name: String, _ v: inout [UInt16], minimum: Int) { if let h = v.first { take(h) } }
    mutating func attributeValue(_ name: String, _ v: inout [UInt8], of handle: UInt16) {}
    mutating func lengthValue(_ name: String, _ length: inout UInt16, _ v: inout [UInt8]) {}
    mutating func list<E: ATTListEntry>(_ name: String, _ v: inout [E], size: Int?) {}
    mutating func lengthPrefixedList<E: ATTListEntry>(_ name: String, _ v: inout [E], minimum: Int) {}
}
