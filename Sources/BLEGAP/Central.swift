import BLEWire
import BLEHCI

/// A device heard while scanning: advertisement and scan response merged.
public struct DiscoveredDevice: Sendable {
    public var address: DeviceAddress
    public var rssi: Int8
    public var connectable: Bool
    /// Latest advertising data (ADV_IND / extended advertisement).
    public var advertisement: AdvertisingData
    /// Latest scan response data, if any.
    public var scanResponse: AdvertisingData?
    /// The raw bytes behind `advertisement` and `scanResponse`: a report that
    /// repeats them is recognised without parsing it again.
    public var advertisementBytes: [UInt8] = []
    public var scanResponseBytes: [UInt8]? = nil
    public var firstSeen: Instant
    public var lastSeen: Instant
    public var reports: Int

    /// All structures, advertisement first.
    public var merged: AdvertisingData {
        var d = advertisement
        if let s = scanResponse {
            d.structures += s.structures
            d.problems += s.problems
        }
        return d
    }

    public var name: String? { merged.localName }
    public var serviceUUIDs: [BluetoothUUID] { merged.serviceUUIDs }
}

/// Failures of scanning and connecting.
public enum GAPError: Error, Equatable, Sendable, CustomStringConvertible {
    /// No connection within the deadline (the attempt was cancelled).
    case connectTimeout(DeviceAddress, ms: Int)
    /// LE Connection Complete reported a failure.
    case connectFailed(DeviceAddress, HCIStatus)
    /// The attempt was abandoned (`Central.abortConnects`, or the central closed) before it completed.
    case connectAborted(DeviceAddress)
    /// No connection within the deadline, and the controller acknowledged LE Create
    /// Connection Cancel without ending the attempt (no LE Connection Complete):
    /// it may still connect later, and refuse other connects until then.
    case connectCancelUnconfirmed(DeviceAddress, ms: Int)

    public var description: String {
        switch self {
        case let .connectTimeout(a, ms):
            return "could not connect to \(a) within \(ms) ms: the device is out of range, not advertising as connectable, or already connected to another central"
        case let .connectFailed(a, st):
            return "connection to \(a) failed: \(st)"
        case let .connectAborted(a):
            return "the connection attempt to \(a) was abandoned"
        case let .connectCancelUnconfirmed(a, ms):
            return "could not connect to \(a) within \(ms) ms, and the controller acknowledged LE Create Connection Cancel "
                + "but never ended the attempt (no LE Connection Complete): it may still connect when the device advertises, "
                + "and refuse other connections until then (stock Bumble controllers do this; HCI Reset ends it on one that follows the specification)"
        }
    }
}

/// A live LE connection as GAP sees it.
public final class LEConnection {
    public let handle: UInt16
    public let peer: DeviceAddress
    public let role: UInt8
    /// 1.25 ms units.
    public internal(set) var interval: UInt16
    public internal(set) var latency: UInt16
    /// 10 ms units.
    public internal(set) var supervisionTimeout: UInt16
    public internal(set) var isConnected = true
    public internal(set) var disconnectReason: HCIStatus?
    public let connectedAt: Instant
    /// LL payload octets each way (27 until an LE Data Length Change says more).
    public internal(set) var txOctets: UInt16 = 27
    public internal(set) var rxOctets: UInt16 = 27
    /// PHYs each way (1: 1M, 2: 2M, 3: Coded), from LE PHY Update Complete.
    public internal(set) var txPHY: UInt8 = 1
    public internal(set) var rxPHY: UInt8 = 1
    /// What was asked of the controller at connect ("data length 251, 2M PHY"), nil when nothing.
    public internal(set) var airRequest: String?
    /// Called when the data length or the PHY changed.
    public var onAirChange: (() -> Void)?
    /// Run once at Disconnection Complete.
    var whenDisconnected: [() -> Void] = []

    /// Runs `handler` once when the connection ends, with the reason, before
    /// the Central's subscribers hear of it: the connection's owner (the
    /// facade's `Link`) tears its layers down here, in its own order.
    public func whenEnded(_ handler: @escaping (HCIStatus?) -> Void) {
        whenDisconnected.append { [unowned self] in handler(self.disconnectReason) }
    }

    init(_ cc: LEConnectionComplete) {
        handle = cc.handle; peer = cc.peer; role = cc.role
        interval = cc.interval; latency = cc.latency; supervisionTimeout = cc.supervisionTimeout
        connectedAt = Instant.now()
    }

    /// Connection interval in microseconds.
    public var intervalMicroseconds: UInt64 { UInt64(interval) * 1250 }

