import BLEWire

/// A protobuf enum value the peer sends: an open struct, so a value this
/// library does not name survives decoding (proto3 enums are open too).
public protocol ProtoEnum: Equatable, Sendable {
    var rawValue: Int32 { get }
    init(rawValue: Int32)
}

/// A scalar field's protobuf type: the wire type it travels as and the
/// conversion between the Swift value and the wire's bits. A declaration
/// names it (`.uint32`, `.sint32`, `.fixed32` ...) beside the field number.
public struct ProtoScalar<Value: Equatable & Sendable>: Sendable {
    /// The type's name in a .proto file, for errors.
    public let name: String
    public let wireType: ProtoWireType
    let decode: @Sendable (UInt64) -> Value
    let encode: @Sendable (Value) -> UInt64
    /// proto3's default, which an encoder leaves out.
    let zero: Value
}

extension ProtoScalar where Value == UInt32 {
    /// A varint; a wider value is truncated to 32 bits, as protobuf's own parsers do.
    public static var uint32: ProtoScalar { ProtoScalar(name: "uint32", wireType: .varint, decode: { UInt32(truncatingIfNeeded: $0) }, encode: { UInt64($0) }, zero: 0) }
    /// 4 bytes, little-endian.
    public static var fixed32: ProtoScalar { ProtoScalar(name: "fixed32", wireType: .i32, decode: { UInt32(truncatingIfNeeded: $0) }, encode: { UInt64($0) }, zero: 0) }
}

extension ProtoScalar where Value == UInt64 {
    public static var uint64: ProtoScalar { ProtoScalar(name: "uint64", wireType: .varint, decode: { $0 }, encode: { $0 }, zero: 0) }
    public static var fixed64: ProtoScalar { ProtoScalar(name: "fixed64", wireType: .i64, decode: { $0 }, encode: { $0 }, zero: 0) }
}

extension ProtoScalar where Value == Int32 {
    /// A varint of the value sign-extended to 64 bits (a negative one takes 10 bytes).
    public static var int32: ProtoScalar {
        ProtoScalar(name: "int32", wireType: .varint, decode: { Int32(truncatingIfNeeded: $0) },
                    encode: { UInt64(bitPattern: Int64($0)) }, zero: 0)
    }
    /// A ZigZag varint.
    public static var sint32: ProtoScalar {
        ProtoScalar(name: "sint32", wireType: .varint, decode: { ProtoWire.unzigzag(UInt32(truncatingIfNeeded: $0)) },
                    encode: { UInt64(ProtoWire.zigzag($0)) }, zero: 0)
    }
}

extension ProtoScalar where Value == Int64 {
    public static var int64: ProtoScalar {
        ProtoScalar(name: "int64", wireType: .varint, decode: { Int64(bitPattern: $0) }, encode: { UInt64(bitPattern: $0) }, zero: 0)
    }
    public static var sint64: ProtoScalar {
        ProtoScalar(name: "sint64", wireType: .varint, decode: { ProtoWire.unzigzag($0) }, encode: { ProtoWire.zigzag($0) }, zero: 0)
    }
}

extension ProtoScalar where Value == Bool {
    /// A varint; any value but 0 is true.
    public static var bool: ProtoScalar { ProtoScalar(name: "bool", wireType: .varint, decode: { $0 != 0 }, encode: { $0 ? 1 : 0 }, zero: false) }
}

extension ProtoScalar where Value == Float {
    public static var float: ProtoScalar {
        ProtoScalar(name: "float", wireType: .i32, decode: { Float(bitPattern: UInt32(truncatingIfNeeded: $0)) },
                    encode: { UInt64($0.bitPattern) }, zero: 0)
    }
}

extension ProtoScalar where Value: ProtoEnum {
    /// An enum: an int32 varint.
    public static var enumeration: ProtoScalar {
        ProtoScalar(name: "enum", wireType: .varint, decode: { Value(rawValue: Int32(truncatingIfNeeded: $0)) },
                    encode: { UInt64(bitPattern: Int64($0.rawValue)) }, zero: Value(rawValue: 0))
    }
}

