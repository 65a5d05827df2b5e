import BLEWire
import BLEHCI

/// Which HCI commands and PDUs a peripheral advertises with.
public enum AdvertisingMode: String, Sendable, Equatable {
    /// LE Set Advertising Parameters, Data, Scan Response Data, Enable
    /// (7.8.5-7.8.9): ADV_IND, 31 + 31 octets. Every controller has them.
    case legacy
    /// The extended commands (7.8.52-7.8.56), connectable undirected
    /// extended advertising (properties 0x0001): up to 251 octets of
    /// advertising data and no scan response; only scanners using extended
    /// scanning hear it.
    case extended
    /// The extended commands with legacy PDUs (properties 0x0013, ADV_IND):
    /// what legacy mode sends, for a host that must not mix legacy and
    /// extended commands (Core Vol 4 Part E 3.1.1) because it scans or
    /// connects with the extended ones.
    case extendedLegacyPDUs

    var usesExtendedCommands: Bool { self != .legacy }
}

/// What to advertise.
public struct AdvertisingParameters: Sendable {
    /// The local name (Complete, or Shortened when it does not fit).
    public var name: String
    /// Service UUIDs (16- or 128-bit).
    public var services: [BluetoothUUID]
    /// Advertising interval (min = max), 20 ms to 10.24 s. Default 100 ms.
    public var intervalMs: Double
    /// nil: automatic, `.extendedLegacyPDUs` when the central uses the
    /// extended commands (`Central.useExtendedCommands`), else `.legacy`.
    public var mode: AdvertisingMode?
    /// Data to send instead of what `AdvertisingBuilder` makes of the name and services.
    public var payload: AdvertisingPayload?

    public init(name: String, services: [BluetoothUUID] = [], intervalMs: Double = 100,
                mode: AdvertisingMode? = nil, payload: AdvertisingPayload? = nil) {
        self.name = name; self.services = services; self.intervalMs = intervalMs; self.mode = mode; self.payload = payload
    }
}

/// The GAP peripheral role's advertising (Core Vol 3 Part C 9.3.4, 9.2.4):
/// connectable undirected advertising from the stack's own address, in
/// General Discoverable mode. It owns the connections made to us (LE
/// Connection Complete with Role 1, which the Central hands here) and keeps
/// advertising while fewer than `maxConnections` of them are up: the
/// controller stops advertising at each connection, so it is restarted
/// after the connection and after every disconnection. A refused restart
/// (Command Disallowed: a controller that cannot advertise while connected)
/// is reported (`.restartRefused`) and tried again at the next disconnection.
public final class Advertiser {
    /// The central whose host, controller information and connections this shares.
    public let central: Central
    public var host: HCIHost { central.host }
    /// Connections made to us that are still up, by handle.
    public private(set) var connections: [UInt16: LEConnection] = [:]
    /// Advertising stays on while fewer connections than this are up (default 1).
    public var maxConnections = 1
    /// What `start` was last given, until `stop`.
    public private(set) var parameters: AdvertisingParameters?
    /// The mode in use (resolved from the parameters at `start`).
    public private(set) var mode: AdvertisingMode = .legacy
    /// The data in use.
    public private(set) var payload = AdvertisingPayload(advertising: [])
    /// The last refusal of a restart, until advertising is back on.
    public private(set) var refusal: (any Error)?

    /// Where advertising stands.
    public enum State: Equatable, Sendable {
        /// Not wanted (before `start`, after `stop`).
        case off
        /// Commands in flight (start, restart).
        case starting
        /// The controller advertises.
        case advertising
        /// `maxConnections` are up: resumes at a disconnection.
        case full
        /// The controller refused the restart: retried at the next disconnection.
        case refused
    }

    public var state: State {
        guard parameters != nil else { return .off }
        if busy { return .starting }
        if isOn { return .advertising }
        if connections.count >= maxConnections { return .full }
        return refusal != nil ? .refused : .starting
    }

    /// What the Advertiser tells its subscribers.
    public enum Event {
        /// A central connected to us (before advertising is restarted).
        case connected(LEConnection)
        /// A connection made to us ended (after `connections` forgot it).
        case disconnected(LEConnection)
        /// The controller started advertising (at `start` and each restart).
        case advertising
        /// The controller refused a restart; it is tried again at the next disconnection.
        case restartRefused(any Error)
    }

