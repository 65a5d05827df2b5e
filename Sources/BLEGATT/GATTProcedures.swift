import BLEWire
import BLEHCI
import BLEATT

// The GATT procedures a general client needs beyond the LED path: every
// instance of a service, included services, characteristics over any range,
// Read Using Characteristic UUID in full, long writes, and the whole database.

extension GATTClient {
    /// The largest attribute value (Core Vol 3 Part F 3.2.9).
    public static let maximumValueLength = 512

    // MARK: services (4.4.2, 4.5.1)

    /// Discover Primary Service by Service UUID (4.4.2), every instance:
    /// Find By Type Value from 0x0001 until Attribute Not Found or 0xFFFF.
    /// - Returns: a future of the services in handle order (empty when none).
    public func startDiscoverPrimaryServices(uuid: BluetoothUUID) -> Future<[Service]> {
        var out: [Service] = []
        return iterate(from: 0x0001) { start in
            self.requestOrNone(ATT.FindByTypeValueRequest(start: start, end: 0xFFFF, type: 0x2800, value: uuid.attWire), ATT.FindByTypeValueResponse.self).map { rsp in
                guard let list = rsp?.handles else { return nil }
                var last = start
                for h in list {
                    guard h.found >= start, h.groupEnd >= h.found else {
                        throw GATTError.malformed(procedure: "service discovery by UUID", reason: "group 0x\(Hex.int(h.found, width: 4))-0x\(Hex.int(h.groupEnd, width: 4)) out of order")
                    }
                    out.append(Service(uuid: uuid, start: h.found, end: h.groupEnd))
                    last = max(last, h.groupEnd)
                }
                return last == 0xFFFF ? nil : last + 1
            }
        }.map { out }
    }

    /// Blocking form of `startDiscoverPrimaryServices(uuid:)`.
    /// - Throws: `ATTError`, `GATTError`, `HCIError`.
    public func discoverPrimaryServices(uuid: BluetoothUUID) throws -> [Service] { try host.wait(startDiscoverPrimaryServices(uuid: uuid)) }

    /// Find Included Services (4.5.1): Read By Type 0x2802 over the service's
    /// range. An include of a 128-bit service carries no UUID (3.2), so the
    /// included service's declaration is read (Read Request) for it.
    /// - Returns: a future of the includes in handle order.
    public func startFindIncludedServices(of service: Service) -> Future<[IncludedService]> {
        var out: [IncludedService] = []
        return iterate(from: service.start) { start in
            guard start <= service.end else { return Future(value: nil) }
            return self.requestOrNone(ATT.ReadByTypeRequest(start: start, end: service.end, type: GATTUUID.include), ATT.ReadByTypeResponse.self).flatMap { rsp -> Future<UInt16?> in
                guard let items = rsp?.values else { return Future(value: nil) }
                var last = start
                var pending: [(Int, UInt16)] = [] // (index in out, included start) still needing a UUID
                for it in items {
                    guard it.handle >= start, it.handle <= service.end, out.last.map({ it.handle > $0.handle }) ?? true else {
                        throw GATTError.malformed(procedure: "included service discovery", reason: "include declaration 0x\(Hex.int(it.handle, width: 4)) outside 0x\(Hex.int(start, width: 4))-0x\(Hex.int(service.end, width: 4)) or out of order")
                    }
                    var r = ByteReader(it.value)
                    let s: UInt16, e: UInt16
                    do { s = try r.u16("Included Service Attribute Handle"); e = try r.u16("End Group Handle") }
                    catch { throw GATTError.malformed(procedure: "included service discovery", reason: "\(error)") }
                    guard s > 0, e >= s else {
                        throw GATTError.malformed(procedure: "included service discovery", reason: "included range 0x\(Hex.int(s, width: 4))-0x\(Hex.int(e, width: 4))")
                    }
                    let rest = r.rest()
                    switch rest.count {
                    case 2:
                        out.append(IncludedService(handle: it.handle, uuid: BluetoothUUID(uint16: UInt16(rest[0]) | UInt16(rest[1]) << 8), start: s, end: e))
                    case 0:
                        // Filled in by the Read Request below.
                        out.append(IncludedService(handle: it.handle, uuid: BluetoothUUID(uint16: 0), start: s, end: e))
                        pending.append((out.count - 1, s))
                    default:
                        throw GATTError.malformed(procedure: "included service discovery", reason: "include declaration value of \(it.value.count) bytes (must be 6 or 8)")
                    }
                    last = max(last, it.handle)
                }
                let next: UInt16? = last >= service.end ? nil : last + 1
                return sequentially(pending) { (i, s) in
                    self.startRead(s).map { v in
                        guard v.count == 16, let u = BluetoothUUID(wire: v) else {
                            throw GATTError.malformed(procedure: "included service discovery", reason: "the declaration of included service 0x\(Hex.int(s, width: 4)) holds \(v.count) bytes, not a 128-bit UUID")
                        }
                        out[i].uuid = u
                    }
                }.map { next }
            }
        }.map { out }
    }