/// The walker of a message's fields. Each message declares its fields once
/// (`ProtoMessage.fields`), number, name and type together; a reader decodes
/// them and a writer encodes them, so the two cannot drift apart.
public protocol ProtoFieldWalker {
    /// A singular scalar (`uint32 handle = 2;`).
    mutating func scalar<V>(_ number: UInt32, _ name: String, _ v: inout V, _ type: ProtoScalar<V>) throws
    /// A string (UTF-8).
    mutating func string(_ number: UInt32, _ name: String, _ v: inout String) throws
    /// A bytes field.
    mutating func bytes(_ number: UInt32, _ name: String, _ v: inout [UInt8]) throws
    /// A singular embedded message; nil when absent.
    mutating func message<M: ProtoMessage>(_ number: UInt32, _ name: String, _ v: inout M?) throws
    /// A repeated scalar (`repeated uint64 allocated = 3;`).
    mutating func repeated<V>(_ number: UInt32, _ name: String, _ v: inout [V], _ type: ProtoScalar<V>) throws
    /// A repeated embedded message.
    mutating func messages<M: ProtoMessage>(_ number: UInt32, _ name: String, _ v: inout [M]) throws
}

/// A protobuf message: a struct whose `init()` is proto3's all-defaults value
/// and whose `fields` is its one declaration.
public protocol ProtoMessage: Equatable, Sendable {
    init()
    /// Walks every field in field-number order: the one declaration the
    /// decoder and the encoder share.
    mutating func fields(_ f: inout some ProtoFieldWalker) throws
}

extension ProtoMessage {
    /// Decodes a message. Fields may come in any order; for a singular field
    /// the last occurrence wins and the occurrences of an embedded message
    /// merge; a repeated scalar is accepted packed and unpacked; a field this
    /// declaration does not name is skipped by its wire type.
    /// - Throws: `WireError` for truncated input, a bad varint or tag, a
    ///   group, or a declared field sent with the wrong wire type.
    public init(protobuf bytes: [UInt8]) throws {
        try self.init(protobuf: bytes, range: 0..<bytes.count)
    }

    init(protobuf bytes: [UInt8], range: Range<Int>) throws {
        self.init()
        var reader = try ProtoFieldReader(bytes, range: range)
        try fields(&reader)
    }

    /// The message's protobuf bytes, in field-number order, proto3 defaults
    /// left out. A repeated scalar is written unpacked, one tag per element,
    /// as ESPHome's own encoder writes it (every protobuf parser accepts both).
    public var protobuf: [UInt8] {
        var w = ProtoFieldWriter()
        var copy = self
        try? copy.fields(&w)  // the writer never throws
        return w.w.bytes
    }
}

/// Decodes: one pass over the bytes files every field's occurrences by
/// number (checking the wire format and passing unknown fields by their
/// wire type), then the declaration picks out the fields it names.
struct ProtoFieldReader: ProtoFieldWalker {
    enum Value { case number(UInt64), bytes(Range<Int>) }
    struct Occurrence {
        let wireType: ProtoWireType
        let value: Value
    }

    let bytes: [UInt8]
    private var found: [UInt32: [Occurrence]] = [:]

    init(_ bytes: [UInt8], range: Range<Int>) throws {
        self.bytes = bytes
        var r = ProtoReader(bytes, range: range)
        while !r.isAtEnd {
            let tag = try r.tag()
            let field = "field \(tag.number)"
            let value: Value
            switch tag.wireType {
            case .varint: value = .number(try r.varint(field))
            case .i64: value = .number(try r.fixed64(field))
            case .i32: value = .number(UInt64(try r.fixed32(field)))
            case .len: value = .bytes(try r.lengthDelimited(field))
            default:
                try r.skip(tag.wireType, field)  // throws: groups and wire types 6, 7
                continue
            }
            found[tag.number, default: []].append(Occurrence(wireType: tag.wireType, value: value))
        }
    }

    private func mismatch(_ name: String, _ got: ProtoWireType, _ expected: ProtoWireType) -> WireError {
        .invalid(field: name, reason: "sent as \(got), declared \(expected)")
    }

    private func range(_ o: Occurrence, _ name: String) throws -> Range<Int> {
        guard case let .bytes(r) = o.value else { throw mismatch(name, o.wireType, .len) }
        return r
    }

