import BLEWire
import BLEATT

/// A GATT client over one ATT bearer (Core Vol 3 Part G 4). Every procedure
/// is synchronous: it sends requests and runs the event loop until the
/// answers arrive or the bearer's deadline passes. Discovery procedures stop
/// as soon as they have what the caller asked for, and a server whose
/// responses stop advancing is caught rather than looped on.
///
///     let gatt = GATTClient(bearer: bearer)
///     guard let svc = try gatt.discoverPrimaryService(uuid: ledService) else { ... }
///     let chars = try gatt.discoverCharacteristics(of: svc)
///     try gatt.write(chars[0].valueHandle, value: [0xFF], withResponse: true)
public final class GATTClient {
    public let bearer: ATTBearer

    public init(bearer: ATTBearer) { self.bearer = bearer }

    /// True when an error only means "nothing (more) here".
    static func isNotFound(_ e: Error) -> Bool {
        if case let ATTError.errorResponse(_, _, code) = e { return code == .attributeNotFound }
        return false
    }

    // MARK: services (4.4)

    /// Discover All Primary Services (4.4.1): Read By Group Type over the whole range.
    public func discoverPrimaryServices() throws -> [Service] {
        var out: [Service] = []
        var start: UInt16 = 0x0001
        while true {
            let rsp: ATTPDU
            do { rsp = try bearer.request(.readByGroupTypeRequest(start: start, end: 0xFFFF, type: GATTUUID.primaryService)) }
            catch where Self.isNotFound(error) { break }
            guard case let .readByGroupTypeResponse(groups) = rsp else {
                throw ATTError.unexpectedResponse(request: .readByGroupTypeRequest, received: rsp.opcode)
            }
            var last = start
            for g in groups {
                guard let u = BluetoothUUID(wire: g.value), g.value.count == 2 || g.value.count == 16 else {
                    throw GATTError.malformed(procedure: "primary service discovery", reason: "service UUID of \(g.value.count) bytes")
                }
                guard g.handle >= start, g.endGroup >= g.handle else {
                    throw GATTError.malformed(procedure: "primary service discovery", reason: "group 0x\(Hex.int(g.handle, width: 4))-0x\(Hex.int(g.endGroup, width: 4)) out of order")
                }
                out.append(Service(uuid: u, start: g.handle, end: g.endGroup))
                last = max(last, g.endGroup)
            }
            // Every group was checked to start at or after `start`, so `last + 1` always advances.
            if last == 0xFFFF { break }
            start = last + 1
        }
        return out
    }

    /// Discover Primary Service by Service UUID (4.4.2): Find By Type Value,
    /// stopping at the first match.
    public func discoverPrimaryService(uuid: BluetoothUUID) throws -> Service? {
        let rsp: ATTPDU
        do {
            rsp = try bearer.request(.findByTypeValueRequest(start: 0x0001, end: 0xFFFF, type: 0x2800, value: uuid.attWire))
        } catch where Self.isNotFound(error) {
            return nil
        }
        guard case let .findByTypeValueResponse(list) = rsp, let first = list.first else {
            throw ATTError.unexpectedResponse(request: .findByTypeValueRequest, received: rsp.opcode)
        }
        guard first.1 >= first.0, first.0 > 0 else {
            throw GATTError.malformed(procedure: "service discovery by UUID", reason: "group 0x\(Hex.int(first.0, width: 4))-0x\(Hex.int(first.1, width: 4))")
        }
        return Service(uuid: uuid, start: first.0, end: first.1)
    }

    // MARK: characteristics (4.6)

    /// Discover All Characteristics of a Service (4.6.1): Read By Type 0x2803
    /// over the service's range. `enough` is consulted after each response;
    /// when it returns true, discovery stops without further requests.
    public func discoverCharacteristics(of service: Service, until enough: ([Characteristic]) -> Bool = { _ in false }) throws -> [Characteristic] {
        var out: [Characteristic] = []
        var start = service.start
        while start <= service.end {
            let rsp: ATTPDU
            do { rsp = try bearer.request(.readByTypeRequest(start: start, end: service.end, type: GATTUUID.characteristic)) }
            catch where Self.isNotFound(error) { break }
            guard case let .readByTypeResponse(items) = rsp else {
                throw ATTError.unexpectedResponse(request: .readByTypeRequest, received: rsp.opcode)
            }
            var last = start
            for it in items {
                guard it.handle >= start, it.handle <= service.end else {
                    throw GATTError.malformed(procedure: "characteristic discovery", reason: "declaration handle 0x\(Hex.int(it.handle, width: 4)) outside 0x\(Hex.int(start, width: 4))-0x\(Hex.int(service.end, width: 4))")
                }
                // Declarations must come in ascending handle order (Core Vol 3 Part G 4.6.1).
                if let prev = out.last, it.handle <= prev.valueHandle {
                    throw GATTError.malformed(procedure: "characteristic discovery", reason: "declaration 0x\(Hex.int(it.handle, width: 4)) is not after the previous value handle 0x\(Hex.int(prev.valueHandle, width: 4))")
                }
                guard it.handle > 0 else {
                    throw GATTError.malformed(procedure: "characteristic discovery", reason: "declaration handle 0x0000")
                }
                let c: Characteristic
                do { c = try Characteristic.decodeDeclaration(handle: it.handle, value: it.value) }
                catch { throw GATTError.malformed(procedure: "characteristic discovery", reason: "\(error)") }
                if !out.isEmpty { out[out.count - 1].end = it.handle - 1 }
                var cc = c
                cc.end = service.end
                out.append(cc)
                last = max(last, c.valueHandle)
            }
            if enough(out) { return out }
            // Declarations were checked to lie in range and ascend, so `last + 1` always advances.
            if last >= service.end { break }
            start = last + 1
        }
        return out
    }

