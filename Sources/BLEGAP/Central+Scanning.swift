import BLEWire
import BLEHCI

// Scanning: starting and stopping it, and each advertising report merged
// into its device (host-side de-duplication, scan responses).
extension Central {

    /// Starts scanning (active by default) with duplicate filtering off in the
    /// controller, so scan responses and changes are seen; de-duplication is
    /// done here. Forgets the devices heard before. While a start is under
    /// way, another joins it (nothing is sent twice).
    /// - Returns: a future that succeeds once the controller enabled scanning.
    public func startScanning(active: Bool = true, intervalMs: Double = 10, windowMs: Double = 10, filterDuplicates: Bool = false) -> Future<Void> {
        if let starting = scanStarting { return starting }
        devices.removeAll(); order.removeAll(); fragments.removeAll(); pendingChecks.removeAll()
        let p = LEScanParameters(active: active, interval: Self.units625(intervalMs), window: Self.units625(min(windowMs, intervalMs)),
                                 ownAddressType: info.ownAddress.type, filterPolicy: 0)
        let ext = useExtendedCommands
        let start = host.submit(ext ? p.extendedCommand : p.command).flatMap { [weak self] _ -> Future<Void> in
            guard let self else { return .done }
            // Marked before the enable is answered: whatever interrupts the wait, clean-up disables scanning.
            self.isScanning = true
            return self.host.submit(ext ? HCI.LESetExtendedScanEnable(enable: true, filterDuplicates: filterDuplicates).command
                                        : HCI.LESetScanEnable(enable: true, filterDuplicates: filterDuplicates).command).map { _ in }
        }
        scanStarting = start
        start.whenComplete { [weak self] _ in if self?.scanStarting === start { self?.scanStarting = nil } }
        return scanStarting ?? start
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
        // A start under way is let finish, then stopped (else it would leave the scan on).
        if let starting = scanStarting {
            return starting.recover { _ in .done }.flatMap { [weak self] in self?.stopScanning() ?? .done }
        }
        guard isScanning else { return .done }
        isScanning = false
        return host.submit(useExtendedCommands ? HCI.LESetExtendedScanEnable(enable: false, filterDuplicates: false).command
                                               : HCI.LESetScanEnable(enable: false, filterDuplicates: false).command).map { _ in }
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


    static func units625(_ ms: Double) -> UInt16 {
        UInt16(clamping: max(4, min(16384, Int((ms / 0.625).rounded()))))
    }

    func ingest(_ rep: AdvertisingReport) {
        var data = rep.data
        // Extended reports may arrive in pieces: status 1 means more to come.
        if !rep.isLegacyPDU || rep.legacyType == nil {
            if rep.dataStatus == 1 { fragments[rep.address, default: []] += data; return }
            if let f = fragments.removeValue(forKey: rep.address) { data = f + data }
        }
        publish(.heard(HeardAdvertisement(address: rep.address, rssi: rep.rssi, data: data, isScanResponse: rep.isScanResponse, connectable: rep.isConnectable)))
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

    func parse(_ a: DeviceAddress, _ data: [UInt8]) -> AdvertisingData {
        let ad = AdvertisingData(data)
        if !ad.problems.isEmpty { publish(.malformedAdvertisement(a, ad.problems)) }
        return ad
    }

    func store(_ d: inout DiscoveredDevice, _ rep: AdvertisingReport, _ data: [UInt8], parsed: AdvertisingData) {
        if rep.isScanResponse {
            d.scanResponse = parsed
            d.scanResponseBytes = data
        } else {
            d.advertisement = parsed
            d.advertisementBytes = data
            d.connectable = rep.isConnectable
        }
    }
}
