import BLEWire
import BLEHCI
import BLEATT

/// A GATT client over one ATT bearer (Core Vol 3 Part G 4).
///
/// Every procedure comes twice: `startX(...)` queues its requests on the
/// bearer and returns a `Future` at once, so several links (and several
/// procedures on one link, queued in order) progress together in the one
/// event loop; `x(...)` is the blocking form, which runs the loop until that
/// future completes. Discovery procedures stop as soon as they have what the
/// caller asked for, and a server whose responses stop advancing is caught
/// rather than looped on.
///
///     let gatt = GATTClient(bearer: bearer)
///     guard let svc = try gatt.discoverPrimaryService(uuid: ledService) else { ... }
///     let chars = try gatt.discoverCharacteristics(of: svc)
///     try gatt.write(chars[0].valueHandle, value: [0xFF], withResponse: true)
public final class GATTClient {
    /// The ATT bearer the procedures run on.
    public let bearer: ATTBearer
    /// The HCI layer below (its loop runs the blocking forms).
    public var host: HCIHost { bearer.host }

    /// The server answered Read Multiple Variable / Read Multiple with
    /// Request Not Supported: later multiple reads skip it.
    var refusedVariable = false
    var refusedMultiple = false

    /// - Parameter bearer: the link's ATT bearer.
    public init(bearer: ATTBearer) { self.bearer = bearer }

    /// True when an error only means "nothing (more) here".
    static func isNotFound(_ e: any Error) -> Bool {
        if case let ATTError.errorResponse(_, _, code) = e { return code == .attributeNotFound }
        return false
    }

    /// A request whose Attribute Not Found error means "no more": nil then.
    func requestOrNone<R: ATTDeclaredPDU>(_ pdu: any ATTPDU, _ response: R.Type) -> Future<R?> {
        request(pdu, response).map { Optional($0) }.recover { e in
            if Self.isNotFound(e) { return Future(value: nil) }
            throw e
        }
    }

    /// A request answered by a PDU of type `R`; any other response fails it
    /// with `ATTError.unexpectedResponse`, an Error Response with `ATTError.errorResponse`.
    public func request<R: ATTDeclaredPDU>(_ pdu: any ATTPDU, _ response: R.Type) -> Future<R> {
        bearer.submit(pdu).map { rsp in
            guard let r = rsp as? R else { throw ATTError.unexpectedResponse(request: pdu.opcode, received: rsp.opcode) }
            return r
        }
    }

    /// Runs `step` from `start` until it returns nil (done) or fails; each
    /// step receives the handle to continue from and returns the next.
    func iterate(from start: UInt16, _ step: @escaping (UInt16) -> Future<UInt16?>) -> Future<Void> {
        let all = Future<Void>()
        func next(_ h: UInt16) {
            step(h).whenComplete { r in
                switch r {
                case .success(let n?): next(n)
                case .success(nil): all.succeed(())
                case .failure(let e): all.fail(e)
                }
            }
        }
        next(start)
        return all
    }

    // MARK: services (4.4)

    /// Discover All Primary Services (4.4.1): Read By Group Type over the whole range.
    /// - Returns: a future of the services in handle order.
    public func startDiscoverPrimaryServices() -> Future<[Service]> {
        var out: [Service] = []
        return iterate(from: 0x0001) { start in
            self.requestOrNone(ATT.ReadByGroupTypeRequest(start: start, end: 0xFFFF, type: GATTUUID.primaryService), ATT.ReadByGroupTypeResponse.self).map { rsp in
                guard let groups = rsp?.groups else { return nil }
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
                return last == 0xFFFF ? nil : last + 1
            }
        }.map { out }
    }

    /// Blocking form of `startDiscoverPrimaryServices`.
    /// - Throws: `ATTError`, `GATTError`, `HCIError`.
    public func discoverPrimaryServices() throws -> [Service] { try host.wait(startDiscoverPrimaryServices()) }

    /// Discover Primary Service by Service UUID (4.4.2): Find By Type Value,
    /// stopping at the first match.
    /// - Returns: a future of the service, nil when the device has none.
    public func startDiscoverPrimaryService(uuid: BluetoothUUID) -> Future<Service?> {
        requestOrNone(ATT.FindByTypeValueRequest(start: 0x0001, end: 0xFFFF, type: 0x2800, value: uuid.attWire), ATT.FindByTypeValueResponse.self).map { rsp in
            guard let list = rsp?.handles, let first = list.first else { return nil }
            guard first.groupEnd >= first.found, first.found > 0 else {
                throw GATTError.malformed(procedure: "service discovery by UUID", reason: "group 0x\(Hex.int(first.found, width: 4))-0x\(Hex.int(first.groupEnd, width: 4))")
            }
            return Service(uuid: uuid, start: first.found, end: first.groupEnd)
        }
    }

