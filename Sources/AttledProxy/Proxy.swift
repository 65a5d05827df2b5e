import Attled
import ESPHomeAPI

/// A Home Assistant Bluetooth proxy over ESPHome's native API: API clients
/// (Home Assistant, aioesphomeapi, bleak-esphome) get this radio's
/// advertisements and make GATT connections through it.
///
/// It is one owner of a `DeviceKeeper` (shared with the gateway's lamps
/// when both run in one process): each client's connection is a claim
/// `.once` on its device, the keeper arbitrates the controller's slots, and
/// the proxy reports only the slots left to it. One thread, one loop: the
/// listening socket and every client's socket are watched on the keeper's
/// event loop.
public final class Proxy {
    public let config: ProxyConfig
    public let keeper: DeviceKeeper
    /// The proxy's claims on the keeper.
    public let owner: KeeperOwner
    /// Where log lines go (default: stderr).
    public var log: (String) -> Void = { Console.err($0) }
    /// Every API message in and out (`--trace`), nil: none.
    public var trace: ((String) -> Void)?
    /// Where pairing keys are kept (nil: pairing keeps none).
    public var bonds: BondStore?
    /// Pairing's progress lines too.
    public var verbose = false
    var loop: EventLoop { keeper.loop }
    private(set) var listener: TCPListener?
    private var listenWatch: EventLoop.Token?
    private var clients: [Int: ProxyClient] = [:]
    private var nextClient = 1
    private var announcement: ProxyAnnouncement?
    private var announcementCheck: EventLoop.Token?
    var clientList: [ProxyClient] { Array(clients.values) }
    /// The port listened on (the kernel's pick when the config says 0).
    public var port: UInt16? { listener?.port }

    /// - Parameters:
    ///   - keeper: the keeper whose controller the proxy shares.
    ///   - priority: the proxy's priority among the keeper's owners.
    public init(config: ProxyConfig, keeper: DeviceKeeper, priority: Int = 0) {
        self.config = config
        self.keeper = keeper
        owner = keeper.owner("proxy", priority: priority)
        // Devices come only from the clients' requests, never from reports.
        owner.wants = { _ in nil }
        owner.onDemandBeyondSlots = false
        owner.scanWanted = { [weak self] in self?.clients.values.contains { $0.wantsAdvertisements } ?? false }
        owner.subscribe { [weak self] e in self?.keeperEvent(e) }
        keeper.subscribeCentral { [weak self] e in if case let .heard(a) = e { self?.heard(a) } }
    }

    /// Listens on the configured address.
    /// - Throws: `ListenError`.
    public func start() throws {
        let l = try TCPListener(host: config.listenHost, port: config.listenPort)
        listener = l
        listenWatch = loop.watch(l.fd, .readable) { [weak self] _ in self?.accept() }
        if config.announce { announce(port: l.port) }
        log("proxy: listening on \(config.listenHost):\(l.port) (ESPHome native API \(ProxyConfig.apiVersion.major).\(ProxyConfig.apiVersion.minor), \(config.key == nil ? "plaintext" : "Noise encryption")), node \(config.name), MAC \(ProxyConfig.text(config.macAddress))")
    }

    /// Announces the node over mDNS and tells how that went: the name
    /// announced once avahi-daemon has it, or why not (then Home Assistant
    /// adds the proxy by host and port).
    private func announce(port: UInt16) {
        switch ProxyAnnouncement.start(config, port: port) {
        case let .failure(e):
            log("proxy: not announced over mDNS (\(e)); add it in Home Assistant by host and port \(port)")
        case let .success(a):
            announcement = a
            var waited = 0
            func check() {
                announcementCheck = loop.schedule(afterMs: 100) { [weak self] in
                    guard let self, let a = self.announcement else { return }
                    waited += 100
                    switch a.state {
                    case let .established(name): self.log("proxy: announced over mDNS as \(name).\(ProxyAnnouncement.serviceType).local")
                    case let .failed(why): self.log("proxy: mDNS announcement failed (\(why)); add it in Home Assistant by host and port \(port)")
                    case .starting:
                        if waited < 10_000 { check() } else { self.log("proxy: avahi-daemon has not announced the node within 10 s; still trying") }
                    }
                }
            }
            check()
        }
    }

    /// Stops listening and closes every client (their links are let go).
    public func stop() {
        if let t = announcementCheck { loop.cancel(t) }
        announcement?.stop()
        announcement = nil
        if let w = listenWatch { loop.cancel(w) }
        listenWatch = nil
        listener?.close()
        listener = nil
        for c in clients.values { c.close("the proxy is stopping") }
    }

    private func accept() {
        while let s = listener?.accept() {
            let c = ProxyClient(stream: s, id: nextClient, proxy: self, key: config.key, name: config.name, mac: config.macAddress)
            nextClient += 1
            clients[c.id] = c
            log("proxy: \(s.peer): connected")
        }
    }

    func clientClosed(_ c: ProxyClient, _ why: String) {
        clients[c.id] = nil
        log("proxy: \(c.label): disconnected (\(why))\(c.links.isEmpty ? "" : "; dropping its \(c.links.count) Bluetooth link(s)")")
        for l in c.links.values { if let d = l.device { keeper.release(d) } }
        c.links.removeAll()
        connectionsChanged()
    }

    // MARK: messages

