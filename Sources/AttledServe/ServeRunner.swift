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
        /// The link to a client is encrypted now.
        case encrypted(DeviceAddress)
    }
    public struct Subscription: Hashable, Sendable { let id: Int }
    private var subscribers: [(Subscription, (Event) -> Void)] = []
    private var nextID = 0
    private var sessions: [UInt16: GATTServerSession] = [:]
    private var advertiserSubscription: Central.Subscription?

    /// - Throws: `SMPCryptoError` when the Database Hash cannot be computed.
    public init(stack: BLEStack, config: ServeConfig) throws {
        self.stack = stack
        self.config = config
        server = try GATTServer(database: config.database)
        // Subscribed before the LED: a write is told before the change it makes.
        server.subscribe { [weak self] e in
            guard let self else { return }
            switch e {
            case let .write(s, w): self.emit(.write(s.peer, w))
            case let .subscribed(s, c, n, i): self.emit(.subscribed(s.peer, handle: c.valueHandle, notify: n, indicate: i))
            case .confirmed, .securityNeeded: break
            }
        }
        led = ServedLED(server: server)
        led?.onChange = { [weak self] s, peer in self?.emit(.state(s, by: peer)) }
    }

    @discardableResult
    public func subscribe(_ handler: @escaping (Event) -> Void) -> Subscription {
        nextID += 1
        let s = Subscription(id: nextID)
        subscribers.append((s, handler))
        return s
    }
    public func cancel(_ s: Subscription) { subscribers.removeAll { $0.0 == s } }
    private func emit(_ e: Event) { for (_, h) in subscribers { h(e) } }

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
        return adv.start(AdvertisingParameters(name: config.name, services: config.advertisedUUIDs, intervalMs: config.intervalMs, mode: config.mode))
    }

    /// A central connected: its link, its session of the server.
    private func connected(_ c: LEConnection) {
        let link = stack.attach(c)
        let peer = c.peer
        let security = link.security
        let session = server.attach(link.bearer, peer: peer, isEncrypted: { security.isEncrypted }, hasKeys: { false })
        sessions[c.handle] = session
        emit(.connected(peer))
        link.onDisconnect = { [weak self] reason in
            guard let self else { return }
            if let s = self.sessions.removeValue(forKey: c.handle) { self.server.detach(s) }
            self.emit(.disconnected(peer, reason: reason))
        }
    }

    /// Runs the loop until SIGINT/SIGTERM (`HCIError.interrupted`) or a controller failure.
    public func run() throws {
        _ = try stack.host.pump(until: .distantFuture) { false }
    }

    /// Stops advertising and unhooks (the links are closed by the stack's clean-up).
    public func end() {
        if let s = advertiserSubscription { stack.advertiser.cancel(s) }
        advertiserSubscription = nil
        _ = stack.advertiser.stop()
    }
}