    /// Blocking form of `startFindIncludedServices(of:)`.
    /// - Throws: `ATTError`, `GATTError`, `HCIError`.
    public func findIncludedServices(of service: Service) throws -> [IncludedService] { try host.wait(startFindIncludedServices(of: service)) }

    // MARK: characteristics (4.6.2)

    /// Discover Characteristics by UUID (4.6.2): every characteristic
    /// declaration of the service, keeping those with `uuid`.
    /// - Returns: a future of the matching characteristics in handle order.
    public func startDiscoverCharacteristics(of service: Service, uuid: BluetoothUUID) -> Future<[Characteristic]> {
        startDiscoverCharacteristics(of: service).map { $0.filter { $0.uuid == uuid } }
    }

    // MARK: reads (4.8.2)

    /// Read Using Characteristic UUID (4.8.2) over a range, in full: Read By
    /// Type repeated after the last handle returned until Attribute Not Found,
    /// so several characteristics with the UUID are all seen. A value that
    /// filled its entry (ATT_MTU - 4 bytes, or 253) may be longer: it is read
    /// to its end with Read Blob.
    /// - Returns: a future of the handles and whole values, in handle order.
    public func startReadUsingCharacteristicUUID(_ type: BluetoothUUID, start: UInt16 = 0x0001, end: UInt16 = 0xFFFF) -> Future<[HandleValue]> {
        var out: [HandleValue] = []
        let mtu = bearer.mtu
        return iterate(from: start) { from in
            guard from <= end else { return Future(value: nil) }
            return self.requestOrNone(ATT.ReadByTypeRequest(start: from, end: end, type: type), ATT.ReadByTypeResponse.self).flatMap { rsp -> Future<UInt16?> in
                guard let items = rsp?.values else { return Future(value: nil) }
                var last = from
                var truncated: [Int] = []
                for it in items {
                    guard it.handle >= from, it.handle <= end, out.last.map({ it.handle > $0.handle }) ?? true else {
                        throw GATTError.malformed(procedure: "read using characteristic UUID", reason: "handle 0x\(Hex.int(it.handle, width: 4)) outside 0x\(Hex.int(from, width: 4))-0x\(Hex.int(end, width: 4)) or out of order")
                    }
                    out.append(it)
                    if it.value.count >= min(mtu - 4, 253) { truncated.append(out.count - 1) }
                    last = max(last, it.handle)
                }
                let next: UInt16? = last >= end ? nil : last + 1
                return sequentially(truncated) { i in
                    self.startReadBlobs(out[i].handle, from: out[i].value).map { out[i].value = $0 }
                }.map { next }
            }
        }.map { out }
    }

