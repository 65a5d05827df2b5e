import Attled

/// Finds a device's LED characteristics: from the GATT cache when the entry
/// is still valid (checked with the GATT Database Hash when the device has
/// one), else by discovery, which refreshes the cache. Event-driven: every
/// step is a `Future`, so several devices resolve at once.
public final class LEDResolver {
    public let cache: GATTCache?
    public let explicitProfile: LEDProfile?
    public let trustCache: Bool

    /// The address the cache files a peer under: its identity address when
    /// a bond resolves it (a device with resolvable private addresses keeps
    /// one entry), else the address itself.
    public var identity: (DeviceAddress) -> DeviceAddress = { $0 }

    public init(cache: GATTCache?, explicitProfile: LEDProfile?, trustCache: Bool) {
        self.cache = cache
        self.explicitProfile = explicitProfile
        self.trustCache = trustCache
    }

    // MARK: the cache entries, by identity

    /// Entries this run loaded or wrote, so a job reads each file once.
    private var entries: [DeviceAddress: GATTCache.Entry] = [:]

    /// The cache entry of `peer` (filed under its identity); nil without one.
    public func entry(_ peer: DeviceAddress) -> GATTCache.Entry? {
        let key = identity(peer)
        if let e = entries[key] { return e }
        let e = cache?.load(key)
        entries[key] = e
        return e
    }

    /// Writes `peer`'s entry.
    public func save(_ peer: DeviceAddress, _ e: GATTCache.Entry) {
        guard let cache else { return }
        let key = identity(peer)
        entries[key] = e
        cache.save(key, e)
    }

    /// Drops `peer`'s entry: it is stale.
    public func forget(_ peer: DeviceAddress) {
        let key = identity(peer)
        entries[key] = nil
        cache?.remove(key)
    }

    /// Where the resolved characteristics came from.
    public enum Source: String { case cache = "hit", discovery = "miss", noCache = "off" }

    /// Cache first, then discovery.
    /// - Returns: a future of the characteristics and their source.
    public func start(_ gatt: GATTClient, peer: DeviceAddress, advertised: [BluetoothUUID], deviceName: String, report: Report) -> Future<(ResolvedLED, Source)> {
        startCached(gatt, peer: peer, advertised: advertised, report: report).flatMap { cached in
            if let led = cached { return Future(value: (led, .cache)) }
            return self.startDiscover(gatt, peer: peer, advertised: advertised, deviceName: deviceName, report: report)
                .map { ($0, self.cache == nil ? .noCache : .discovery) }
        }
    }

    /// The cached LED characteristics, after validating them with the
    /// Database Hash when the device has one.
    /// - Returns: a future of them, nil when there is no usable entry.
    public func startCached(_ gatt: GATTClient, peer: DeviceAddress, advertised: [BluetoothUUID], report: Report) -> Future<ResolvedLED?> {
        guard cache != nil, let e = entry(peer) else { return Future(value: nil) }
        let profile: LEDProfile?
        if let x = explicitProfile {
            profile = x.service == e.service.uuid ? x : nil
        } else {
            profile = LEDProfile.named(e.profile).flatMap { p in
                (advertised.isEmpty || LEDProfile.detect(advertised) == nil || LEDProfile.detect(advertised) == p) ? p : nil
            }
        }
        guard let prof = profile, prof.service == e.service.uuid,
              let led = try? ResolvedLED(profile: prof, service: e.service, characteristics: e.characteristics) else { return Future(value: nil) }
        report.begin(.cache)
        let before = gatt.bearer.transactions.count
        let finish: (String) -> ResolvedLED = { how in
            report.done("\(prof.name) handles from the cache, \(how), \(gatt.bearer.transactions.count - before) ATT transaction(s)")
            return led
        }
        let stale: (String) -> ResolvedLED? = { why in
            self.forget(peer)
            report.done("\(why): discovering again")
            return nil
        }
        if trustCache { return Future(value: finish("trusted without a check")) }
        // A device with a Database Hash: one read of it proves the whole
        // database unchanged (Core Vol 3 Part G 7.3). The hash was recorded by
        // the run that discovered the handles, in the same connection.
        if let h = e.hashHandle, let want = e.hash {
            return gatt.startRead(h).map { got -> ResolvedLED? in
                got == want ? finish("Database Hash matches") : stale("Database Hash changed")
            }.recover { err in
                if case ATTError.errorResponse = err { return Future(value: stale("Database Hash unreadable (\(err))")) }
                throw err
            }
        }
        // No hash: the characteristic declarations in the cached service range,
        // read again and compared field for field, prove the handles the job
        // uses (an entry from an older attled also records the hash here).
        return validateDeclarations(gatt, e, prof).flatMap { same -> Future<ResolvedLED?> in
            guard same else { return Future(value: stale("characteristic declarations changed")) }
            if e.noHash { return Future(value: finish("declarations match (no Database Hash)")) }
            return self.startRecordHash(gatt, e).map { updated in
                self.save(peer, updated)
                return finish("declarations match")
            }
        }
    }

