import Testing
@testable import ESPHomeAPI

/// Every declared message against the bytes Google protobuf writes for it
/// (aioesphomeapi's api_pb2, ESPHomeAPIMessageVectors.swift): it decodes as
/// ours, every field we declare has the value that was set (packed repeated
/// fields, negative varints, unknown fields skipped on the way), and our
/// encoding of it decodes to the same message.
@Suite("ESPHome API: messages against aioesphomeapi's bytes")
struct ESPHomeAPIProtobufVectorTests {
    @Test("every vector decodes as its message, each declared field with the value aioesphomeapi set",
          arguments: APIMessageVectors.types)
    func vector(_ type: UInt16) throws {
        let v = try #require(APIMessageVectors.all.first { $0.type == type })
        let decoded = try APIMessages.decode(type: APIMessageType(rawValue: type), payload: v.bytes)
        guard case let .known(m) = decoded else { Issue.record("\(v.name) (\(type)) is not one of ours"); return }
        #expect(APIMessageType(rawValue: type).name == v.name)
        let parts = Self.parts(m)
        if !v.fields.isEmpty { #expect(!parts.isEmpty, "\(v.name): no declared field decoded") }
        for part in parts {
            let name = String(part.prefix { $0 != "=" })
            let value = String(part.dropFirst(name.count + 1))
            #expect(v.fields[name] == value, "\(v.name).\(name)")
        }
        // Ours written and read back: the same message.
        let again = try APIMessages.decode(type: APIMessageType(rawValue: type), payload: APIMessages.encode(m).payload)
        guard case let .known(m2) = again else { Issue.record("\(v.name): re-encoding lost it"); return }
        #expect(m2.fieldsDescription == m.fieldsDescription)
    }

    /// The describer's "name=value" parts of a message.
    static func parts<M: ProtoMessage>(_ m: M) -> [String] {
        var copy = m
        var d = ProtoDescriber()
        try? copy.fields(&d)
        return d.parts
    }
}

extension APIMessageVectors {
    /// The vectors' message types (Swift 6.0.3 crashes on a closure over the
    /// labelled tuples inside @Test's arguments).
    static var types: [UInt16] {
        var out: [UInt16] = []
        for v in all { out.append(v.type) }
        return out
    }
}
