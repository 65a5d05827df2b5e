import BLEWire
import Attled
import BLEGATT
import BLEGATTServer
import LEDProfile

/// What `attled serve` is given: the database, what to advertise.
public struct ServeConfig: Sendable {
    public var database: GATTServerDatabase
    /// The advertised local name.
    public var name: String
    /// The service UUIDs to advertise (empty: the first primary service
    /// UUID of the database that is not GAP or GATT).
    public var advertiseUUIDs: [BluetoothUUID]
    /// Centrals connected at once (advertising goes on below that).
    public var maxConnections = 4
    /// Advertising interval.
    public var intervalMs: Double = 100
    /// nil: legacy advertising unless the central side uses the extended commands.
    public var mode: AdvertisingMode?
    /// Where clients' bonds and records are kept (nil: no pairing is kept).
    public var bonds: BondStore?
    /// Pairing: Secure Connections only, or legacy too (a client asking for legacy is refused with the former).
    public var secureConnectionsOnly = false
    /// The connection parameters asked of every central once it connected
    /// (an L2CAP Connection Parameter Update Request, Core Vol 3 Part A
    /// 4.20), as boards do that want a longer interval; nil: none asked.
    public var connectionParameters: ConnectionParameters?

    public init(database: GATTServerDatabase, name: String, advertiseUUIDs: [BluetoothUUID] = []) {
        self.database = database; self.name = name; self.advertiseUUIDs = advertiseUUIDs
    }

    /// What is advertised: the given UUIDs, or the first primary service that is not GAP or GATT.
    public var advertisedUUIDs: [BluetoothUUID] {
        if !advertiseUUIDs.isEmpty { return advertiseUUIDs }
        let standard: Set<BluetoothUUID> = [GATTUUID.gapService, GATTUUID.gattService]
        let first = database.attributes.first { $0.type == GATTUUID.primaryService && BluetoothUUID(wire: $0.value).map { !standard.contains($0) } == true }
        return first.flatMap { BluetoothUUID(wire: $0.value) }.map { [$0] } ?? []
    }
}

/// attled as the device: advertises, takes the centrals that connect, serves
/// them the database (one `GATTServer`, a session per client) and follows
/// the LED it holds. Events to any number of subscribers; runs on the
/// stack's event loop until a signal.
public final class ServeRunner {
    public let stack: BLEStack
    public let config: ServeConfig
    public let server: GATTServer
    /// The LED of the database, when it holds a known one.
    public private(set) var led: ServedLED?

    public enum Event {
        /// Advertising started (again), from our address.
        case advertising(name: String, uuids: [BluetoothUUID], address: DeviceAddress)
        /// The controller refused to advertise again (tried at the next disconnection).
        case advertisingRefused(any Error)
        case connected(DeviceAddress)
        case disconnected(DeviceAddress, reason: HCIStatus?)
        /// A client wrote a value.
        case write(DeviceAddress, GATTServer.Write)
        /// A client wrote a CCCD.
        case subscribed(DeviceAddress, handle: UInt16, notify: Bool, indicate: Bool)
        /// The LED changed.
        case state(ServedLED.State, by: DeviceAddress)
        /// The link to a client is encrypted now: with its bond, or with the key of the pairing under way.
        case encrypted(DeviceAddress, withBond: Bool)
        /// A client paired (Secure Connections or legacy; `bonded`: its keys are stored).
        case paired(DeviceAddress, secureConnections: Bool, bonded: Bool)
        /// Pairing or encryption failed.
        case securityFailed(DeviceAddress, String)
        /// A client whose subscriptions were kept came back: restored, and
        /// Service Changed indicated when the database changed since.
        case restored(DeviceAddress, subscriptions: Int, databaseChanged: Bool, serviceChangedSent: Bool)
        /// The central answered our Connection Parameter Update Request
        /// (`accepted`), or did not (`error`: no answer, Command Reject).
        case parametersAnswered(DeviceAddress, ConnectionParameters, accepted: Bool, error: String?)
        /// The connection's parameters changed (LE Connection Update Complete).
        case connectionUpdated(DeviceAddress, LEConnection)
    }
    public typealias Subscription = Subscribers<Event>.Token
    private var subscribers = Subscribers<Event>()
    private var sessions: [UInt16: GATTServerSession] = [:]
    private var securities: [UInt16: PeripheralSecurity] = [:]
    private var advertiserSubscription: Advertiser.Subscription?
    private var centralSubscription: Central.Subscription?