    func handle(_ m: any APIMessage, from c: ProxyClient) {
        switch m {
        case let m as HelloRequest:
            c.clientInfo = m.clientInfo.isEmpty ? "?" : m.clientInfo
            c.helloDone = true
            var r = HelloResponse()
            r.apiVersionMajor = ProxyConfig.apiVersion.major
            r.apiVersionMinor = ProxyConfig.apiVersion.minor
            r.serverInfo = "attled \(config.name)"
            r.name = config.name
            c.send(r)
            log("proxy: \(c.label): hello (API \(m.apiVersionMajor).\(m.apiVersionMinor))")
        case is ConnectRequest:
            c.send(ConnectResponse())  // no password: always accepted
        case is DisconnectRequest:
            c.send(DisconnectResponse())
            c.close("the client said goodbye")
        case is PingRequest:
            c.send(PingResponse())
        case is DeviceInfoRequest:
            c.send(deviceInfo())
        case is ListEntitiesRequest:
            c.send(ListEntitiesDoneResponse())  // a proxy has no entities
        case is GetTimeRequest:
            var r = GetTimeResponse()
            r.epochSeconds = UInt32(clamping: SystemIO.secondsSince1970())
            c.send(r)
        case let m as SubscribeBluetoothLEAdvertisementsRequest:
            c.wantsAdvertisements = true
            log("proxy: \(c.label): subscribed to advertisements (flags \(m.flags.rawValue))")
            keeper.start()
            c.send(scannerState())
        case let m as BluetoothScannerSetModeRequest:
            keeper.setActiveScan(m.mode == .active)
            let s = scannerState()
            for other in clients.values where other === c || other.wantsAdvertisements { other.send(s) }
        case is UnsubscribeBluetoothLEAdvertisementsRequest:
            c.wantsAdvertisements = false
        case is SubscribeBluetoothConnectionsFreeRequest:
            c.wantsConnectionsFree = true
            c.send(connectionsFree())
        case let m as BluetoothDeviceRequest:
            deviceRequest(m, from: c)
        case let m as BluetoothGATTGetServicesRequest:
            getServices(m.address, c)
        case let m as BluetoothGATTReadRequest:
            read(m.address, UInt16(truncatingIfNeeded: m.handle), c)
        case let m as BluetoothGATTReadDescriptorRequest:
            read(m.address, UInt16(truncatingIfNeeded: m.handle), c)
        case let m as BluetoothGATTWriteRequest:
            write(m.address, UInt16(truncatingIfNeeded: m.handle), m.data, response: m.response, c)
        case let m as BluetoothGATTWriteDescriptorRequest:
            write(m.address, UInt16(truncatingIfNeeded: m.handle), m.data, response: true, c)
        case let m as BluetoothGATTNotifyRequest:
            notify(m.address, UInt16(truncatingIfNeeded: m.handle), m.enable, c)
        default:
            break  // subscriptions that need no answer (states, services, Home Assistant states)
        }
    }

    /// What the node says it is: a Bluetooth proxy with active connections,
    /// remote caching (the client keeps the GATT cache, v3 connects), raw
    /// advertisements, pairing and cache clearing.
    func deviceInfo() -> DeviceInfoResponse {
        var r = DeviceInfoResponse()
        r.name = config.name
        r.friendlyName = config.friendlyName ?? config.name
        r.macAddress = ProxyConfig.text(config.macAddress)
        r.bluetoothMacAddress = ProxyConfig.text(config.bluetoothAddress)
        r.esphomeVersion = ProxyConfig.esphomeVersion
        r.model = "attled"
        r.manufacturer = "attled"
        r.compilationTime = ""
        r.bluetoothProxyFeatureFlags = [.passiveScan, .activeConnections, .remoteCaching, .pairing, .cacheClearing, .rawAdvertisements]
        r.apiEncryptionSupported = config.key != nil
        return r
    }

    // MARK: advertisements

    /// The scanner as the clients see it: running while someone is
    /// subscribed, in the keeper's mode; configured active (attled's default).
    func scannerState() -> BluetoothScannerStateResponse {
        BluetoothScannerStateResponse(state: clients.values.contains { $0.wantsAdvertisements } ? .running : .idle,
                                      mode: keeper.policy.activeScan ? .active : .passive, configuredMode: .active)
    }

    private func heard(_ a: HeardAdvertisement) {
        var adv = BluetoothLERawAdvertisement()
        adv.address = Self.apiAddress(a.address.address)
        adv.rssi = Int32(a.rssi)
        adv.addressType = Self.apiAddressType(a.address.type)
        adv.data = a.data
        for c in clients.values where c.wantsAdvertisements {
            c.batch.append(adv)
            if c.batch.count >= config.batchSize { flushAdvertisements(c) }
            else if c.batchTimer == nil {
                c.batchTimer = loop.schedule(afterMs: config.batchMs) { [weak self, weak c] in
                    guard let self, let c else { return }
                    c.batchTimer = nil
                    self.flushAdvertisements(c)
                }
            }
        }
    }

    func flushAdvertisements(_ c: ProxyClient) {
        if let t = c.batchTimer { loop.cancel(t) }
        c.batchTimer = nil
        guard !c.batch.isEmpty else { return }
        var r = BluetoothLERawAdvertisementsResponse()
        r.advertisements = c.batch
        c.batch.removeAll(keepingCapacity: true)
        c.send(r)
    }

    // MARK: addresses

    /// The API's address: the 48-bit BD_ADDR as a number (AA:BB:... is 0xAABB...).
    static func apiAddress(_ a: BDAddress) -> UInt64 {
        a.bytes.reversed().reduce(0) { $0 << 8 | UInt64($1) }
    }

    /// The BD_ADDR of an API address (its low 48 bits).
    static func bdAddress(_ v: UInt64) -> BDAddress {
        BDAddress(wire: (0..<6).map { UInt8(truncatingIfNeeded: v >> (8 * UInt64($0))) })
    }

    /// ESPHome's address type: 0 public, 1 random (identity types folded).
    static func apiAddressType(_ t: AddressType) -> UInt32 {
        t == .random || t == .randomIdentity ? 1 : 0
    }
}
