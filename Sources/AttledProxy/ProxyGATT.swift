import Attled
import ESPHomeAPI

/// The clients' GATT requests on their links: the services as the client
/// asks for them (one service per message, then done), reads, writes,
/// notifications, and pairing through attled's SMP and bond store.
extension Proxy {

    /// Discovers the whole database (services, characteristics, descriptors)
    /// and sends it one service per message, then done.
    func getServices(_ address: UInt64, _ c: ProxyClient) {
        guard let link = ready(address, 0, c) else { return }
        link.gatt.startDiscoverDatabase().whenComplete { [weak self, weak c] r in
            guard let self, let c else { return }
            switch r {
            case .success(let db):
                for s in db.services {
                    var m = BluetoothGATTGetServicesResponse()
                    m.address = address
                    m.services = [Self.apiService(s)]
                    c.send(m)
                }
                var done = BluetoothGATTGetServicesDoneResponse()
                done.address = address
                c.send(done)
            case .failure(let e):
                self.log("proxy: \(c.label): service discovery on \(Self.text(address)) failed: \(e)")
                self.gattError(c, address, 0, e)
            }
        }
    }

    /// A service as the API carries it (128-bit UUIDs: API 1.10 has no short form).
    static func apiService(_ s: GATTDatabase.ServiceEntry) -> BluetoothGATTService {
        BluetoothGATTService(uuid: apiUUID(s.service.uuid), handle: UInt32(s.service.start), characteristics: s.characteristics.map { e in
            BluetoothGATTCharacteristic(uuid: apiUUID(e.characteristic.uuid), handle: UInt32(e.characteristic.valueHandle),
                                        properties: UInt32(e.characteristic.properties.rawValue),
                                        descriptors: e.descriptors.map { BluetoothGATTDescriptor(uuid: apiUUID($0.uuid), handle: UInt32($0.handle)) })
        })
    }

    /// A UUID as two uint64, most significant half first.
    static func apiUUID(_ u: BluetoothUUID) -> BluetoothGATTUUID {
        let be = Array(u.bytes128.reversed())
        let hi = be[0..<8].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        let lo = be[8..<16].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        return BluetoothGATTUUID(uuid: [hi, lo])
    }

    /// Reads a characteristic's or descriptor's value (a long one whole).
    func read(_ address: UInt64, _ handle: UInt16, _ c: ProxyClient) {
        guard let link = ready(address, handle, c) else { return }
        link.gatt.startReadLong(handle).whenComplete { [weak self, weak c] r in
            guard let self, let c else { return }
            switch r {
            case .success(let v):
                var m = BluetoothGATTReadResponse()
                m.address = address
                m.handle = UInt32(handle)
                m.data = v
                c.send(m)
            case .failure(let e): self.gattError(c, address, handle, e)
            }
        }
    }

    /// Writes a value: with a response when asked (then answered with a
    /// write response), else as a Write Command (no answer, as ESPHome).
    func write(_ address: UInt64, _ handle: UInt16, _ value: [UInt8], response: Bool, _ c: ProxyClient) {
        guard let link = ready(address, handle, c) else { return }
        link.gatt.startWrite(handle, value: value, withResponse: response).whenComplete { [weak self, weak c] r in
            guard let self, let c else { return }
            switch r {
            case .success:
                guard response else { return }
                c.send(BluetoothGATTWriteResponse(address: address, handle: UInt32(handle)))
            case .failure(let e): self.gattError(c, address, handle, e)
            }
        }
    }

    /// Notifications of `handle` go to the client from now on (they always
    /// do: the client with remote caching writes the CCCD itself).
    func notify(_ address: UInt64, _ handle: UInt16, _ enable: Bool, _ c: ProxyClient) {
        guard ready(address, handle, c) != nil else { return }
        c.send(BluetoothGATTNotifyResponse(address: address, handle: UInt32(handle)))
    }

    func notification(_ c: ProxyClient, _ address: UInt64, _ hv: HandleValue) {
        var m = BluetoothGATTNotifyDataResponse()
        m.address = address
        m.handle = UInt32(hv.handle)
        m.data = hv.value
        c.send(m)
    }

    /// A failed GATT request: the ATT error code, else ESP-IDF's generic GATT error.
    func gattError(_ c: ProxyClient, _ address: UInt64, _ handle: UInt16, _ e: any Error) {
        var code = Self.genericGATTError
        if case let ATTError.errorResponse(_, _, att) = e { code = UInt32(att.rawValue) }
        gattError(c, address, handle, code: code)
    }

    func gattError(_ c: ProxyClient, _ address: UInt64, _ handle: UInt16, code: UInt32) {
        var m = BluetoothGATTErrorResponse()
        m.address = address
        m.handle = UInt32(handle)
        m.error = Int32(bitPattern: code)
        c.send(m)
    }

    /// ESP-IDF's ESP_GATT_ERROR: a failure that is no ATT error (a timeout, a lost link).
    static let genericGATTError: UInt32 = 0x85

    // MARK: pairing

    /// Pairs (Just Works, through attled's SMP; the bond stored).
    func pair(_ address: UInt64, _ c: ProxyClient) {
        guard let link = c.links[address]?.link, link.isConnected else {
            var r = BluetoothDevicePairingResponse()
            r.address = address
            r.error = Int32(Self.notConnected)
            return c.send(r)
        }
        securer(for: c).secure(link).whenComplete { [weak c] r in
            var m = BluetoothDevicePairingResponse()
            m.address = address
            switch r {
            case .success: m.success = true
            case .failure: m.error = Int32(Self.genericGATTError)
            }
            c?.send(m)
        }
    }

    /// Forgets the bond with the device (and drops its link, as ESPHome does).
    func unpair(_ address: UInt64, _ c: ProxyClient) {
        let peer = DeviceAddress(Self.bdAddress(address), .random)
        let removed = bonds.map { store in
            [peer, DeviceAddress(peer.address, .public)].contains { store.remove($0) != nil }
        } ?? false
        if let l = c.links[address], let d = l.device { keeper.release(d) }
        var m = BluetoothDeviceUnpairingResponse()
        m.address = address
        m.success = true
        c.send(m)
        log("proxy: \(c.label): unpaired \(peer.address)\(removed ? " (bond removed)" : " (no bond)")")
    }

    private func securer(for c: ProxyClient) -> Securer {
        let report = Report(prefix: "proxy: \(c.label): ", quiet: !verbose)
        report.output = { [weak self] line in self?.log(line) }
        return Securer(policy: SecurityPolicy(pairing: .auto), store: bonds, report: report)
    }
}