    /// Reads the characteristic declarations over the cached service range,
    /// stopping where the discovery that filled the cache stopped, and
    /// compares them with the cached ones. Exchanges the MTU first when the
    /// cached declarations would not fit one response at the current one.
    /// - Returns: a future of whether they are all the same.
    func validateDeclarations(_ gatt: GATTClient, _ e: GATTCache.Entry, _ prof: LEDProfile) -> Future<Bool> {
        let b = gatt.bearer
        let bytes = e.characteristics.reduce(0) { $0 + 2 + 3 + ($1.uuid.uint16 == nil ? 16 : 2) }
        let mtu: Future<Void> = (!b.mtuExchanged && bytes + 2 > b.mtu) ? b.startExchangeMTU().map { _ in } : .done
        return mtu.flatMap { gatt.startDiscoverCharacteristics(of: e.service) { ResolvedLED.isComplete(prof, $0) } }
            .map { $0 == e.characteristics }
            .recover { err in
                if case ATTError.errorResponse = err { return Future(value: false) }
                if err is GATTError { return Future(value: false) }
                throw err
            }
    }

    /// Reads the Database Hash by type (one Read By Type 0x2B2A over the whole
    /// range) into a copy of `e`: its handle and value, or `noHash` when the
    /// device has none.
    /// - Returns: a future of the updated entry.
    func startRecordHash(_ gatt: GATTClient, _ e: GATTCache.Entry) -> Future<GATTCache.Entry> {
        var copy = e
        return gatt.startRead(type: GATTUUID.databaseHash).map { hv -> GATTCache.Entry in
            if let hv, hv.value.count == 16 { copy.hashHandle = hv.handle; copy.hash = hv.value; copy.noHash = false }
            else { copy.noHash = true }
            return copy
        }.recover { err -> Future<GATTCache.Entry> in
            if case ATTError.errorResponse = err { copy.noHash = true; return Future(value: copy) }
            throw err
        }
    }

    /// Discovers the LED service and characteristics and, with a cache, reads
    /// the Database Hash in the same connection and saves both: the hash then
    /// describes exactly the database the handles came from.
    /// - Returns: a future of the characteristics.
    public func startDiscover(_ gatt: GATTClient, peer: DeviceAddress, advertised: [BluetoothUUID], deviceName: String, report: Report) -> Future<ResolvedLED> {
        report.begin(.discover)
        let b = gatt.bearer
        let before = b.transactions.count
        return LEDOperations.startDiscover(gatt, profile: explicitProfile, advertised: advertised, deviceName: deviceName).flatMap { led -> Future<ResolvedLED> in
            let svc = led.service
            let done = { (hash: String) -> ResolvedLED in
                report.done("\(led.profile.name) service 0x\(Hex.int(svc.start, width: 4))-0x\(Hex.int(svc.end, width: 4)), \(led.characteristics.count) characteristic(s)\(hash), MTU \(b.mtu), \(b.transactions.count - before) ATT transaction(s)")
                return led
            }
            guard self.cache != nil, !led.profile.isCustom else { return Future(value: done("")) }
            let entry = GATTCache.Entry(profile: led.profile.name, service: svc, characteristics: led.characteristics)
            return self.startRecordHash(gatt, entry).map { e in
                self.save(peer, e)
                return done(e.noHash ? ", no Database Hash" : ", Database Hash recorded")
            }
        }
    }
}