    /// ", asking data length 251, 2M PHY" for the connect line; "" when nothing was asked.
    public var airRequestSuffix: String { airRequest.map { ", asking \($0)" } ?? "" }
    /// "data length 251/251 octets, PHY 2M/2M" (TX/RX) as the link has them now.
    public var airDescription: String {
        let phy = txPHY == rxPHY ? LEPHYUpdateComplete.name(txPHY) : "\(LEPHYUpdateComplete.name(txPHY))/\(LEPHYUpdateComplete.name(rxPHY))"
        let len = txOctets == rxOctets ? "\(txOctets)" : "\(txOctets)/\(rxOctets)"
        return "data length \(len) octets, PHY \(phy)"
    }
}

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
    public private(set) var devices: [DeviceAddress: DiscoveredDevice] = [:]
    /// Addresses in the order they were first heard.
    public private(set) var order: [DeviceAddress] = []
    /// True between `startScan` and `stopScan`.
    public private(set) var isScanning = false
    /// Use the extended scan/connect commands (Core 5.0+) instead of the legacy ones.
    public var useExtendedCommands = false
    // MARK: subscriptions (any number of subscribers, each with a token)

    /// What the Central tells its subscribers.
    public enum Event {
        /// A device first heard (`isNew`) or whose merged data changed.
        case deviceUpdated(DiscoveredDevice, isNew: Bool)
        /// Every report of a device, after `deviceUpdated` when the data
        /// changed (a long-lived owner, such as the gateway, waits for a known
        /// device to be heard again).
        case deviceSeen(DiscoveredDevice)
        /// An advertising report whose data was malformed (address, problems).
        case malformedAdvertisement(DeviceAddress, [String])
        /// A connection ended (after `connections` forgot it).
        case disconnected(LEConnection)
    }

    /// One subscription; pass it to `cancel(_:)`.
    public struct Subscription: Hashable, Sendable { let id: UInt64 }

    private var nextSubscription: UInt64 = 1
    private var subscribers: [(Subscription, (Event) -> Void)] = []
    private var adopters: [(Subscription, (LEConnection) -> Bool)] = []

    private func subscription() -> Subscription {
        defer { nextSubscription += 1 }
        return Subscription(id: nextSubscription)
    }

    /// Calls `handler` with every event, in subscription order, until cancelled.
    @discardableResult
    public func subscribe(_ handler: @escaping (Event) -> Void) -> Subscription {
        let t = subscription(); subscribers.append((t, handler)); return t
    }

    /// Offers `handler` every connection that completed with no attempt
    /// waiting for it (for example one that completed after its attempt was
    /// cancelled and given up): the first adopter that returns true keeps
    /// it; when none does, it is disconnected.
    @discardableResult
    public func adoptUnrequested(_ handler: @escaping (LEConnection) -> Bool) -> Subscription {
        let t = subscription(); adopters.append((t, handler)); return t
    }

    /// Ends a subscription or an adopter; an unknown token is ignored.
    public func cancel(_ t: Subscription) {
        subscribers.removeAll { $0.0 == t }
        adopters.removeAll { $0.0 == t }
    }

    /// Live subscriptions and adopters, for leak checks in tests.
    public var subscriptionCount: Int { subscribers.count + adopters.count }

    private func publish(_ e: Event) {
        for (_, h) in subscribers { h(e) }
    }

    /// Subscribes to device updates only (first heard, data changed).
    @discardableResult
    public func onDeviceUpdate(_ handler: @escaping (DiscoveredDevice, _ isNew: Bool) -> Void) -> Subscription {
        subscribe { if case let .deviceUpdated(d, isNew) = $0 { handler(d, isNew) } }
    }

    /// Subscribes to every report of a device.
    @discardableResult
    public func onDeviceSeen(_ handler: @escaping (DiscoveredDevice) -> Void) -> Subscription {
        subscribe { if case let .deviceSeen(d) = $0 { handler(d) } }
    }

    /// Subscribes to malformed advertising data.
    @discardableResult
    public func onMalformedAdvertisement(_ handler: @escaping (DeviceAddress, [String]) -> Void) -> Subscription {
        subscribe { if case let .malformedAdvertisement(a, p) = $0 { handler(a, p) } }
    }

    /// Subscribes to connections ending.
    @discardableResult
    public func onDisconnection(_ handler: @escaping (LEConnection) -> Void) -> Subscription {
        subscribe { if case let .disconnected(c) = $0 { handler(c) } }
    }

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

    private var fragments: [DeviceAddress: [UInt8]] = [:]
    /// Live connections by handle.
    public private(set) var connections: [UInt16: LEConnection] = [:]
    private var tokens: [HostToken] = []

    /// - Parameters:
    ///   - host: an initialised host.
    ///   - info: what `HCIHost.initialize` returned.
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

    // MARK: scanning

    /// Starts scanning (active by default) with duplicate filtering off in the
    /// controller, so scan responses and changes are seen; de-duplication is
    /// done here. Forgets the devices heard before.
    /// - Returns: a future that succeeds once the controller enabled scanning.
    public func startScanning(active: Bool = true, intervalMs: Double = 10, windowMs: Double = 10, filterDuplicates: Bool = false) -> Future<Void> {
        devices.removeAll(); order.removeAll(); fragments.removeAll(); pendingChecks.removeAll()
        let p = LEScanParameters(active: active, interval: Self.units625(intervalMs), window: Self.units625(min(windowMs, intervalMs)),
                                 ownAddressType: info.ownAddress.type, filterPolicy: 0)
        let ext = useExtendedCommands
        return host.submit(ext ? p.extendedCommand : p.command).flatMap { [weak self] _ -> Future<Void> in
            guard let self else { return .done }
            // Marked before the enable is answered: whatever interrupts the wait, clean-up disables scanning.
            self.isScanning = true
            return self.host.submit(ext ? .leSetExtendedScanEnable(true, filterDuplicates: filterDuplicates)
                                        : .leSetScanEnable(true, filterDuplicates: filterDuplicates)).map { _ in }
        }
    }

    /// Starts scanning unless it is on already (keeping the devices heard).
    /// - Returns: a future that succeeds once scanning is on.
    public func startScanningIfIdle(active: Bool = true) -> Future<Void> {
        isScanning ? .done : startScanning(active: active)
    }

    /// Blocking form of `startScanning`.
    /// - Throws: `HCIError`.
    public func startScan(active: Bool = true, intervalMs: Double = 10, windowMs: Double = 10, filterDuplicates: Bool = false) throws {
        try host.wait(startScanning(active: active, intervalMs: intervalMs, windowMs: windowMs, filterDuplicates: filterDuplicates))
    }

    /// Stops scanning (nothing to do when not scanning).
    /// - Returns: a future that succeeds once the controller disabled scanning.
    public func stopScanning() -> Future<Void> {
        guard isScanning else { return .done }
        isScanning = false
        return host.submit(useExtendedCommands ? .leSetExtendedScanEnable(false, filterDuplicates: false)
                                               : .leSetScanEnable(false, filterDuplicates: false)).map { _ in }
    }

    /// Blocking form of `stopScanning`. Safe to call when not scanning.
    /// - Throws: `HCIError`.
    public func stopScan() throws {
        try host.wait(stopScanning())
    }

    /// Pumps until `match` accepts a device (returned), `stop` returns true,
    /// or `deadline` passes (nil). Only devices new or changed since the last
    /// look are offered to `match`.
    public func waitForDevice(until deadline: Instant, orStop stop: () -> Bool = { false },
                              where match: (DiscoveredDevice) -> Bool) throws -> DiscoveredDevice? {
        var found: DiscoveredDevice? = nil
        var checked = 0
        _ = try host.pump(until: deadline) {
            if found != nil || stop() { return true }
            // Check devices whose data changed since the last look.
            while checked < pendingChecks.count {
                let a = pendingChecks[checked]; checked += 1
                if let d = devices[a], match(d) { found = d; return true }
            }
            return false
        }
        pendingChecks.removeAll()
        return found
    }

    private var pendingChecks: [DeviceAddress] = []

    static func units625(_ ms: Double) -> UInt16 {
        UInt16(clamping: max(4, min(16384, Int((ms / 0.625).rounded()))))
    }

    private func ingest(_ rep: AdvertisingReport) {
        var data = rep.data
        // Extended reports may arrive in pieces: status 1 means more to come.
        if !rep.isLegacyPDU || rep.legacyType == nil {
            if rep.dataStatus == 1 { fragments[rep.address, default: []] += data; return }
            if let f = fragments.removeValue(forKey: rep.address) { data = f + data }
        }
        let now = Instant.now()
        if var d = devices[rep.address] {
            d.lastSeen = now
            d.reports += 1
            if rep.rssi != 127 { d.rssi = rep.rssi }
            // The common case while scanning: the same data again. Nothing to parse.
            let same = rep.isScanResponse ? d.scanResponseBytes == data : d.advertisementBytes == data
            if same { devices[rep.address] = d; publish(.deviceSeen(d)); return }
            // A scan response that repeats the advertisement (seen from some controllers) adds nothing new.
            let echo = rep.isScanResponse && data == d.advertisementBytes
            store(&d, rep, data, parsed: echo ? d.advertisement : parse(rep.address, data))
            devices[rep.address] = d
            if !echo {
                pendingChecks.append(rep.address)
                publish(.deviceUpdated(d, isNew: false))
            }
            publish(.deviceSeen(d))
            return
        }
        var d = DiscoveredDevice(address: rep.address, rssi: rep.rssi, connectable: rep.isConnectable,
                                 advertisement: AdvertisingData(), scanResponse: nil, firstSeen: now, lastSeen: now, reports: 1)
        store(&d, rep, data, parsed: parse(rep.address, data))
        devices[rep.address] = d
        order.append(rep.address)
        pendingChecks.append(rep.address)
        publish(.deviceUpdated(d, isNew: true))
        publish(.deviceSeen(d))
    }

    private func parse(_ a: DeviceAddress, _ data: [UInt8]) -> AdvertisingData {
        let ad = AdvertisingData(data)
        if !ad.problems.isEmpty { publish(.malformedAdvertisement(a, ad.problems)) }
        return ad
    }

    private func store(_ d: inout DiscoveredDevice, _ rep: AdvertisingReport, _ data: [UInt8], parsed: AdvertisingData) {
        if rep.isScanResponse {
            d.scanResponse = parsed
            d.scanResponseBytes = data
        } else {
            d.advertisement = parsed
            d.advertisementBytes = data
            d.connectable = rep.isConnectable
        }
    }

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
        let commands: [HCICommand] = [.leClearFilterAcceptList] + list.map { HCICommand.leAddDeviceToFilterAcceptList($0) }
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

    private func askForAirParameters(_ c: LEConnection) {
        var asked: [String] = []
        if airRequests.contains(.dataLength), info.supportsDataLength, !airGivenUp.contains(.dataLength) {
            asked.append("data length 251")
            host.enqueue(.leSetDataLength(handle: c.handle)) { [weak self] r in
                // Refused: 27 octets stay. Unknown HCI Command (a controller that
                // lists what it does not do, as Bumble's): not asked again.
                if case let .failure(HCIError.commandFailed(_, st)) = HCIHost.returnParameters(.leSetDataLength(handle: c.handle), r),
                   st == .unknownCommand { self?.airGivenUp.insert(.dataLength) }
            }
        }
        if airRequests.contains(.phy2M), info.supports2MPHY, !airGivenUp.contains(.phy2M), info.version?.manufacturer != 0xFFFF {
            asked.append("2M PHY")
            host.enqueue(.leSetPHY(handle: c.handle), timeoutMs: phyCommandTimeoutMs) { [weak self] r in
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
        host.enqueue(.leCreateConnectionCancel, timeoutMs: cancelGraceMs) { _ in }
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
        host.submit(.disconnect(handle: c.handle, reason: reason)).whenFailure { f.fail($0) }
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
                } else if !adopters.contains(where: { $0.1(c) }) {
                    host.enqueue(.disconnect(handle: c.handle, reason: .remoteUserTerminated)) { _ in }
                }
            }
        case .leConnectionUpdateComplete(let u):
            if u.status == .success, let c = connections[u.handle] {
                c.interval = u.interval; c.latency = u.latency; c.supervisionTimeout = u.supervisionTimeout
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

/// Tells a controller that ignores its Filter Accept List (it connects only
/// to Peer_Address, as Bumble's does) from one that uses it: a device in the
/// list heard advertising connectable for `deadlineMs` while the accept-list
/// connect stays pending means the list is ignored. Reset it whenever a new
/// accept-list connect starts.
public struct AcceptListWatch: Sendable {
    public let deadlineMs: Int
    private var firstHeard: [BDAddress: Instant] = [:]

    public init(deadlineMs: Int) { self.deadlineMs = deadlineMs }

    /// A new accept-list connect: forget what was heard.
    public mutating func reset() { firstHeard.removeAll() }

    /// `peer` was heard advertising at `now` while `pending` (the accept-list
    /// connect's devices) waits.
    /// - Returns: how long it has been heard without being connected (ms)
    ///   once that reaches the deadline, meaning the list is ignored; nil before.
    public mutating func heard(_ peer: DeviceAddress, at now: Instant = .now(), pending: [DeviceAddress]) -> Int? {
        guard pending.contains(where: { $0.address == peer.address }) else { return nil }
        let first = firstHeard[peer.address] ?? now
        firstHeard[peer.address] = first
        let ms = first.msUntil(now)
        return ms >= deadlineMs ? ms : nil
    }
}
