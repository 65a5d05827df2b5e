import Attled
import ESPHomeAPI

/// One Bluetooth link an API client asked for: the keeper's device (its
/// claim) and, once up, the link.
final class ProxyLink {
    let address: UInt64
    weak var client: ProxyClient?
    var device: KeptDevice?
    /// Up and its MTU exchanged: the client was told "connected".
    var link: Link?

    init(address: UInt64, client: ProxyClient) {
        self.address = address
        self.client = client
    }
}

/// The clients' device requests (connect, disconnect, pair, unpair, clear
/// cache), the keeper's answers, and the slot accounting.
extension Proxy {

    func deviceRequest(_ m: BluetoothDeviceRequest, from c: ProxyClient) {
        switch m.requestType {
        case .connect, .connectV3WithCache, .connectV3WithoutCache:
            connect(m, c)
        case .disconnect:
            guard let l = c.links[m.address] else { return connectionResponse(c, m.address, connected: false, mtu: 0, error: 0) }
            if let d = l.device { keeper.release(d) }
            if l.link == nil {
                // Not up yet: the attempt is abandoned and the client told at once.
                c.links[m.address] = nil
                connectionResponse(c, m.address, connected: false, mtu: 0, error: 0)
                connectionsChanged()
            }
        case .pair:
            pair(m.address, c)
        case .unpair:
            unpair(m.address, c)
        case .clearCache:
            // The client keeps the GATT cache (remote caching): nothing of ours to clear.
            var r = BluetoothDeviceClearCacheResponse()
            r.address = m.address
            r.success = true
            c.send(r)
        default:
            log("proxy: \(c.label): ignored device request \(m.requestType)")
        }
    }

    private func connect(_ m: BluetoothDeviceRequest, _ c: ProxyClient) {
        if let l = c.links[m.address] {
            // Already ours: say where it stands (connected, or still connecting: the answer comes).
            if let link = l.link { connectionResponse(c, m.address, connected: true, mtu: UInt32(link.bearer.mtu), error: 0) }
            return
        }
        guard freeSlots > 0 else {
            log("proxy: \(c.label): connect \(Self.text(m.address)) refused: no free connection slot")
            return connectionResponse(c, m.address, connected: false, mtu: 0, error: Int32(HCIStatus.connectionLimitExceeded.rawValue))
        }
        let type: AddressType = m.hasAddressType && m.addressType == 1 ? .random : (m.hasAddressType ? .public : guessType(m.address))
        let address = DeviceAddress(Self.bdAddress(m.address), type)
        if let other = keeper.devices[address.address], other.owner !== owner {
            log("proxy: \(c.label): connect \(address) refused: \(other.owner.name) holds it")
            return connectionResponse(c, m.address, connected: false, mtu: 0, error: Int32(HCIStatus.commandDisallowed.rawValue))
        }
        let l = ProxyLink(address: m.address, client: c)
        c.links[m.address] = l
        log("proxy: \(c.label): connect \(address) (\(m.requestType))")
        l.device = keeper.reach(address, for: owner, claim: .once, timeoutMs: config.connectTimeoutMs)
        connectionsChanged()
    }

    /// Without an address type (clients before aioesphomeapi 39): the one
    /// its advertisements had, else random (what LE devices mostly use).
    private func guessType(_ a: UInt64) -> AddressType {
        keeper.stack?.central.devices.first { Self.apiAddress($0.key.address) == a }?.key.type ?? .random
    }

    /// The link a request is about, or an error response to the client.
    func ready(_ address: UInt64, _ handle: UInt16, _ c: ProxyClient) -> Link? {
        guard let l = c.links[address]?.link, l.isConnected else {
            gattError(c, address, handle, code: Self.notConnected)
            return nil
        }
        return l
    }

    // MARK: the keeper's events