    // MARK: descriptors (4.7)

    /// Discover All Characteristic Descriptors (4.7.1): Find Information from
    /// the value handle + 1 to the characteristic's end, stopping at the next
    /// declaration when the end was not known precisely.
    public func discoverDescriptors(of c: Characteristic) throws -> [Descriptor] {
        var out: [Descriptor] = []
        guard c.valueHandle < c.end else { return out }
        var start = c.valueHandle + 1
        while start <= c.end {
            let rsp: ATTPDU
            do { rsp = try bearer.request(.findInformationRequest(start: start, end: c.end)) }
            catch where Self.isNotFound(error) { break }
            guard case let .findInformationResponse(list) = rsp else {
                throw ATTError.unexpectedResponse(request: .findInformationRequest, received: rsp.opcode)
            }
            var last = start
            for hu in list {
                if hu.uuid == GATTUUID.characteristic || hu.uuid == GATTUUID.primaryService || hu.uuid == GATTUUID.secondaryService {
                    return out // next characteristic or service: this one is complete
                }
                guard hu.handle >= start else { throw GATTError.discoveryStalled(procedure: "descriptor discovery", handle: start) }
                out.append(Descriptor(handle: hu.handle, uuid: hu.uuid))
                last = max(last, hu.handle)
            }
            if last >= c.end { break }
            start = last + 1
        }
        return out
    }

    // MARK: reads (4.8)

    /// Read Characteristic Value (4.8.1).
    public func read(_ handle: UInt16) throws -> [UInt8] {
        let rsp = try bearer.request(.readRequest(handle: handle))
        guard case let .readResponse(v) = rsp else { throw ATTError.unexpectedResponse(request: .readRequest, received: rsp.opcode) }
        return v
    }

    /// Read Long Characteristic Value (4.8.3): Read, then Read Blob until a short part.
    public func readLong(_ handle: UInt16, limit: Int = 512) throws -> [UInt8] {
        var value = try read(handle)
        while value.count >= bearer.mtu - 1 && value.count < limit {
            let rsp: ATTPDU
            do { rsp = try bearer.request(.readBlobRequest(handle: handle, offset: UInt16(value.count))) }
            catch let ATTError.errorResponse(_, _, code) where code == .attributeNotLong || code == .invalidOffset { break }
            guard case let .readBlobResponse(part) = rsp else { throw ATTError.unexpectedResponse(request: .readBlobRequest, received: rsp.opcode) }
            value += part
            if part.count < bearer.mtu - 1 { break }
        }
        return value
    }

    /// Read Using Characteristic UUID (4.8.2): the first value of `type` in a range.
    public func read(type: BluetoothUUID, start: UInt16 = 1, end: UInt16 = 0xFFFF) throws -> HandleValue? {
        let rsp: ATTPDU
        do { rsp = try bearer.request(.readByTypeRequest(start: start, end: end, type: type)) }
        catch where Self.isNotFound(error) { return nil }
        guard case let .readByTypeResponse(items) = rsp else { throw ATTError.unexpectedResponse(request: .readByTypeRequest, received: rsp.opcode) }
        return items.first
    }

    // MARK: writes (4.9)

    /// Write Characteristic Value (4.9.3, Write Request) or Write Without
    /// Response (4.9.1, Write Command).
    public func write(_ handle: UInt16, value: [UInt8], withResponse: Bool) throws {
        if withResponse {
            let rsp = try bearer.request(.writeRequest(handle: handle, value: value))
            guard case .writeResponse = rsp else { throw ATTError.unexpectedResponse(request: .writeRequest, received: rsp.opcode) }
        } else {
            try bearer.send(.writeCommand(handle: handle, value: value))
        }
    }

    // MARK: notifications (4.10, 4.11)

    /// Enables notifications (or indications) by writing the CCCD (3.3.3.3).
    public func subscribe(_ c: Characteristic, indications: Bool = false, descriptors: [Descriptor]? = nil) throws {
        try setCCCD(c, value: indications ? 0x0002 : 0x0001, descriptors: descriptors)
    }

    /// Disables notifications and indications.
    public func unsubscribe(_ c: Characteristic, descriptors: [Descriptor]? = nil) throws {
        try setCCCD(c, value: 0, descriptors: descriptors)
    }

    func setCCCD(_ c: Characteristic, value: UInt16, descriptors: [Descriptor]?) throws {
        let ds = try descriptors ?? discoverDescriptors(of: c)
        guard let cccd = ds.first(where: { $0.uuid == GATTUUID.clientCharacteristicConfiguration }) else {
            throw GATTError.noClientConfiguration(c.uuid)
        }
        try write(cccd.handle, value: [UInt8(value & 0xFF), UInt8(value >> 8)], withResponse: true)
    }
}
