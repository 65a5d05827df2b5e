@_exported import BLEWire
@_exported import BLETransport
@_exported import BLEHCI
@_exported import BLEGAP
@_exported import BLEL2CAP
@_exported import BLEATT
@_exported import BLEGATT
@_exported import BLESMP
@_exported import AttledJSON

/// The attled stack in a few lines: open a controller, scan, connect, and
/// get a GATT client for each link (the LED lamps' conveniences are in
/// `AttledLED`):
///
///     let stack = try BLEStack.open("tcp:127.0.0.1:9000")
///     defer { stack.close() }
///     let lamp = try stack.find(.name("CassarTech"), timeoutMs: 5000)
///     let link = try stack.connect(to: lamp.address)
///     try link.gatt.write(0x0010, value: [0xFF], withResponse: true)
///
/// Single-threaded: one event loop (`host.loop`, driven by the host) serves every link. Each
/// blocking call runs that loop until its own operation completes, so other
/// links keep making progress meanwhile; the `start...` forms return a
/// `Future` instead, for driving several links at once.
public final class BLEStack {
    /// The controller transport.
    public let transport: HCITransport
    /// The HCI layer (event loop, commands, ACL flow control).
    public let host: HCIHost
    /// What initialisation learnt about the controller.
    public let info: ControllerInfo
    /// The GAP central role: scanning and the connection manager.
    public let central: Central
    /// The GAP peripheral role: advertising, and the connections made to us
    /// (`advertiser.onConnection { stack.attach($0) ... }`).
    public let advertiser: Advertiser
    /// Our identity for this controller (nil: none kept).
    public let identity: ControllerIdentity?
    /// The bonds of that identity (nil: none kept).
    public var bonds: BondStore? { identity?.bonds }
    /// Live links made through this stack, by connection handle.
    public private(set) var links: [UInt16: Link] = [:]
    private var closed = false

    /// Opens a transport and initialises the controller.
    /// - Parameters:
    ///   - spec: `hci0`, `serial:/dev/ttyACM0[,115200][,rtscts]`, `tcp:HOST:PORT` or `unix:/path`.
    ///   - loop: the event loop to run on (default: one of the stack's own;
    ///     `loop.watchSignals()` makes SIGINT/SIGTERM end blocking calls).
    ///   - observers: packet taps (a tracer, a btsnoop writer).
    /// - Returns: a ready stack.
    /// - Throws: `TransportError` (cannot open), `HCIError` (initialisation failed).
    public static func open(_ spec: String, loop: EventLoop = EventLoop(), observers: [PacketObserver] = [],
                            ownAddress: BDAddress? = nil, identity: ControllerIdentity? = nil) throws -> BLEStack {
        let t = try TransportSpec.parse(spec).open()
        do {
            return try BLEStack(transport: t, loop: loop, observers: observers, ownAddress: ownAddress, identity: identity)
        } catch {
            t.close()
            throw error
        }
    }

    /// Initialises the controller behind an open transport (HCI Reset and the
    /// init sequence; a static random address when it has no public one).
    /// - Parameters:
    ///   - ownAddress: a static random address to use whatever the controller has.
    ///   - identity: our identity for this controller (`Identities`): where our
    ///     own static random address is kept across runs (for a controller with
    ///     neither a public nor a static address of its own), the bonds made
    ///     with it and its remembered description; nil: a new address for every
    ///     run, which bonded devices will not recognise, and every description read.
    ///   - others: see `open`.
    /// - Throws: `HCIError`.
    public init(transport: HCITransport, loop: EventLoop = EventLoop(), observers: [PacketObserver] = [],
                ownAddress: BDAddress? = nil, identity: ControllerIdentity? = nil) throws {
        self.transport = transport
        self.identity = identity
        let h = HCIHost(transport: transport, loop: loop)
        h.observers = observers
        host = h
        info = try h.initialise(randomAddress: ownAddress, memory: identity)
        central = Central(host: h, info: info)
        advertiser = Advertiser(central: central)
    }

    // MARK: finding

    /// Scans until a device matching `filter` is heard.
    /// - Parameters:
    ///   - filter: what to look for.
    ///   - timeoutMs: how long to scan.
    ///   - active: active scanning (scan requests) or passive.
    /// - Returns: the device, advertisement and scan response merged.
    /// - Throws: `StackError.notFound` after `timeoutMs`; `HCIError`.
    public func find(_ filter: DeviceFilter, timeoutMs: Int, active: Bool = true) throws -> DiscoveredDevice {
        try central.startScan(active: active)
        let found: DiscoveredDevice?
        do {
            found = try central.waitForDevice(until: Instant.now().adding(ms: timeoutMs)) { filter.matches($0) }
        } catch {
            try? central.stopScan()
            throw error
        }
        try central.stopScan()
        guard let d = found else { throw StackError.notFound(filter, heard: central.devices.count, ms: timeoutMs) }
        return d
    }

