import BLEWire
import BLEATT
import BLEGATT

// Discovery and reads (Core Vol 3 Part F 3.4.3, 3.4.4).
extension GATTServerSession {
    /// A handle range is valid when its start is not 0 and not after its end (3.4.3.1).
    private func badRange(_ op: ATTOpcode, _ start: UInt16, _ end: UInt16) -> ATT.ErrorResponse? {
        start == 0 || start > end ? Self.error(op, start, .invalidHandle) : nil
    }

    func findInformation(_ r: ATT.FindInformationRequest, _ mtu: Int) -> any ATTPDU {
        if let e = badRange(.findInformationRequest, r.start, r.end) { return e }
        let attrs = db.range(r.start, r.end)
        guard let first = attrs.first else { return Self.error(.findInformationRequest, r.start, .attributeNotFound) }
        // One UUID width per response: the first attribute's.
        let short = first.type.uint16 != nil
        let fits = (mtu - 2) / (2 + (short ? 2 : 16))
        var out: [HandleUUID] = []
        for a in attrs {
            guard (a.type.uint16 != nil) == short, out.count < fits else { break }
            out.append(HandleUUID(handle: a.handle, uuid: a.type))
        }
        return ATT.FindInformationResponse(out)
    }

    func findByTypeValue(_ r: ATT.FindByTypeValueRequest, _ mtu: Int) -> any ATTPDU {
        if let e = badRange(.findByTypeValueRequest, r.start, r.end) { return e }
        let type = BluetoothUUID(uint16: r.type)
        var out: [HandlesInformation] = []
        for a in db.range(r.start, r.end) where a.type == type && value(a) == r.value {
            guard out.count < (mtu - 1) / 4 else { break }
            out.append(HandlesInformation(found: a.handle, groupEnd: a.isServiceDeclaration ? db.groupEnd(a.handle) : a.handle))
        }
        return out.isEmpty ? Self.error(.findByTypeValueRequest, r.start, .attributeNotFound) : ATT.FindByTypeValueResponse(out)
    }

    func readByType(_ r: ATT.ReadByTypeRequest, _ mtu: Int) -> any ATTPDU {
        if let e = badRange(.readByTypeRequest, r.start, r.end) { return e }
        var out: [HandleValue] = []
        for a in db.range(r.start, r.end) where a.type == r.type {
            if let e = readError(a) {
                // The first attribute decides (3.4.4.1): its error; later ones end the list.
                if out.isEmpty { return Self.error(.readByTypeRequest, a.handle, e) }
                break
            }
            let v = Array(value(a).prefix(min(mtu - 4, 253)))
            if let len = out.first?.value.count, len != v.count { break }
            guard 2 + (out.count + 1) * (2 + v.count) <= mtu else { break }
            out.append(HandleValue(handle: a.handle, value: v))
        }
        return out.isEmpty ? Self.error(.readByTypeRequest, r.start, .attributeNotFound) : ATT.ReadByTypeResponse(out)
    }

    func readByGroupType(_ r: ATT.ReadByGroupTypeRequest, _ mtu: Int) -> any ATTPDU {
        if let e = badRange(.readByGroupTypeRequest, r.start, r.end) { return e }
        guard r.type == GATTUUID.primaryService || r.type == GATTUUID.secondaryService else {
            return Self.error(.readByGroupTypeRequest, r.start, .unsupportedGroupType)
        }
        var out: [GroupValue] = []
        for a in db.range(r.start, r.end) where a.type == r.type {
            let v = Array(value(a).prefix(min(mtu - 6, 251)))
            if let len = out.first?.value.count, len != v.count { break }
            guard 2 + (out.count + 1) * (4 + v.count) <= mtu else { break }
            out.append(GroupValue(handle: a.handle, endGroup: db.groupEnd(a.handle), value: v))
        }
        return out.isEmpty ? Self.error(.readByGroupTypeRequest, r.start, .attributeNotFound) : ATT.ReadByGroupTypeResponse(out)
    }

    /// Read (offset nil) or Read Blob.
    func read(_ h: UInt16, offset: Int?, _ mtu: Int) -> any ATTPDU {
        let op: ATTOpcode = offset == nil ? .readRequest : .readBlobRequest
        guard let a = db[h] else { return Self.error(op, h, .invalidHandle) }
        if let e = readError(a) { return Self.error(op, h, e) }
        let v = value(a)
        guard let offset else { return ATT.ReadResponse(Array(v.prefix(mtu - 1))) }
        guard offset <= v.count else { return Self.error(op, h, .invalidOffset) }
        return ATT.ReadBlobResponse(Array(v[offset...].prefix(mtu - 1)))
    }

    /// Read Multiple (3.4.4.7) or Read Multiple Variable Length (3.4.4.11):
    /// the first handle that cannot be read answers for all.
    func readMultiple(_ handles: [UInt16], variable: Bool, _ mtu: Int) -> any ATTPDU {
        let op: ATTOpcode = variable ? .readMultipleVariableRequest : .readMultipleRequest
        var values: [[UInt8]] = []
        for h in handles {
            guard let a = db[h] else { return Self.error(op, h, .invalidHandle) }
            if let e = readError(a) { return Self.error(op, h, e) }
            values.append(value(a))
        }
        guard variable else { return ATT.ReadMultipleResponse(Array(values.joined().prefix(mtu - 1))) }
        var room = mtu - 1
        var out: [LengthValue] = []
        for v in values where room >= 2 {
            let cut = Array(v.prefix(room - 2))
            out.append(LengthValue(length: UInt16(v.count), value: cut))
            room -= 2 + cut.count
        }
        return ATT.ReadMultipleVariableResponse(out)
    }
}
