import BLEWire
import BLEHCI

/// The GAP central role: scanning with host-side de-duplication and
/// advertisement/scan-response merging; a connection manager that queues
/// connection requests and runs them one at a time (a controller initiates
/// one connection at a time), each with a deadline followed by Create
/// Connection Cancel; disconnecting. Scanning may go on while connecting, so
/// one scan serves several targets.
public final class Central {
    /// The HCI layer this central drives.
    public let host: HCIHost
    /// What initialisation learnt about the controller.
    public let info: ControllerInfo
    /// Devices heard since the last `startScan`, by address.
    public internal(set) var devices: [DeviceAddress: DiscoveredDevice] = [:]
    /// Addresses in the order they were first heard.
    public internal(set) var order: [DeviceAddress] = []
    /// True between `startScan` and `stopScan`.
    public internal(set) var isScanning = false
    /// A scan being started (LE Set Scan Parameters sent, the enable not yet
    /// answered): a second start joins it instead of sending both commands again.
    public internal(set) var scanStarting: Future<Void>?
    /// Use the extended scan/connect commands (Core 5.0+) instead of the legacy ones.
    public var useExtendedCommands = false
    // MARK: subscriptions (the API is in Central+Events.swift)

    let subscribers = Subscribers<Event>()
    let adopters = Subscribers<Unrequested>()
    /// Takes connections made to us (Role 1): the Advertiser's; true when taken.
    var incoming: ((LEConnection) -> Bool)?

    /// What to ask for on each new connection, each only where the
    /// controller lists the command and the LE feature: the largest data
    /// length (LE Set Data Length, 251 octets) and the 2M PHY (LE Set PHY).
    /// Neither holds up ATT: the answers come as events. Default both.
    public var airRequests: AirRequests = [.dataLength, .phy2M]

    /// Asked of the controller on connect.
    public struct AirRequests: OptionSet, Sendable {
        public let rawValue: UInt8
        public init(rawValue: UInt8) { self.rawValue = rawValue }
        /// LE Set Data Length: 251 octets.
        public static let dataLength = AirRequests(rawValue: 1)
        /// LE Set PHY: 2M each way (the link layers settle on 1M if the peer lacks it).
        public static let phy2M = AirRequests(rawValue: 2)
    }

    /// LE Set PHY is answered by Command Status then LE PHY Update Complete;
    /// a controller that lists it but never answers holds the command queue
    /// only this long, once. (Bumble's virtual controller, company 0xFFFF, lists
    /// it and never answers: it is not asked.)
    public var phyCommandTimeoutMs = 500
    /// Requests this controller refused as unknown or never answered: not sent again.
    public private(set) var airGivenUp: AirRequests = []

    var fragments: [DeviceAddress: [UInt8]] = [:]
    /// Live connections by handle.
    public internal(set) var connections: [UInt16: LEConnection] = [:]
    private var tokens: [HostToken] = []

    /// - Parameters:
    ///   - host: an initialised host.
    ///   - info: what `HCIHost.initialise` returned.
    public init(host: HCIHost, info: ControllerInfo) {
        self.host = host
        self.info = info
        tokens.append(host.onEvent { [weak self] ev in self?.handle(ev) })
        tokens.append(host.onClose { [weak self] e in self?.hostClosed(e) })
    }

    /// Stops listening to the host and fails every connection attempt. Links stay up.
    public func close() {
        host.cancel(tokens)
        tokens.removeAll()
        for a in attempts { a.finish(.failure(GAPError.connectAborted(a.peer)), host) }
        attempts.removeAll()
    }

    // MARK: scanning (Central+Scanning.swift)

    var pendingChecks: [DeviceAddress] = []

    // MARK: connecting

    /// One queued or running connection attempt.
    final class Attempt {
        enum State { case queued, requesting, initiating, cancelling, done }
        let peer: DeviceAddress
        let timeoutMs: Int
        let parameters: ConnectionParameters
        /// Set for a connect from the Filter Accept List: these devices are
        /// written to the list first, and any of them may complete it.
        let acceptList: [DeviceAddress]?
        let future = Future<LEConnection>()
        var state = State.queued
        var timer: HostToken?

        init(peer: DeviceAddress, timeoutMs: Int, parameters: ConnectionParameters, acceptList: [DeviceAddress]? = nil) {
            self.peer = peer; self.timeoutMs = timeoutMs; self.parameters = parameters; self.acceptList = acceptList
        }

        func finish(_ r: Result<LEConnection, any Error>, _ host: HCIHost) {
            state = .done
            if let t = timer { host.cancel(t); timer = nil }
            future.complete(r)
        }
    }