    // MARK: connecting

    /// Queues a connection (attempts run one at a time) and builds the link's
    /// L2CAP, ATT bearer and GATT client when it completes.
    /// - Returns: a future of the link; it fails with `GAPError` or `HCIError`.
    public func startConnect(to address: DeviceAddress, timeoutMs: Int = 5000, parameters: ConnectionParameters = .oneShot) -> Future<Link> {
        central.startConnect(to: address, timeoutMs: timeoutMs, parameters: parameters).map { [unowned self] c in self.attach(c) }
    }

    /// Connects and waits.
    /// - Returns: the link.
    /// - Throws: `GAPError.connectTimeout` (cancelled after `timeoutMs`;
    ///   `connectCancelUnconfirmed` when the controller never ended the attempt),
    ///   `GAPError.connectFailed`, `HCIError`.
    public func connect(to address: DeviceAddress, timeoutMs: Int = 5000, parameters: ConnectionParameters = .oneShot) throws -> Link {
        attach(try central.connect(to: address, timeoutMs: timeoutMs, parameters: parameters))
    }

    /// Wraps an existing connection in a `Link` (once per connection): one
    /// the Central made, or one made to us (`advertiser.onConnection`).
    /// - Returns: the link for `connection`.
    public func attach(_ connection: LEConnection) -> Link {
        if let l = links[connection.handle], l.connection === connection { return l }
        let l = Link(stack: self, connection: connection)
        links[connection.handle] = l
        return l
    }

    func forget(_ link: Link) {
        if links[link.connection.handle] === link { links[link.connection.handle] = nil }
    }

    // MARK: closing

    /// Stops advertising and scanning, cancels connection attempts, disconnects every link
    /// (reason 0x13, each wait bounded), resets a controller that reported a
    /// Hardware Error (so nothing is left behind), closes the host and the
    /// transport. Never throws. Idempotent.
    /// - Parameters:
    ///   - commandTimeoutMs: the bound on each command from now on (a
    ///     controller that stopped answering costs this much per command).
    ///   - warning: told what could not be undone (a link that may still be up).
    public func close(commandTimeoutMs: Int = 1000, warning: ((String) -> Void)? = nil) {
        guard !closed else { return }
        closed = true
        host.interruptible = false
        host.commandTimeoutMs = commandTimeoutMs
        var hardwareError = false
        if case .hardwareError? = host.failure { hardwareError = true }
        if host.recoverForCleanup() {
            if advertiser.isActive {
                do { try advertiser.stopAdvertising(timeoutMs: commandTimeoutMs * 2) } catch { warning?("could not stop advertising: \(error)") }
            }
            if central.isScanning {
                do { try central.stopScan() } catch { warning?("could not stop scanning: \(error)") }
            }
            central.abortConnects()
            // Every link, including one that completed during a failure.
            for c in central.connections.values.sorted(by: { $0.handle < $1.handle }) where c.isConnected {
                let h = "handle 0x\(Hex.int(c.handle, width: 4))"
                do {
                    try central.disconnect(c, reason: .remoteUserTerminated, timeoutMs: 1000)
                    if c.isConnected { warning?("no Disconnection Complete for \(h) within 1000 ms: the link may still be up") }
                } catch {
                    warning?("Disconnect of \(h) failed: \(error)")
                }
            }
            if hardwareError { _ = try? host.execute(HCI.Reset().command, timeoutMs: 1000) }
        }
        host.close()
        transport.close()
    }
}

/// One connection with its L2CAP channels, ATT bearer and GATT client.
/// An ATT transaction timeout makes the bearer unusable (Core Vol 3 Part F
/// 3.3.3), so the link then disconnects itself.
public final class Link {
    /// The stack this link belongs to.
    public unowned let stack: BLEStack
    /// GAP's view: handle, peer, interval, state.
    public let connection: LEConnection
    /// L2CAP on this connection.
    public let l2cap: L2CAPLink
    /// The ATT bearer.
    public let bearer: ATTBearer
    /// The GATT client.
    public let gatt: GATTClient
    /// Pairing and encryption (the Security Manager, as central).
    public let security: LinkSecurity
    /// The Security Manager as peripheral, once `PeripheralSecurity.attach`
    /// has taken SMP over (an incoming connection, `attled serve`).
    public internal(set) var peripheralSecurity: PeripheralSecurity?
    /// Called once when the link goes down, with the reason (nil: closed locally).
    public var onDisconnect: ((HCIStatus?) -> Void)?

