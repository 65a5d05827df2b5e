import Attled

/// One LED lamp's link, from set-up to the last write: the one place that
/// knows how a lamp is used, for the CLI's jobs, the UI and the gateway.
///
/// - Set-up: security up front (a stored bond, `pairing: .always`), then the
///   LED characteristics from the cache (validated) or by discovery; handles
///   the device rejects, or a Service Changed over the LED service, mean the
///   cache was stale: discover again in the same connection and redo the work.
/// - Writes: the type each characteristic calls for, done when they are (a
///   Write Command when the controller sent it), and never a Write Command
///   the device would drop: when the LED characteristics need encryption the
///   link is secured first (a Write Command gets no error to tell).
/// - Work that fails for want of encryption is redone once after securing.
/// - Values: notifications and indications of the lamp's characteristics go
///   to `onValue`; a Service Changed indication is handled here.
public final class LampSession {
    public let link: Link
    public let resolver: LEDResolver
    /// Security: nil where the owner never secures (the UI).
    public let securer: Securer?
    public let report: Report
    public let advertised: [BluetoothUUID]
    public let deviceName: String
    /// The lamp's LED characteristics once resolved.
    public private(set) var led: ResolvedLED?
    /// Where they came from.
    public private(set) var source: LEDResolver.Source?
    /// Called once, when the characteristics are first resolved.
    public var onResolved: ((ResolvedLED, LEDResolver.Source) -> Void)?
    /// A notification or indication of one of the lamp's characteristics.
    public var onValue: ((HandleValue) -> Void)?
    /// A Service Changed indication covered the LED service: the handles in
    /// hand may be stale, so the next work discovers again first.
    private var serviceChanged = false

    public init(link: Link, resolver: LEDResolver, securer: Securer?, advertised: [BluetoothUUID], deviceName: String, report: Report) {
        self.link = link
        self.resolver = resolver
        self.securer = securer
        self.advertised = advertised
        self.deviceName = deviceName
        self.report = report
        securer?.attach(link)
        link.bearer.onNotification = { [weak self] hv in self?.onValue?(hv) }
        link.bearer.onIndication = { [weak self] hv in self?.indication(hv) }
    }

    // MARK: set-up and work

    /// Takes characteristics known another way (no set-up: a test's lamp).
    public func use(_ led: ResolvedLED) {
        self.led = led
        source = .noCache
    }

    /// Sets the lamp up (security, then its characteristics) and runs `work`
    /// on it; cached handles that fail, or that a Service Changed indication
    /// covers meanwhile, are discovered again and `work` runs once more, so
    /// nothing is written twice to the wrong handle.
    /// - Returns: a future of the work done.
    public func start(_ work: @escaping (ResolvedLED) -> Future<Void>) -> Future<Void> {
        (securer?.upFront(link) ?? .done)
            .flatMap { [self] in resolver.start(link.gatt, peer: link.peer, advertised: advertised, deviceName: deviceName, report: report) }
            .flatMap { [self] (led, source) -> Future<Void> in
                self.led = led
                self.source = source
                onResolved?(led, source)
                guard source == .cache else { return secured { work(led) } }
                if serviceChanged, link.isConnected { return rediscover("cached handles changed (Service Changed)", work) }
                return secured { work(led) }.recover { [self] e in
                    guard link.isConnected, Self.isStaleHandleError(e) else { throw e }
                    return rediscover("cached handles failed (\(e))", work)
                }.flatMap { [self] () -> Future<Void> in
                    guard serviceChanged, link.isConnected else { return .done }
                    return rediscover("cached handles changed (Service Changed)", work)
                }
            }
    }

    /// Runs `work` on a lamp already set up (a kept lamp's later writes),
    /// discovering again first when a Service Changed covered its service.
    public func act(_ work: @escaping (ResolvedLED) -> Future<Void>) -> Future<Void> {
        guard let led else { return Future(error: LEDOperations.Failure.notResolved(device: deviceName)) }
        if serviceChanged { return rediscover("cached handles changed (Service Changed)", work) }
        return secured { work(led) }
    }

    /// A kept lamp's set-up: its colour read back (lights), or its
    /// notifications subscribed (the harness).
    public enum Prepared {
        /// Each colour characteristic's first byte; nil where it is not readable.
        case colour([UInt8?])
        /// The characteristic subscribed to; nil when it has none that notifies or indicates.
        case subscribed(Characteristic?)
    }

    /// `start` with the set-up a kept lamp (UI, gateway) needs.
    public func startPrepared() -> Future<Prepared> {
        var prepared = Prepared.colour([])
        return start { [self] led in
            if led.rgb != nil { return startReadBack().map { prepared = .colour($0) } }
            return startSubscribeNotifier().map { prepared = .subscribed($0) }
        }.map { prepared }
    }

    private func secured<T>(_ op: @escaping () -> Future<T>) -> Future<T> {
        securer?.retrying(link, op) ?? op()
    }

    private func rediscover(_ why: String, _ work: @escaping (ResolvedLED) -> Future<Void>) -> Future<Void> {
        report.progress("\(why); discovering again")
        resolver.forget(link.peer)
        serviceChanged = false
        return resolver.startDiscover(link.gatt, peer: link.peer, advertised: advertised, deviceName: deviceName, report: report)
            .flatMap { [self] led in
                self.led = led
                return secured { work(led) }
            }
    }