    /// Attempts in order; the first is running unless it is `.queued`.
    private var attempts: [Attempt] = []

    /// How long to wait for the LE Connection Complete that a Create
    /// Connection Cancel causes, before giving the attempt up.
    public var cancelGraceMs = 500

    /// Peers whose attempt was given up while the controller may still hold it.
    public private(set) var abandoned: Set<DeviceAddress> = []

    /// A Create Connection the controller accepted and that has not yet
    /// completed or been cancelled.
    public var pendingConnect: DeviceAddress? {
        guard let a = attempts.first, a.state != .queued else { return nil }
        return a.peer
    }

    /// Queues a connection to `peer`. Attempts run one at a time in the order
    /// queued; each gets `timeoutMs` from when it starts, then LE Create
    /// Connection Cancel. Scanning may go on meanwhile.
    /// - Returns: a future of the connection; it fails with `GAPError`
    ///   (timeout, failed, aborted) or `HCIError` (the command was rejected).
    public func startConnect(to peer: DeviceAddress, timeoutMs: Int, parameters: ConnectionParameters = .oneShot) -> Future<LEConnection> {
        let a = Attempt(peer: peer, timeoutMs: timeoutMs, parameters: parameters)
        attempts.append(a)
        advance()
        return a.future
    }

    /// Queues a connect from the Filter Accept List (Core Vol 6 Part B 4.3.5):
    /// LE Clear Filter Accept List, LE Add Device To Filter Accept List for
    /// each of `peers`, then LE Create Connection with Initiator_Filter_Policy
    /// 1, so the controller connects to whichever of them it hears first. It
    /// stays pending until one connects, `timeoutMs` passes (0: no deadline)
    /// or `cancelAcceptListConnect` is called. Peer_Address, which the
    /// policy makes the controller ignore, names the first of `peers`: a
    /// controller that ignores the policy (Bumble's) still connects that one.
    /// - Returns: a future of the connection (its `peer` says which device).
    public func startAcceptListConnect(_ peers: [DeviceAddress], timeoutMs: Int = 0, parameters: ConnectionParameters = .oneShot) -> Future<LEConnection> {
        guard let first = peers.first else { return Future(error: GAPError.connectAborted(DeviceAddress(.zero, .public))) }
        let a = Attempt(peer: first, timeoutMs: timeoutMs, parameters: parameters, acceptList: peers)
        attempts.append(a)
        advance()
        return a.future
    }

    /// The devices of the running (or queued) accept-list connect, if any.
    public var acceptListConnect: [DeviceAddress]? {
        attempts.first(where: { $0.acceptList != nil && $0.state != .done })?.acceptList
    }

    /// Ends the accept-list connect (LE Create Connection Cancel when it is
    /// running); its future fails with `GAPError.connectAborted`, or succeeds
    /// if a connection won the race.
    public func cancelAcceptListConnect() {
        guard let a = attempts.first(where: { $0.acceptList != nil && $0.state != .done }) else { return }
        if a.state == .queued {
            attempts.removeAll { $0 === a }
            a.finish(.failure(GAPError.connectAborted(a.peer)), host)
        } else {
            cancel(a, failure: GAPError.connectAborted(a.peer))
        }
    }

    /// Connects to `peer`, waiting for the outcome. On Ctrl-C/SIGTERM the
    /// attempt is cancelled (and a connection that won the race dropped).
    /// - Returns: the connection.
    /// - Throws: `GAPError.connectTimeout` after `timeoutMs` (the attempt
    ///   cancelled; `connectCancelUnconfirmed` when the controller acknowledged
    ///   the cancel but never ended the attempt), `GAPError.connectFailed`, `HCIError`.
    public func connect(to peer: DeviceAddress, timeoutMs: Int, parameters: ConnectionParameters = .oneShot) throws -> LEConnection {
        let f = startConnect(to: peer, timeoutMs: timeoutMs, parameters: parameters)
        do {
            return try host.wait(f)
        } catch HCIError.interrupted(let sig) {
            let wasInterruptible = host.interruptible
            host.interruptible = false
            defer { host.interruptible = wasInterruptible }
            abortConnects(timeoutMs: 300)
            throw HCIError.interrupted(signal: sig)
        }
    }