    var isOn = false
    /// Our advertising set exists in the controller (extended modes).
    var setExists = false
    var busy = false
    /// Counts starts and stops: a start's commands stop going out once another began.
    private var generation = 0
    /// A subscription, for `cancel`.
    public typealias Subscription = Subscribers<Event>.Token
    private var subscribers = Subscribers<Event>()
    private var centralTokens: [Central.Subscription] = []
    private var hostTokens: [HostToken] = []

    /// - Parameter central: the stack's central (one Advertiser per central).
    public init(central: Central) {
        self.central = central
        central.incoming = { [weak self] c in self?.accept(c) ?? false }
        centralTokens.append(central.onDisconnection { [weak self] c in self?.disconnected(c) })
        hostTokens.append(central.host.onClose { [weak self] _ in self?.isOn = false; self?.busy = false })
    }

    deinit {
        for t in centralTokens { central.cancel(t) }
        central.host.cancel(hostTokens)
    }

    // MARK: subscriptions

    /// Calls `handler` with every event until cancelled.
    @discardableResult
    public func subscribe(_ handler: @escaping (Event) -> Void) -> Subscription { subscribers.add(handler) }

    /// Calls `handler` with each connection made to us. While nobody
    /// subscribes to connections, one is disconnected (as the Central does
    /// with connections nobody adopts).
    @discardableResult
    public func onConnection(_ handler: @escaping (LEConnection) -> Void) -> Subscription {
        subscribe { if case let .connected(c) = $0 { handler(c) } }
    }

    /// Calls `handler` when a connection made to us ends.
    @discardableResult
    public func onDisconnection(_ handler: @escaping (LEConnection) -> Void) -> Subscription {
        subscribe { if case let .disconnected(c) = $0 { handler(c) } }
    }

    /// Ends a subscription; an unknown token is ignored.
    public func cancel(_ t: Subscription) { subscribers.remove(t) }

    /// Live subscriptions, for leak checks in tests.
    public var subscriptionCount: Int { subscribers.count }

    private func publish(_ e: Event) { subscribers.emit(e) }

    // MARK: starting and stopping

    /// Starts (or reconfigures) advertising: see PROTOCOL.md "Advertising
    /// and the peripheral role" for the commands of each mode.
    /// - Returns: a future that succeeds once the controller advertises (or,
    ///   with `maxConnections` up, once it is configured); it fails with
    ///   `GAPError.advertisingUnsupported` or the `HCIError` of the command refused.
    public func start(_ p: AdvertisingParameters) -> Future<Void> {
        let m = p.mode ?? (central.useExtendedCommands ? .extendedLegacyPDUs : .legacy)
        if m.usesExtendedCommands && !central.info.supportsExtendedAdvertising {
            return Future(error: GAPError.advertisingUnsupported("the controller does not list the extended advertising commands"))
        }
        let data = p.payload ?? (m == .extended ? AdvertisingBuilder.extended(name: p.name, services: p.services)
                                                : AdvertisingBuilder.legacy(name: p.name, services: p.services))
        let limit = m == .extended ? 251 : 31
        if data.advertising.count > limit || data.scanResponse.count > (m == .extended ? 0 : 31) {
            return Future(error: GAPError.advertisingUnsupported("\(data.advertising.count) + \(data.scanResponse.count) octets of data do not fit \(m.rawValue) advertising"))
        }
        var commands: [HCICommand] = []
        if isOn { commands.append(disableCommand) }
        mode = m; payload = data; parameters = p; refusal = nil
        commands += configuration(p, m, data)
        let enable = connections.count < maxConnections
        if enable { commands.append(enableCommand) }
        busy = true
        isOn = false
        if m.usesExtendedCommands { setExists = true }
        generation += 1
        let g = generation
        let f = sequentially(commands) { [weak self] c in
            // A stop (or another start) since: the rest is not sent.
            guard let self, self.generation == g else { return .done }
            return self.host.submit(c).map { _ in }
        }
        return f.always { [weak self] r in
            guard let self, self.generation == g else { return }
            self.busy = false
            switch r {
            case .success:
                guard self.parameters != nil else { return }
                self.isOn = enable
                if enable { self.publish(.advertising) }
            case .failure:
                self.parameters = nil
            }
        }
    }

    /// Blocking form of `start`.
    /// - Throws: `GAPError.advertisingUnsupported`, `HCIError`.
    public func startAdvertising(_ p: AdvertisingParameters, timeoutMs: Int = 3000) throws {
        try host.wait(start(p), until: Instant.now().adding(ms: timeoutMs))
    }