    mutating func scalar<V>(_ number: UInt32, _ name: String, _ v: inout V, _ type: ProtoScalar<V>) throws {
        guard let o = found[number]?.last else { return }
        guard o.wireType == type.wireType, case let .number(n) = o.value else { throw mismatch(name, o.wireType, type.wireType) }
        v = type.decode(n)
    }

    mutating func string(_ number: UInt32, _ name: String, _ v: inout String) throws {
        guard let o = found[number]?.last else { return }
        // Invalid UTF-8 is repaired (U+FFFD), as ESPHome, which never checks it, would pass it on.
        v = String(decoding: bytes[try range(o, name)], as: UTF8.self)
    }

    mutating func bytes(_ number: UInt32, _ name: String, _ v: inout [UInt8]) throws {
        guard let o = found[number]?.last else { return }
        v = Array(bytes[try range(o, name)])
    }

    mutating func message<M: ProtoMessage>(_ number: UInt32, _ name: String, _ v: inout M?) throws {
        guard let all = found[number], let first = all.first else { return }
        if all.count == 1 {
            v = try M(protobuf: bytes, range: try range(first, name))
        } else {
            // Occurrences merge: decoding their concatenation is protobuf's merge.
            var joined: [UInt8] = []
            for o in all { joined += bytes[try range(o, name)] }
            v = try M(protobuf: joined)
        }
    }

    mutating func repeated<V>(_ number: UInt32, _ name: String, _ v: inout [V], _ type: ProtoScalar<V>) throws {
        for o in found[number] ?? [] {
            switch o.value {
            case let .number(n) where o.wireType == type.wireType:
                v.append(type.decode(n))
            case let .bytes(packed) where type.wireType != .len:
                var r = ProtoReader(bytes, range: packed)
                while !r.isAtEnd {
                    switch type.wireType {
                    case .i32: v.append(type.decode(UInt64(try r.fixed32(name))))
                    case .i64: v.append(type.decode(try r.fixed64(name)))
                    default: v.append(type.decode(try r.varint(name)))
                    }
                }
            default:
                throw mismatch(name, o.wireType, type.wireType)
            }
        }
    }

    mutating func messages<M: ProtoMessage>(_ number: UInt32, _ name: String, _ v: inout [M]) throws {
        for o in found[number] ?? [] { v.append(try M(protobuf: bytes, range: try range(o, name))) }
    }
}

/// Encodes, in declaration (field-number) order.
struct ProtoFieldWriter: ProtoFieldWalker {
    var w = ProtoWriter()

    private mutating func put<V>(_ number: UInt32, _ v: V, _ type: ProtoScalar<V>) {
        w.tag(number, type.wireType)
        let bits = type.encode(v)
        switch type.wireType {
        case .i32: w.fixed32(UInt32(truncatingIfNeeded: bits))
        case .i64: w.fixed64(bits)
        default: w.varint(bits)
        }
    }

    mutating func scalar<V>(_ number: UInt32, _ name: String, _ v: inout V, _ type: ProtoScalar<V>) {
        if v != type.zero { put(number, v, type) }
    }
    mutating func string(_ number: UInt32, _ name: String, _ v: inout String) {
        guard !v.isEmpty else { return }
        w.tag(number, .len)
        w.lengthDelimited(Array(v.utf8))
    }
    mutating func bytes(_ number: UInt32, _ name: String, _ v: inout [UInt8]) {
        guard !v.isEmpty else { return }
        w.tag(number, .len)
        w.lengthDelimited(v)
    }
    mutating func message<M: ProtoMessage>(_ number: UInt32, _ name: String, _ v: inout M?) {
        guard let m = v else { return }
        w.tag(number, .len)
        w.lengthDelimited(m.protobuf)
    }
    mutating func repeated<V>(_ number: UInt32, _ name: String, _ v: inout [V], _ type: ProtoScalar<V>) {
        for e in v { put(number, e, type) }
    }
    mutating func messages<M: ProtoMessage>(_ number: UInt32, _ name: String, _ v: inout [M]) {
        for m in v {
            w.tag(number, .len)
            w.lengthDelimited(m.protobuf)
        }
    }
}
