import BLEWire
import BLEGATT
import BLEGATTServer
import AttledJSON

/// A database document that cannot be served: what is wrong and where
/// (`services[2].characteristics[0].value: "zz" is not hex`).
public struct GATTJSONError: Error, Equatable, Sendable, CustomStringConvertible {
    public let path: String
    public let reason: String
    public init(_ path: String, _ reason: String) { self.path = path; self.reason = reason }
    public var description: String { "\(path): \(reason)" }
}

/// The GATT database as `attled gatt --json --values` prints it, read back
/// into definitions to serve, handle for handle. A document is that output
/// (an object with "services") or the services array itself. Per service:
/// "uuid", "start", "end", "primary", "includes" ({"handle","uuid","start","end"}),
/// "characteristics"; per characteristic: "uuid", "declaration_handle",
/// "value_handle", "properties" (attled's names), "value" (hex) or "error"
/// (an ATT error name: Read Not Permitted makes it unreadable, Insufficient
/// Authentication/Encryption/Authorization puts it behind encryption),
/// "descriptors" ({"uuid","handle","value"/"error"}); optional
/// "max_length" (default 512). Handles are optional: absent ones follow.
public enum GATTJSON {
    public static func services(_ doc: JSONValue) throws(GATTJSONError) -> [ServiceDefinition] {
        let list: [JSONValue]
        if let a = doc.arrayValue { list = a } else if let a = doc["services"]?.arrayValue { list = a } else {
            throw GATTJSONError("document", "neither a \"services\" array nor an object with one")
        }
        var out: [ServiceDefinition] = []
        for (i, s) in list.enumerated() { out.append(try service(s, "services[\(i)]")) }
        return out
    }

    /// Parses and lays out the document.
    /// - Throws: `GATTJSONError` for a malformed document, `GATTDatabaseError` for handles that cannot be served.
    public static func database(_ doc: JSONValue) throws -> GATTServerDatabase {
        try GATTServerDatabase(services: try services(doc))
    }

    static func service(_ s: JSONValue, _ at: String) throws(GATTJSONError) -> ServiceDefinition {
        var def = ServiceDefinition(uuid: try uuid(s["uuid"], at + ".uuid"), primary: s["primary"]?.boolValue ?? true,
                                    characteristics: [], handle: try handle(s["start"], at + ".start"), end: try handle(s["end"], at + ".end"))
        for (i, inc) in (s["includes"]?.arrayValue ?? []).enumerated() {
            let p = "\(at).includes[\(i)]"
            def.includes.append(IncludeDefinition(uuid: try uuid(inc["uuid"], p + ".uuid"), handle: try handle(inc["handle"], p + ".handle"),
                                                  start: try handle(inc["start"], p + ".start")))
        }
        for (i, c) in (s["characteristics"]?.arrayValue ?? []).enumerated() {
            def.characteristics.append(try characteristic(c, "\(at).characteristics[\(i)]"))
        }
        return def
    }

    static func characteristic(_ c: JSONValue, _ at: String) throws(GATTJSONError) -> CharacteristicDefinition {
        var props = CharacteristicProperties()
        let names = CharacteristicProperties(rawValue: 0xFF).names
        for (i, n) in (c["properties"]?.arrayValue ?? []).enumerated() {
            guard let name = n.stringValue, let bit = names.firstIndex(of: name) else {
                throw GATTJSONError("\(at).properties[\(i)]", "not one of \(names.joined(separator: ", "))")
            }
            props.insert(CharacteristicProperties(rawValue: 1 << UInt8(bit)))
        }
        var def = CharacteristicDefinition(uuid: try uuid(c["uuid"], at + ".uuid"), properties: props,
                                           value: try hexValue(c["value"], at + ".value"),
                                           maxLength: Int(c["max_length"]?.integerValue ?? 512),
                                           declarationHandle: try handle(c["declaration_handle"], at + ".declaration_handle"),
                                           valueHandle: try handle(c["value_handle"], at + ".value_handle"))
        var perms = def.effectivePermissions
        applyError(c["error"]?.stringValue, to: &perms)
        def.permissions = perms
        for (i, d) in (c["descriptors"]?.arrayValue ?? []).enumerated() {
            let p = "\(at).descriptors[\(i)]"
            var dp: AttributePermissions = .read
            applyError(d["error"]?.stringValue, to: &dp)
            def.descriptors.append(DescriptorDefinition(uuid: try uuid(d["uuid"], p + ".uuid"), value: try hexValue(d["value"], p + ".value"),
                                                        permissions: dp, handle: try handle(d["handle"], p + ".handle")))
        }
        return def
    }

    /// What an error read from the real device says of the attribute's permissions.
    static func applyError(_ e: String?, to p: inout AttributePermissions) {
        switch e {
        case "Read Not Permitted": p.remove(.read)
        case "Insufficient Authentication", "Insufficient Encryption", "Insufficient Authorization", "Encryption Key Size Too Short":
            p.formUnion([.readEncrypted, .writeEncrypted])
        default: break
        }
    }

    static func uuid(_ v: JSONValue?, _ at: String) throws(GATTJSONError) -> BluetoothUUID {
        guard let s = v?.stringValue else { throw GATTJSONError(at, "missing (a UUID string)") }
        guard let u = BluetoothUUID(s) else { throw GATTJSONError(at, "\"\(s)\" is not a UUID") }
        return u
    }

    static func handle(_ v: JSONValue?, _ at: String) throws(GATTJSONError) -> UInt16? {
        guard let v, !v.isNull else { return nil }
        guard let n = v.integerValue, (1...0xFFFF).contains(n) else { throw GATTJSONError(at, "not a handle 1...65535") }
        return UInt16(n)
    }

    static func hexValue(_ v: JSONValue?, _ at: String) throws(GATTJSONError) -> [UInt8] {
        guard let v, !v.isNull else { return [] }
        guard let s = v.stringValue, let b = Hex.parse(s) else { throw GATTJSONError(at, "not hex") }
        guard b.count <= 512 else { throw GATTJSONError(at, "\(b.count) bytes (at most 512)") }
        return b
    }
}