    /// Stops advertising (LE Set Advertising Enable 0, or LE Set Extended
    /// Advertising Enable 0 then LE Remove Advertising Set); connections stay up.
    /// - Returns: a future that succeeds once the controller stopped.
    public func stop() -> Future<Void> {
        let wasOn = isOn || busy
        let hadSet = setExists
        parameters = nil; refusal = nil; isOn = false; setExists = false; busy = false
        generation += 1
        var commands: [HCICommand] = []
        if wasOn || hadSet { commands.append(disableCommand) }
        if hadSet { commands.append(HCI.LERemoveAdvertisingSet().command) }
        return sequentially(commands) { [weak self] c in
            guard let self else { return .done }
            return self.host.submit(c).map { _ in }
        }
    }

    /// Blocking form of `stop`.
    /// - Throws: `HCIError`.
    public func stopAdvertising(timeoutMs: Int = 3000) throws {
        try host.wait(stop(), until: Instant.now().adding(ms: timeoutMs))
    }

    /// True between `start` and `stop`.
    public var isActive: Bool { parameters != nil }

    static func units625(_ ms: Double) -> UInt16 {
        UInt16(clamping: max(0x0020, min(0x4000, Int((ms / 0.625).rounded()))))
    }

    private var enableCommand: HCICommand {
        mode.usesExtendedCommands ? HCI.LESetExtendedAdvertisingEnable(enable: true).command
                                  : HCI.LESetAdvertisingEnable(enable: true).command
    }
    private var disableCommand: HCICommand {
        mode.usesExtendedCommands ? HCI.LESetExtendedAdvertisingEnable(enable: false).command
                                  : HCI.LESetAdvertisingEnable(enable: false).command
    }

    /// The parameters and data commands of a mode (enable not included).
    func configuration(_ p: AdvertisingParameters, _ m: AdvertisingMode, _ data: AdvertisingPayload) -> [HCICommand] {
        let interval = Self.units625(p.intervalMs)
        let own = central.info.ownAddress
        if m == .legacy {
            var ap = HCI.LESetAdvertisingParameters()
            ap.intervalMin = interval; ap.intervalMax = interval; ap.type = 0; ap.ownAddressType = own.type
            var ad = HCI.LESetAdvertisingData(); ad.data = data.advertising
            var sr = HCI.LESetScanResponseData(); sr.data = data.scanResponse
            return [ap.command, ad.command, sr.command]
        }
        var ep = HCI.LESetExtendedAdvertisingParameters()
        ep.properties = m == .extended ? 0x0001 : 0x0013
        ep.intervalMin = UInt32(interval); ep.intervalMax = UInt32(interval); ep.ownAddressType = own.type
        var out = [ep.command]
        if own.type == .random {
            var ra = HCI.LESetAdvertisingSetRandomAddress(); ra.address = own.address
            out.append(ra.command)
        }
        var ad = HCI.LESetExtendedAdvertisingData(); ad.value.data = data.advertising
        out.append(ad.command)
        if m == .extendedLegacyPDUs {
            var sr = HCI.LESetExtendedScanResponseData(); sr.value.data = data.scanResponse
            out.append(sr.command)
        }
        return out
    }

    // MARK: connections (the Central hands over Role 1 completions)

    /// A connection where we are the peripheral: ours if anybody listens.
    private func accept(_ c: LEConnection) -> Bool {
        guard subscribers.count > 0 else { return false }
        connections[c.handle] = c
        // The controller stopped advertising (legacy: 7.8.9; extended: the set
        // terminated, 7.7.65.18) to make the connection.
        isOn = false
        publish(.connected(c))
        restartIfWanted()
        return true
    }

    private func disconnected(_ c: LEConnection) {
        if connections.removeValue(forKey: c.handle) != nil { publish(.disconnected(c)) }
        // After every disconnection, ours or the central's: the controller may
        // have room again for what it refused.
        restartIfWanted()
    }

    /// LE Set (Extended) Advertising Enable 1 with the configuration the controller keeps.
    private func restartIfWanted() {
        guard parameters != nil, !isOn, !busy, connections.count < maxConnections else { return }
        busy = true
        host.submit(enableCommand).whenComplete { [weak self] r in
            guard let self else { return }
            self.busy = false
            guard self.parameters != nil else { return }
            switch r {
            case .success:
                self.isOn = true; self.refusal = nil
                self.publish(.advertising)
            case .failure(let e):
                self.refusal = e
                self.publish(.restartRefused(e))
            }
        }
    }
}