    /// Blocking form of `startDiscoverPrimaryService(uuid:)`.
    /// - Throws: `ATTError`, `GATTError`, `HCIError`.
    public func discoverPrimaryService(uuid: BluetoothUUID) throws -> Service? { try host.wait(startDiscoverPrimaryService(uuid: uuid)) }

    // MARK: characteristics (4.6)

    /// Discover All Characteristics of a Service (4.6.1): Read By Type 0x2803
    /// over the service's range. `enough` is consulted after each response;
    /// when it returns true, discovery stops without further requests.
    /// - Returns: a future of the characteristics in handle order.
    public func startDiscoverCharacteristics(of service: Service, until enough: @escaping ([Characteristic]) -> Bool = { _ in false }) -> Future<[Characteristic]> {
        var out: [Characteristic] = []
        return iterate(from: service.start) { start in
            guard start <= service.end else { return Future(value: nil) }
            return self.requestOrNone(ATT.ReadByTypeRequest(start: start, end: service.end, type: GATTUUID.characteristic), ATT.ReadByTypeResponse.self).map { rsp in
                guard let items = rsp?.values else { return nil }
                var last = start, lastValue = start
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
                    last = max(last, it.handle)
                    lastValue = max(lastValue, c.valueHandle)
                }
                if enough(out) { return nil }
                // The next request starts after the last declaration in this
                // response (4.6.1), not after its value handle, which the
                // server chose. Declarations were checked to lie in range and
                // ascend, so `last + 1` always advances.
                // A value handle at the service's end leaves no room for another declaration.
                return last >= service.end || lastValue >= service.end ? nil : last + 1
            }
        }.map { out }
    }

    /// Blocking form of `startDiscoverCharacteristics(of:until:)`.
    /// - Throws: `ATTError`, `GATTError`, `HCIError`.
    public func discoverCharacteristics(of service: Service, until enough: @escaping ([Characteristic]) -> Bool = { _ in false }) throws -> [Characteristic] {
        try host.wait(startDiscoverCharacteristics(of: service, until: enough))
    }

    // MARK: descriptors (4.7)

    /// Discover All Characteristic Descriptors (4.7.1): Find Information from
    /// the value handle + 1 to the characteristic's end, stopping at the next
    /// declaration when the end was not known precisely.
    /// - Returns: a future of the descriptors in handle order.
    public func startDiscoverDescriptors(of c: Characteristic) -> Future<[Descriptor]> {
        var out: [Descriptor] = []
        guard c.valueHandle < c.end else { return Future(value: out) }
        return iterate(from: c.valueHandle + 1) { start in
            guard start <= c.end else { return Future(value: nil) }
            return self.requestOrNone(ATT.FindInformationRequest(start: start, end: c.end), ATT.FindInformationResponse.self).map { rsp in
                guard let list = rsp?.information else { return nil }
                var last = start
                for hu in list {
                    if hu.uuid == GATTUUID.characteristic || hu.uuid == GATTUUID.primaryService || hu.uuid == GATTUUID.secondaryService {
                        return nil // next characteristic or service: this one is complete
                    }
                    guard hu.handle >= start else { throw GATTError.discoveryStalled(procedure: "descriptor discovery", handle: start) }
                    out.append(Descriptor(handle: hu.handle, uuid: hu.uuid))
                    last = max(last, hu.handle)
                }
                return last >= c.end ? nil : last + 1
            }
        }.map { out }
    }

    /// Blocking form of `startDiscoverDescriptors(of:)`.
    /// - Throws: `ATTError`, `GATTError`, `HCIError`.
    public func discoverDescriptors(of c: Characteristic) throws -> [Descriptor] { try host.wait(startDiscoverDescriptors(of: c)) }

    // MARK: reads (4.8)

    /// Read Characteristic Value (4.8.1).
    /// - Returns: a future of the value (at most ATT_MTU - 1 bytes).
    public func startRead(_ handle: UInt16) -> Future<[UInt8]> {
        request(ATT.ReadRequest(handle: handle), ATT.ReadResponse.self).map(\.value)
    }

    /// Blocking form of `startRead(_:)`.
    /// - Throws: `ATTError`, `HCIError`.
    public func read(_ handle: UInt16) throws -> [UInt8] { try host.wait(startRead(handle)) }

    /// Read Long Characteristic Value (4.8.3): Read, then Read Blob until a short part.
    /// - Returns: a future of the whole value (up to `limit` bytes).
    public func startReadLong(_ handle: UInt16, limit: Int = 512) -> Future<[UInt8]> {
        let mtu = bearer.mtu
        return startRead(handle).flatMap { first -> Future<[UInt8]> in
            guard first.count >= mtu - 1 && first.count < limit else { return Future(value: first) }
            return self.startReadBlobs(handle, from: first).map { Array($0.prefix(limit)) }
        }
    }

    /// Blocking form of `startReadLong(_:limit:)`.
    /// - Throws: `ATTError`, `HCIError`.
    public func readLong(_ handle: UInt16, limit: Int = 512) throws -> [UInt8] { try host.wait(startReadLong(handle, limit: limit)) }

    /// Read Using Characteristic UUID (4.8.2): the first value of `type` in a range.
    /// - Returns: a future of the handle and value, nil when there is none.
    public func startRead(type: BluetoothUUID, start: UInt16 = 1, end: UInt16 = 0xFFFF) -> Future<HandleValue?> {
        requestOrNone(ATT.ReadByTypeRequest(start: start, end: end, type: type), ATT.ReadByTypeResponse.self).map { rsp in
            guard let items = rsp?.values else { return nil }
            return items.first
        }
    }

    /// Blocking form of `startRead(type:start:end:)`.
    /// - Throws: `ATTError`, `HCIError`.
    public func read(type: BluetoothUUID, start: UInt16 = 1, end: UInt16 = 0xFFFF) throws -> HandleValue? {
        try host.wait(startRead(type: type, start: start, end: end))
    }

    // MARK: writes (4.9)

    /// Write Characteristic Value (4.9.3, Write Request) or Write Without
    /// Response (4.9.1, Write Command; the future completes once it is queued
    /// for the controller).
    /// - Returns: a future that succeeds when the write is acknowledged (or sent).
    ///
    /// A value longer than ATT_MTU - 3 with a response is written as a long
    /// value (4.9.4, Prepare Write / Execute Write); without a response it
    /// fails with `ATTError.tooLong`, as Write Command has no long form.
    public func startWrite(_ handle: UInt16, value: [UInt8], withResponse: Bool) -> Future<Void> {
        if withResponse && value.count > bearer.mtu - 3 { return startWriteLong(handle, value: value) }
        if withResponse {
            return request(ATT.WriteRequest(handle: handle, value: value), ATT.WriteResponse.self).map { _ in }
        }
        do { try bearer.send(ATT.WriteCommand(handle: handle, value: value)) } catch { return Future(error: error) }
        return .done
    }

    /// Completes when the controller has sent every packet queued on this
    /// bearer's link so far (Number Of Completed Packets, Core Vol 4 Part E
    /// 7.7.19): a Write Command gets no reply, so this is when it is done;
    /// a link closed before loses what is still queued.
    /// - Returns: a future that fails with `ACLDrainTimeout` after `timeoutMs`.
    public func startSent(timeoutMs: Int = 5000) -> Future<Void> {
        host.startDrain(handle: bearer.link.handle, timeoutMs: timeoutMs)
    }

    /// `startWrite(_:value:withResponse:)`, done only when it is done: the
    /// Write Response received, or the Write Command sent (`startSent`).
    public func startWriteDone(_ handle: UInt16, value: [UInt8], withResponse: Bool) -> Future<Void> {
        let f = startWrite(handle, value: value, withResponse: withResponse)
        return withResponse ? f : f.flatMap { self.startSent() }
    }

    /// Blocking form of `startWrite(_:value:withResponse:)`.
    /// - Throws: `ATTError`, `HCIError`.
    public func write(_ handle: UInt16, value: [UInt8], withResponse: Bool) throws {
        try host.wait(startWrite(handle, value: value, withResponse: withResponse))
    }

    // MARK: notifications (4.10, 4.11)

    /// Enables notifications (or indications) by writing the CCCD (3.3.3.3),
    /// discovering the descriptors first unless they are given.
    /// - Returns: a future that succeeds once the CCCD write is acknowledged.
    public func startSubscribe(_ c: Characteristic, indications: Bool = false, descriptors: [Descriptor]? = nil) -> Future<Void> {
        startSetCCCD(c, value: indications ? 0x0002 : 0x0001, descriptors: descriptors)
    }

    /// Blocking form of `startSubscribe`.
    /// - Throws: `GATTError.noClientConfiguration`, `ATTError`, `HCIError`.
    public func subscribe(_ c: Characteristic, indications: Bool = false, descriptors: [Descriptor]? = nil) throws {
        try host.wait(startSubscribe(c, indications: indications, descriptors: descriptors))
    }

    /// Disables notifications and indications.
    /// - Throws: `GATTError.noClientConfiguration`, `ATTError`, `HCIError`.
    public func unsubscribe(_ c: Characteristic, descriptors: [Descriptor]? = nil) throws {
        try host.wait(startSetCCCD(c, value: 0, descriptors: descriptors))
    }

    func startSetCCCD(_ c: Characteristic, value: UInt16, descriptors: [Descriptor]?) -> Future<Void> {
        let ds = descriptors.map { Future(value: $0) } ?? startDiscoverDescriptors(of: c)
        return ds.flatMap { ds in
            guard let cccd = ds.first(where: { $0.uuid == GATTUUID.clientCharacteristicConfiguration }) else {
                throw GATTError.noClientConfiguration(c.uuid)
            }
            return self.startWrite(cccd.handle, value: [UInt8(value & 0xFF), UInt8(value >> 8)], withResponse: true)
        }
    }
}