    init(stack: BLEStack, connection: LEConnection) {
        self.stack = stack
        self.connection = connection
        l2cap = L2CAPLink(host: stack.host, handle: connection.handle, ownsDisconnection: false, peripheral: connection.role == .peripheral)
        bearer = ATTBearer(link: l2cap, ownsDisconnection: false)
        gatt = GATTClient(bearer: bearer)
        security = LinkSecurity(host: stack.host, l2cap: l2cap, initiator: stack.info.ownAddress, responder: connection.peer)
        // The one owner of the connection's life: its end is seen once, here,
        // and passed down in a fixed order (as Zephyr's conn.c does).
        connection.whenEnded { [weak self] reason in self?.ended(reason) }
        // The host failing (transport lost, closed) ends the link too.
        l2cap.onClose = { [weak self] reason in self?.ended(reason) }
        bearer.onTimeout = { [weak self] _ in
            guard let self, self.connection.isConnected else { return }
            _ = self.stack.central.startDisconnect(self.connection)
        }
    }

    private var hasEnded = false

    /// The connection ended (`reason`; nil: the host closed): the Security
    /// Manager first (pairing and encryption waits fail), then the ATT bearer
    /// (its outstanding and queued requests fail once), then L2CAP (no more
    /// PDUs), then the owner: the stack forgets the link and `onDisconnect`
    /// runs. The Central's subscribers hear of it after all of these.
    private func ended(_ reason: HCIStatus?) {
        guard !hasEnded else { return }
        hasEnded = true
        security.linkClosed()
        peripheralSecurity?.linkClosed()
        bearer.close(.disconnected(reason: reason))
        l2cap.close(reason: reason)
        stack.forget(self)
        onDisconnect?(reason)
    }

    /// True until Disconnection Complete.
    public var isConnected: Bool { connection.isConnected }
    /// The peer's address.
    public var peer: DeviceAddress { connection.peer }

    /// Sends Disconnect (reason 0x13).
    /// - Returns: a future that succeeds at Disconnection Complete.
    public func startDisconnect() -> Future<Void> { stack.central.startDisconnect(connection) }

    /// Disconnects and waits (at most `timeoutMs`).
    /// - Throws: `HCIError` when the controller rejects Disconnect.
    public func disconnect(timeoutMs: Int = 1000) throws {
        try stack.central.disconnect(connection, timeoutMs: timeoutMs)
    }
}

/// What a scan looks for.
public enum DeviceFilter: Sendable, CustomStringConvertible {
    /// A complete local name equal to this, or a shortened name it starts with.
    case name(String)
    /// This address (any address type).
    case address(BDAddress)
    /// A device listing this service UUID in its advertising data.
    case service(BluetoothUUID)
    /// A device advertising any of these service UUIDs; `label` says what
    /// they are in messages ("a known LED service").
    case anyService([BluetoothUUID], label: String)
    /// All of these.
    indirect case all([DeviceFilter])

    /// Whether `d` is what this filter describes.
    /// - Returns: true on a match.
    public func matches(_ d: DiscoveredDevice) -> Bool {
        switch self {
        case .name(let n):
            for s in d.merged.structures {
                if case let .localName(adv, complete) = s.field {
                    if complete ? adv == n : (!adv.isEmpty && n.hasPrefix(adv)) { return true }
                }
            }
            return false
        case .address(let a): return d.address.address == a
        case .service(let u): return d.serviceUUIDs.contains(u)
        case .anyService(let wanted, _):
            return d.serviceUUIDs.contains { wanted.contains($0) }
        case .all(let fs): return fs.allSatisfy { $0.matches(d) }
        }
    }

    public var description: String {
        switch self {
        case .name(let n): return "named '\(n)'"
        case .address(let a): return "at \(a)"
        case .service(let u): return "advertising service \(u)"
        case .anyService(_, let label): return "advertising \(label)"
        case .all(let fs): return fs.map(\.description).joined(separator: " and ")
        }
    }
}

/// Failures of the facade itself (the layers' own errors pass through unchanged).
public enum StackError: Error, Sendable, CustomStringConvertible {
    /// No device matched within the scan time.
    case notFound(DeviceFilter, heard: Int, ms: Int)

    public var description: String {
        switch self {
        case let .notFound(f, heard, ms):
            return "no device \(f) found within \(ms) ms (\(heard) other device(s) heard): check that it is powered, advertising and in range"
        }
    }
}
