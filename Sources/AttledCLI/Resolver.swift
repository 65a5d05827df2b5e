import Attled

/// Finds a device's LED characteristics: from the GATT cache when the entry
/// is still valid (checked with the GATT Database Hash when the device has
/// one), else by discovery, which refreshes the cache. Event-driven: every
/// step is a `Future`, so several devices resolve at once.
final class LEDResolver {
    let cache: GATTCache?
    let explicitProfile: LEDProfile?
    let trustCache: Bool

    init(cache: GATTCache?, explicitProfile: LEDProfile?, trustCache: Bool) {
        self.cache = cache
        self.explicitProfile = explicitProfile
        self.trustCache = trustCache
    }

    /// Where the resolved characteristics came from.
    enum Source: String { case cache = "hit", discovery = "miss", noCache = "off" }

    /// Cache first, then discovery.
    /// - Returns: a future of the characteristics and their source.
    func start(_ gatt: GATTClient, peer: DeviceAddress, advertised: [BluetoothUUID], deviceName: String, report: Report) -> Future<(ResolvedLED, Source)> {
        startCached(gatt, peer: peer, advertised: advertised, report: report).flatMap { cached in
            if let led = cached { return Future(value: (led, .cache)) }
            return self.startDiscover(gatt, peer: peer, advertised: advertised, deviceName: deviceName, report: report)
                .map { ($0, self.cache == nil ? .noCache : .discovery) }
        }
    }

    /// The cached LED characteristics, after validating them with the
    /// Database Hash when the device has one.
    /// - Returns: a future of them, nil when there is no usable entry.
    func startCached(_ gatt: GATTClient, peer: DeviceAddress, advertised: [BluetoothUUID], report: Report) -> Future<ResolvedLED?> {
        guard let cache = cache, var e = cache.load(peer) else { return Future(value: nil) }
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
        if trustCache { return Future(value: finish("trusted (--trust-cache)")) }
        if let h = e.hashHandle, let want = e.hash {
            return gatt.startRead(h).map { got -> ResolvedLED? in
                guard got == want else {
                    cache.remove(peer)
                    report.done("Database Hash changed: discovering again")
                    return nil
                }
                return finish("Database Hash matches")
            }.recover { err in
                if case ATTError.errorResponse = err { cache.remove(peer); report.end(); return Future(value: nil) }
                throw err
            }
        }
        if e.noHash { return Future(value: finish("trusted (no Database Hash)")) }
        return gatt.startRead(type: GATTUUID.databaseHash).map { hv in
            let how: String
            if let hv, hv.value.count == 16 {
                e.hashHandle = hv.handle; e.hash = hv.value
                how = "Database Hash recorded"
            } else {
                e.noHash = true
                how = "the device has no Database Hash"
            }
            cache.save(peer, e)
            return finish(how)
        }
    }

    /// Discovers the LED service and characteristics and saves them to the cache.
    /// - Returns: a future of the characteristics.
    func startDiscover(_ gatt: GATTClient, peer: DeviceAddress, advertised: [BluetoothUUID], deviceName: String, report: Report) -> Future<ResolvedLED> {
        report.begin(.discover)
        let b = gatt.bearer
        let before = b.transactions.count
        return LEDOperations.startDiscover(gatt, profile: explicitProfile, advertised: advertised, deviceName: deviceName).map { led in
            let svc = led.service
            report.done("\(led.profile.name) service 0x\(Hex.int(svc.start, width: 4))-0x\(Hex.int(svc.end, width: 4)), \(led.characteristics.count) characteristic(s), MTU \(b.mtu), \(b.transactions.count - before) ATT transaction(s)")
            if !led.profile.isCustom {
                self.cache?.save(peer, GATTCache.Entry(profile: led.profile.name, service: svc, characteristics: led.characteristics))
            }
            return led
        }
    }
}