    /// An error that a stale cached handle explains (not a dead link or a silent peer).
    public static func isStaleHandleError(_ e: any Error) -> Bool {
        if case ATTError.timeout = e { return false }
        if case ATTError.disconnected = e { return false }
        return e is ATTError || e is GATTError
    }

    // MARK: the lamp's operations (inside `start`'s or `act`'s work)

    /// Writes a colour, done when it is (`LEDOperations.startSetColour`).
    /// - Returns: a future of the write types used (true: Write Request).
    public func startSetColour(_ rgb: RGB) -> Future<Set<Bool>> {
        guard let led else { return Future(error: LEDOperations.Failure.notResolved(device: deviceName)) }
        return protect(led.rgb ?? []).flatMap { [link] in LEDOperations.startSetColour(link.gatt, led, rgb) }
    }

    /// Writes one value, done when it is (`LEDOperations.startWrite`).
    /// - Returns: a future of whether a Write Request was used.
    public func startWrite(_ c: Characteristic, _ value: [UInt8]) -> Future<Bool> {
        protect([c]).flatMap { [link] in LEDOperations.startWrite(link.gatt, c, value) }
    }

    /// Reads the colour (`LEDOperations.startReadColour`).
    public func startReadColour() -> Future<RGB> {
        guard let led else { return Future(error: LEDOperations.Failure.notResolved(device: deviceName)) }
        return LEDOperations.startReadColour(link.gatt, led)
    }

    /// Reads each readable colour characteristic's first byte.
    /// - Returns: a future of one value per colour, nil where not readable (or empty).
    public func startReadBack() -> Future<[UInt8?]> {
        let chars = led?.rgb ?? []
        var values: [UInt8?] = []
        return sequentially(chars) { [link] c -> Future<Void> in
            guard c.properties.contains(.read) else { values.append(nil); return .done }
            return link.gatt.startRead(c.valueHandle).map { values.append($0.first) }
        }.map { values }
    }

    /// Subscribes to the lamp's notifier (the harness's buttons), with
    /// notifications when it has them, else indications.
    /// - Returns: a future of the characteristic, nil when there is none to subscribe to.
    public func startSubscribeNotifier() -> Future<Characteristic?> {
        guard let n = led?.notifier, n.properties.contains(.notify) || n.properties.contains(.indicate) else { return Future(value: nil) }
        return link.gatt.startSubscribe(n, indications: !n.properties.contains(.notify)).map { n }
    }

    // MARK: Write Commands and encryption

    /// A Write Command to a characteristic that needs encryption is dropped
    /// by the device without an error: a success that did not happen. So
    /// before the first Write Command on a link that is not encrypted, find
    /// out once per device whether the LED characteristics need encryption
    /// (a Read of one of them: they are readable), remember it in the cache,
    /// and secure the link first when they do.
    func protect(_ written: [Characteristic]) -> Future<Void> {
        guard let securer, !link.security.isEncrypted,
              written.contains(where: { !$0.properties.contains(.write) && $0.properties.contains(.writeWithoutResponse) }) else { return .done }
        if let known = resolver.entry(link.peer)?.needsEncryption {
            return known ? securer.secure(link) : .done
        }
        guard let probe = written.first(where: { $0.properties.contains(.read) }) else { return .done }
        let record = { [resolver, link] (needs: Bool) in
            guard var e = resolver.entry(link.peer) else { return }
            e.needsEncryption = needs
            resolver.save(link.peer, e)
        }
        return link.gatt.startRead(probe.valueHandle).map { _ in record(false) }.recover { [self] e -> Future<Void> in
            guard Securer.needsSecurity(e) else { return .done } // unknown: write as before
            record(true)
            report.progress("the LED characteristics need an encrypted link (\(e)): a Write Command would be dropped")
            return securer.secure(link, because: "\(e): the device drops Write Commands until the link is encrypted")
        }
    }

    // MARK: indications

    /// A Service Changed indication (Core Vol 3 Part G 7.1: the affected
    /// handle range, indicated from outside the LED service) invalidates the
    /// cache only when that range overlaps the LED service in use; any other
    /// change leaves the lamp and the cache alone. Anything else is a value.
    func indication(_ hv: HandleValue) {
        let ours = led?.service ?? resolver.entry(link.peer)?.service
        // An indication from inside the LED service is one of its characteristics.
        if let svc = ours, (svc.start...svc.end).contains(hv.handle) { onValue?(hv); return }
        guard let changed = try? ServiceChangedValue(bytes: hv.value) else { onValue?(hv); return }
        if let svc = ours, !changed.range.overlaps(svc.start...svc.end) {
            report.progress("the device indicated Service Changed for \(changed), outside the LED service \(ServiceChangedValue(svc.start...svc.end)): cache kept")
            return
        }
        serviceChanged = true
        resolver.forget(link.peer)
        report.progress("the device indicated Service Changed for \(changed) (handle 0x\(Hex.int(hv.handle, width: 4))): cache invalidated")
    }
}