    /// - Throws: `SMPCryptoError` when the Database Hash cannot be computed.
    public init(stack: BLEStack, config: ServeConfig) throws {
        self.stack = stack
        self.config = config
        server = try GATTServer(database: config.database)
        // Bonded clients' subscriptions and last Database Hash, kept beside the bonds.
        server.bondedClients = config.bonds.map(ServedClientStore.init)
        // Subscribed before the LED: a write is told before the change it makes.
        server.subscribe { [weak self] e in
            guard let self else { return }
            switch e {
            case let .write(s, w): self.emit(.write(s.peer, w))
            case let .subscribed(s, c, n, i):
                self.emit(.subscribed(s.peer, handle: c.valueHandle, notify: n, indicate: i))
            case let .securityNeeded(s, _):
                // Ask the client to secure the link (it was answered Insufficient Authentication/Encryption).
                if let h = self.handle(of: s) { _ = self.securities[h]?.sendSecurityRequest() }
            case .confirmed: break
            }
        }
        led = ServedLED(server: server)
        led?.onChange = { [weak self] s, peer in self?.emit(.state(s, by: peer)) }
    }

    @discardableResult
    public func subscribe(_ handler: @escaping (Event) -> Void) -> Subscription { subscribers.add(handler) }
    public func cancel(_ s: Subscription) { subscribers.remove(s) }
    private func emit(_ e: Event) { subscribers.emit(e) }

    /// Starts advertising and taking connections.
    /// - Returns: a future that succeeds once the controller advertises.
    public func start() -> Future<Void> {
        let adv = stack.advertiser
        adv.maxConnections = config.maxConnections
        advertiserSubscription = adv.subscribe { [weak self] e in
            guard let self else { return }
            switch e {
            case let .connected(c): self.connected(c)
            case .disconnected: break  // the link's own end (Link.onDisconnect) detaches its session
            case .advertising: self.emit(.advertising(name: self.config.name, uuids: self.config.advertisedUUIDs, address: self.stack.info.ownAddress))
            case let .restartRefused(err): self.emit(.advertisingRefused(err))
            }
        }
        centralSubscription = stack.central.subscribe { [weak self] e in
            guard let self, case let .connectionUpdated(c) = e, self.sessions[c.handle] != nil else { return }
            self.emit(.connectionUpdated(c.peer, c))
        }
        return adv.start(AdvertisingParameters(name: config.name, services: config.advertisedUUIDs, intervalMs: config.intervalMs, mode: config.mode))
    }

    private func handle(of s: GATTServerSession) -> UInt16? { sessions.first { $0.value === s }?.key }

    /// A central connected: its link, its security (the SMP responder, the
    /// LTK requests), its session of the server.
    private func connected(_ c: LEConnection) {
        let link = stack.attach(c)
        let peer = c.peer
        let h = c.handle
        let ps = PeripheralSecurity.attach(to: link, store: config.bonds,
                                           options: PeripheralSecurityOptions(secureConnectionsOnly: config.secureConnectionsOnly))
        securities[h] = ps
        let session = server.attach(link.bearer, peer: peer, isEncrypted: { [weak ps] in ps?.isEncrypted ?? false },
                                    hasKeys: { [weak ps] in ps?.hasBond ?? false }, bondIdentity: { [weak ps] in ps?.bond?.identity })
        sessions[h] = session
        ps.onEvent = { [weak self] e in self?.security(e, h, peer) }
        emit(.connected(peer))
        if let p = config.connectionParameters {
            link.l2cap.requestConnectionParameters(p).whenComplete { [weak self] r in
                switch r {
                case let .success(ok): self?.emit(.parametersAnswered(peer, p, accepted: ok, error: nil))
                case let .failure(e): self?.emit(.parametersAnswered(peer, p, accepted: false, error: "\(e)"))
                }
            }
        }
        link.onDisconnect = { [weak self] reason in
            guard let self else { return }
            if let s = self.sessions.removeValue(forKey: h) { self.server.detach(s) }  // keeps a bonded client's state
            self.securities[h] = nil
            self.emit(.disconnected(peer, reason: reason))
        }
    }

    private func security(_ e: PeripheralSecurityEvent, _ h: UInt16, _ peer: DeviceAddress) {
        switch e {
        case let .paired(r, bond, _):
            emit(.paired(peer, secureConnections: r.secureConnections, bonded: bond != nil))
            sessions[h]?.keepBond()
        case let .encrypted(bond):
            sessions[h]?.encrypted()
            emit(.encrypted(peer, withBond: bond != nil))
            // A bonded client: the server gives it its subscriptions back (and Service Changed).
            if bond != nil, let r = sessions[h]?.restoreBond() {
                emit(.restored(peer, subscriptions: r.subscriptions, databaseChanged: r.databaseChanged, serviceChangedSent: r.serviceChangedSent))
            }
        case let .failed(f): emit(.securityFailed(peer, f.description))
        case let .encryptionFailed(st): emit(.securityFailed(peer, "encryption failed: \(st)"))
        }
    }

    /// Runs the loop until SIGINT/SIGTERM (`HCIError.interrupted`) or a controller failure.
    public func run() throws {
        _ = try stack.host.pump(until: .distantFuture) { false }
    }

    /// Stops advertising and unhooks (the links are closed by the stack's clean-up).
    public func end() {
        if let s = advertiserSubscription { stack.advertiser.cancel(s) }
        if let s = centralSubscription { stack.central.cancel(s) }
        advertiserSubscription = nil; centralSubscription = nil
        _ = stack.advertiser.stop()
    }
}