    private func advance() {
        guard let a = attempts.first, a.state == .queued else { return }
        a.state = .requesting
        let req = LECreateConnection(peer: a.peer, ownAddressType: info.ownAddress.type, scanInterval: 0x0010, scanWindow: 0x0010,
                                     filterPolicy: a.acceptList == nil ? 0 : 1, connection: a.parameters)
        let start = Instant.now()
        abandoned.remove(a.peer)
        let cmd = useExtendedCommands ? req.extendedCommand : req.command
        let create = { [weak self] in
            guard let self, a.state == .requesting else { return }
            self.host.enqueue(cmd) { [weak self] r in
                guard let self, a.state == .requesting else { return }
                switch HCIHost.returnParameters(cmd, r) {
                case .failure(let e):
                    self.remove(a, .failure(e))
                case .success:
                    a.state = .initiating
                    if a.timeoutMs > 0 {
                        a.timer = self.host.schedule(at: start.adding(ms: a.timeoutMs)) { [weak self] in self?.cancel(a) }
                    }
                }
            }
        }
        guard let list = a.acceptList else { return create() }
        // The list may not change while a connect uses it (7.8.16): none is
        // running now, attempts go one at a time.
        let commands: [HCICommand] = [HCI.LEClearFilterAcceptList().command] + list.map { HCI.LEAddDeviceToFilterAcceptList(device: $0).command }
        var left = commands.count
        for c in commands {
            host.enqueue(c) { [weak self] r in
                guard let self, a.state == .requesting else { return }
                if case .failure(let e) = HCIHost.returnParameters(c, r) { return self.remove(a, .failure(e)) }
                left -= 1
                if left == 0 { create() }
            }
        }
    }

    func askForAirParameters(_ c: LEConnection) {
        var asked: [String] = []
        if airRequests.contains(.dataLength), info.supportsDataLength, !airGivenUp.contains(.dataLength) {
            asked.append("data length 251")
            host.enqueue(HCI.LESetDataLength(handle: c.handle).command) { [weak self] r in
                // Refused: 27 octets stay. Unknown HCI Command (a controller that
                // lists what it does not do, as Bumble's): not asked again.
                if case let .failure(HCIError.commandFailed(_, st)) = HCIHost.returnParameters(HCI.LESetDataLength(handle: c.handle).command, r),
                   st == .unknownCommand { self?.airGivenUp.insert(.dataLength) }
            }
        }
        if airRequests.contains(.phy2M), info.supports2MPHY, !airGivenUp.contains(.phy2M), info.version?.manufacturer != 0xFFFF {
            asked.append("2M PHY")
            host.enqueue(HCI.LESetPHY(handle: c.handle).command, timeoutMs: phyCommandTimeoutMs) { [weak self] r in
                // Refused or unanswered: 1M stays; unanswered or unknown: not asked again.
                switch r {
                case .failure(.commandTimeout): self?.airGivenUp.insert(.phy2M)
                case .success(.status(let cs)) where cs.status == .unknownCommand: self?.airGivenUp.insert(.phy2M)
                case .success(.complete(let cc)) where cc.status == .unknownCommand: self?.airGivenUp.insert(.phy2M)
                default: break
                }
            }
        }
        c.airRequest = asked.isEmpty ? nil : asked.joined(separator: ", ")
    }

    private func remove(_ a: Attempt, _ r: Result<LEConnection, any Error>) {
        attempts.removeAll { $0 === a }
        a.finish(r, host)
        advance()
    }

    /// Sends LE Create Connection Cancel for the running attempt; the LE
    /// Connection Complete it causes (Unknown Connection Identifier) ends the
    /// attempt, or a connection that won the race completes it. With no answer
    /// within `cancelGraceMs` the attempt is given up (`abandoned`).
    private func cancel(_ a: Attempt, failure: (any Error)? = nil) {
        guard a.state == .initiating || a.state == .requesting else { return }
        if let t = a.timer { host.cancel(t) }
        let why = failure ?? GAPError.connectTimeout(a.peer, ms: a.timeoutMs)
        a.state = .cancelling
        host.enqueue(HCI.LECreateConnectionCancel().command, timeoutMs: cancelGraceMs) { _ in }
        a.timer = host.schedule(afterMs: cancelGraceMs) { [weak self] in
            guard let self, a.state == .cancelling else { return }
            self.abandoned.insert(a.peer)
            // A deadline whose cancel the controller never completed: say so.
            if case let GAPError.connectTimeout(p, ms) = why {
                self.remove(a, .failure(GAPError.connectCancelUnconfirmed(p, ms: ms)))
            } else {
                self.remove(a, .failure(why))
            }
        }
        cancelReasons[ObjectIdentifier(a)] = why
    }
    private var cancelReasons: [ObjectIdentifier: any Error] = [:]

