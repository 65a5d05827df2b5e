import BLEWire

/// A message's fields as one line for `--trace`, from the same declaration
/// the reader and the writer walk: `name=value` for each field that is not
/// its default (proto3 sends none of those either), bytes in hex, strings
/// quoted, embedded messages in braces, repeated fields in brackets. A
/// uint64 field named `address` is a Bluetooth address and prints as one.
public struct ProtoDescriber: ProtoFieldWalker {
    public private(set) var parts: [String] = []

    public init() {}

    public mutating func scalar<V>(_ number: UInt32, _ name: String, _ v: inout V, _ type: ProtoScalar<V>) throws {
        guard v != type.zero else { return }
        parts.append("\(name)=\(Self.text(name, v))")
    }

    public mutating func string(_ number: UInt32, _ name: String, _ v: inout String) throws {
        guard !v.isEmpty else { return }
        parts.append("\(name)=\"\(v)\"")
    }

    public mutating func bytes(_ number: UInt32, _ name: String, _ v: inout [UInt8]) throws {
        guard !v.isEmpty else { return }
        parts.append("\(name)=\(Hex.string(v, separator: ""))")
    }

    public mutating func message<M: ProtoMessage>(_ number: UInt32, _ name: String, _ v: inout M?) throws {
        guard let m = v else { return }
        parts.append("\(name)={\(m.fieldsDescription)}")
    }

    public mutating func repeated<V>(_ number: UInt32, _ name: String, _ v: inout [V], _ type: ProtoScalar<V>) throws {
        guard !v.isEmpty else { return }
        parts.append("\(name)=[\(v.map { Self.text(name, $0) }.joined(separator: ","))]")
    }

    public mutating func messages<M: ProtoMessage>(_ number: UInt32, _ name: String, _ v: inout [M]) throws {
        guard !v.isEmpty else { return }
        parts.append("\(name)=[\(v.map { "{\($0.fieldsDescription)}" }.joined(separator: ","))]")
    }

    static func text<V>(_ name: String, _ v: V) -> String {
        if name == "address" || name == "allocated", let a = v as? UInt64 {
            return (0..<6).reversed().map { Hex.int(UInt8(truncatingIfNeeded: a >> (8 * UInt64($0))), width: 2).uppercased() }.joined(separator: ":")
        }
        if let e = v as? any ProtoEnum { return "\(e.rawValue)" }
        return "\(v)"
    }
}

extension ProtoMessage {
    /// The fields that differ from their defaults, "name=value, ...".
    public var fieldsDescription: String {
        var copy = self
        var d = ProtoDescriber()
        try? copy.fields(&d)
        return d.parts.joined(separator: ", ")
    }
}

extension APIMessage {
    /// "BluetoothGATTWriteRequest (75) address=C0:11:22:33:44:55, handle=16, response=true, data=07".
    public var traceDescription: String {
        let f = fieldsDescription
        return "\(Self.messageType.name ?? "message") (\(Self.messageType.rawValue))" + (f.isEmpty ? "" : " " + f)
    }
}