    func keeperEvent(_ e: DeviceKeeper.Event) {
        switch e {
        case let .linkUp(d, link):
            guard let (c, l) = find(d) else { return keeper.release(d) }
            linkUp(c, l, d, link)
        case let .linkDown(d, reason, _):
            guard let (c, l) = find(d) else { return }
            c.links[l.address] = nil
            log("proxy: \(c.label): \(d.address) disconnected (\(reason?.description ?? "link lost"))")
            connectionResponse(c, l.address, connected: false, mtu: 0, error: Int32(reason?.rawValue ?? HCIStatus.connectionTimeout.rawValue))
            connectionsChanged()
        case let .connectFailed(d, error), let .notAtRememberedAddress(d, error):
            guard let (c, l) = find(d) else { return }
            c.links[l.address] = nil
            log("proxy: \(c.label): connect \(d.address) failed: \(error)")
            connectionResponse(c, l.address, connected: false, mtu: 0, error: Int32(Self.status(of: error).rawValue))
            connectionsChanged()
        case .controllerBack, .controllerLost, .becameOnDemand, .waitingFromAcceptList, .scanFailed, .stateChanged:
            break
        }
    }

    private func find(_ d: KeptDevice) -> (ProxyClient, ProxyLink)? {
        for c in clientList { for l in c.links.values where l.device === d { return (c, l) } }
        return nil
    }

    /// The link is up: the MTU exchanged (the client writes in pieces of it), then "connected".
    private func linkUp(_ c: ProxyClient, _ l: ProxyLink, _ d: KeptDevice, _ link: Link) {
        link.bearer.onNotification = { [weak self, weak c] hv in
            guard let self, let c else { return }
            self.notification(c, l.address, hv)
        }
        link.bearer.onIndication = link.bearer.onNotification
        link.bearer.startExchangeMTU().whenComplete { [weak self] r in
            guard let self else { return }
            if case .failure(let e) = r, !link.isConnected { return self.log("proxy: \(d.address): lost during set-up (\(e))") }
            l.link = link
            self.keeper.ready(d)
            self.log("proxy: \(c.label): \(d.address) connected, MTU \(link.bearer.mtu)")
            self.connectionResponse(c, l.address, connected: true, mtu: UInt32(link.bearer.mtu), error: 0)
        }
    }

    func connectionResponse(_ c: ProxyClient, _ address: UInt64, connected: Bool, mtu: UInt32, error: Int32) {
        var r = BluetoothDeviceConnectionResponse()
        r.address = address
        r.connected = connected
        r.mtu = mtu
        r.error = error
        c.send(r)
    }

    /// The HCI status an API client is told for a failed connect.
    static func status(of e: any Error) -> HCIStatus {
        switch e {
        case let GAPError.connectFailed(_, s): return s
        case let HCIError.commandFailed(_, s): return s
        default: return .connectionFailedToEstablish
        }
    }

    // MARK: slots

    /// The slots the proxy may use: `maxConnections`, or what the
    /// controller allows (at most ESPHome's 9).
    var connectionLimit: Int {
        config.maxConnections ?? min(keeper.slotCount ?? ProxyConfig.maxConnectionsCap, ProxyConfig.maxConnectionsCap)
    }

    /// The proxy's links (connected or being made).
    var allocated: [UInt64] { clientList.flatMap { $0.links.keys }.sorted() }

    /// What is left for the clients: the proxy's own limit less its links,
    /// and never more than the controller has free beside the other
    /// owners' links (the gateway's lamps).
    var freeSlots: Int {
        let own = allocated.count
        let others = keeper.linkCount - clientList.reduce(0) { $0 + $1.links.values.filter { $0.link != nil }.count }
        let controllerLeft = (keeper.slotCount ?? connectionLimit) - max(0, others) - own
        return max(0, min(connectionLimit - own, controllerLeft))
    }

    func connectionsFree() -> BluetoothConnectionsFreeResponse {
        var r = BluetoothConnectionsFreeResponse()
        r.free = UInt32(freeSlots)
        r.limit = UInt32(connectionLimit)
        r.allocated = allocated
        return r
    }

    /// Every subscribed client hears the new slot count.
    func connectionsChanged() {
        let r = connectionsFree()
        for c in clientList where c.wantsConnectionsFree { c.send(r) }
    }

    /// "AA:BB:CC:DD:EE:FF" of an API address.
    static func text(_ a: UInt64) -> String { bdAddress(a).description }

    /// The error code for a request on a link that is not up: ESP-IDF's
    /// generic ESP_GATT_ERROR (the client fails the request with it).
    static let notConnected: UInt32 = genericGATTError
}