    /// Blocking form of `startReadUsingCharacteristicUUID(_:start:end:)`.
    /// - Throws: `ATTError`, `GATTError`, `HCIError`.
    public func readUsingCharacteristicUUID(_ type: BluetoothUUID, start: UInt16 = 0x0001, end: UInt16 = 0xFFFF) throws -> [HandleValue] {
        try host.wait(startReadUsingCharacteristicUUID(type, start: start, end: end))
    }

    /// Continues a value known to start with `head` with Read Blob until a
    /// short part, Attribute Not Long or Invalid Offset, or the 512-byte limit.
    func startReadBlobs(_ handle: UInt16, from head: [UInt8]) -> Future<[UInt8]> {
        var value = head
        let mtu = bearer.mtu
        guard value.count < Self.maximumValueLength else { return Future(value: value) }
        return iterate(from: UInt16(value.count)) { offset in
            self.request(ATT.ReadBlobRequest(handle: handle, offset: offset), ATT.ReadBlobResponse.self).map { rsp -> UInt16? in
                let part = rsp.value
                value += part
                if part.count < mtu - 1 || value.count >= Self.maximumValueLength { return nil }
                return UInt16(value.count)
            }.recover { e in
                if case let ATTError.errorResponse(_, _, code) = e, code == .attributeNotLong || code == .invalidOffset { return Future(value: nil) }
                throw e
            }
        }.map { value }
    }

    // MARK: long writes (4.9.4)

    /// Write Long Characteristic Values (4.9.4), also used for long
    /// descriptors (4.12.4): the value in parts of ATT_MTU - 5 bytes with
    /// Prepare Write Requests, each echoed part checked against the part
    /// sent, then Execute Write (flags 0x01). A mismatched echo, or an error
    /// on a Prepare Write, cancels the queue with Execute Write (flags 0x00).
    /// - Returns: a future that succeeds once Execute Write is acknowledged;
    ///   it fails with `GATTError.prepareWriteMismatch`, `GATTError.valueTooLong`,
    ///   `ATTError`.
    public func startWriteLong(_ handle: UInt16, value: [UInt8], offset: UInt16 = 0) -> Future<Void> {
        guard Int(offset) + value.count <= Self.maximumValueLength else {
            return Future(error: GATTError.valueTooLong(size: Int(offset) + value.count, limit: Self.maximumValueLength))
        }
        let part = bearer.mtu - 5
        var pos = 0
        let prepared = iterate(from: 0) { _ -> Future<UInt16?> in
            let chunk = Array(value[pos..<min(pos + part, value.count)])
            let at = offset + UInt16(pos)
            return self.request(ATT.PrepareWriteRequest(handle: handle, offset: at, value: chunk), ATT.PrepareWriteResponse.self).map { rsp -> UInt16? in
                guard rsp.handle == handle, rsp.offset == at, rsp.value == chunk else { throw GATTError.prepareWriteMismatch(handle: handle, offset: at) }
                pos += chunk.count
                return pos < value.count ? 0 : nil
            }
        }
        return prepared.recover { e -> Future<Void> in
            // Cancel whatever the server queued; the original error is what the caller sees.
            if case ATTError.timeout = e { throw e }
            if case ATTError.disconnected = e { throw e }
            return self.bearer.submit(ATT.ExecuteWriteRequest(flags: 0x00))
                .map { (_: any ATTPDU) -> Void in throw e }
                .recover { (_: any Error) -> Future<Void> in throw e }
        }.flatMap {
            self.request(ATT.ExecuteWriteRequest(flags: 0x01), ATT.ExecuteWriteResponse.self).map { _ in }
        }
    }

    /// Blocking form of `startWriteLong(_:value:offset:)`.
    /// - Throws: `GATTError.prepareWriteMismatch`, `GATTError.valueTooLong`, `ATTError`, `HCIError`.
    public func writeLong(_ handle: UInt16, value: [UInt8], offset: UInt16 = 0) throws {
        try host.wait(startWriteLong(handle, value: value, offset: offset))
    }
}