    /// Cancels every attempt: queued ones fail at once, the running one is
    /// cancelled and waited for (bounded by `timeoutMs`); a connection that
    /// completed meanwhile is kept in `connections` for the caller to drop.
    /// Pumps; for clean-up and interruption.
    public func abortConnects(timeoutMs: Int = 500) {
        for a in attempts where a.state == .queued { a.finish(.failure(GAPError.connectAborted(a.peer)), host) }
        attempts.removeAll { $0.state == .done }
        guard let a = attempts.first else { return }
        cancel(a, failure: GAPError.connectAborted(a.peer))
        _ = try? host.pump(until: Instant.now().adding(ms: timeoutMs)) { a.state == .done }
        if a.state != .done {
            abandoned.insert(a.peer)
            remove(a, .failure(GAPError.connectAborted(a.peer)))
        }
    }

    /// Cancels a connect left pending (clean-up after a failure). Bounded.
    public func abandonPendingConnect(timeoutMs: Int = 500) {
        abortConnects(timeoutMs: timeoutMs)
    }

    // MARK: disconnecting

    /// Sends Disconnect.
    /// - Returns: a future that succeeds at Disconnection Complete, or fails
    ///   when the controller rejects the command.
    public func startDisconnect(_ c: LEConnection, reason: HCIStatus = .remoteUserTerminated) -> Future<Void> {
        guard c.isConnected else { return .done }
        let f = Future<Void>()
        c.whenDisconnected.append { f.succeed(()) }
        host.submit(HCI.Disconnect(handle: c.handle, reason: reason).command).whenFailure { f.fail($0) }
        return f
    }

    /// Sends Disconnect and waits (bounded) for Disconnection Complete.
    /// - Throws: `HCIError` when the controller rejects Disconnect or the host fails.
    public func disconnect(_ c: LEConnection, reason: HCIStatus = .remoteUserTerminated, timeoutMs: Int = 1000) throws {
        guard c.isConnected else { return }
        let f = startDisconnect(c, reason: reason)
        _ = try host.pump(until: Instant.now().adding(ms: timeoutMs)) { f.isComplete || !c.isConnected }
        if case let .failure(e)? = f.result { throw e }
    }

    private func hostClosed(_ e: HCIError) {
        let all = attempts
        attempts.removeAll()
        for a in all { a.finish(.failure(e), host) }
    }

    private func handle(_ ev: HCIEvent) {
        switch ev {
        case let .leAdvertisingReport(reports, _):
            guard isScanning else { return }
            for r in reports { ingest(r) }
        case .leConnectionComplete(let cc) where cc.status == .success && cc.role == .peripheral:
            incomingConnection(cc) // we advertised: not any attempt's (Central+Events.swift)
        case .leConnectionComplete(let cc):
            var conn: LEConnection? = nil
            if cc.status == .success {
                let c = LEConnection(cc)
                connections[cc.handle] = c
                conn = c
                askForAirParameters(c)
            }
            if let a = attempts.first, a.state != .queued, a.state != .done {
                if let c = conn {
                    remove(a, .success(c))
                } else {
                    let why = a.state == .cancelling ? (cancelReasons[ObjectIdentifier(a)] ?? GAPError.connectTimeout(a.peer, ms: a.timeoutMs))
                                                     : GAPError.connectFailed(a.peer, cc.status)
                    remove(a, .failure(why))
                }
                cancelReasons[ObjectIdentifier(a)] = nil
            } else if let c = conn {
                // Nobody is connecting: the late completion of an attempt given up.
                abandoned.remove(c.peer)
                if let i = attempts.firstIndex(where: { $0.state == .queued && $0.peer.address == c.peer.address }) {
                    let a = attempts.remove(at: i)
                    a.finish(.success(c), host)
                } else if !offerToAdopters(c) {
                    host.enqueue(HCI.Disconnect(handle: c.handle, reason: .remoteUserTerminated).command) { _ in }
                }
            }
        case .leConnectionUpdateComplete(let u):
            if u.status == .success, let c = connections[u.handle] {
                c.interval = u.interval; c.latency = u.latency; c.supervisionTimeout = u.supervisionTimeout
                publish(.connectionUpdated(c))
            }
        case .leDataLengthChange(let d):
            if let c = connections[d.handle] {
                c.txOctets = d.maxTxOctets; c.rxOctets = d.maxRxOctets
                c.onAirChange?()
            }
        case let .leMeta(sub, p) where sub == .phyUpdateComplete:
            if let u = try? LEPHYUpdateComplete.decode(p), u.status == .success, let c = connections[u.handle] {
                c.txPHY = u.txPHY; c.rxPHY = u.rxPHY
                c.onAirChange?()
            }
        case .disconnectionComplete(let d):
            if d.status == .success, let c = connections.removeValue(forKey: d.handle) {
                c.isConnected = false
                c.disconnectReason = d.reason
                let ws = c.whenDisconnected
                c.whenDisconnected.removeAll()
                for w in ws { w() }
                publish(.disconnected(c))
            }
        default:
            break
        }
    }
}
