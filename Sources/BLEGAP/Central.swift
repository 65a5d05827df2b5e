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
    case connectTimeout(DeviceAddress, ms: Int)
    case connectFailed(DeviceAddress, HCIStatus)

    public var description: String {
        switch self {
        case let .connectTimeout(a, ms):
            return "could not connect to \(a) within \(ms) ms: the device is out of range, not advertising as connectable, or already connected to another central"
        case let .connectFailed(a, st):
            return "connection to \(a) failed: \(st)"
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

    init(_ cc: LEConnectionComplete) {
        handle = cc.handle; peer = cc.peer; role = cc.role
        interval = cc.interval; latency = cc.latency; supervisionTimeout = cc.supervisionTimeout
        connectedAt = Instant.now()
    }

    /// Connection interval in microseconds.
    public var intervalMicroseconds: UInt64 { UInt64(interval) * 1250 }
}

/// The GAP central role: scanning with host-side de-duplication and
/// advertisement/scan-response merging, connecting with a deadline and
/// Create Connection Cancel, disconnecting.
public final class Central {
    public let host: HCIHost
    public let info: ControllerInfo
    /// Devices heard since the last `startScan`, by address.
    public private(set) var devices: [DeviceAddress: DiscoveredDevice] = [:]
    public private(set) var order: [DeviceAddress] = []
    public private(set) var isScanning = false
    /// Use the extended scan/connect commands (Core 5.0+) instead of the legacy ones.
    public var useExtendedCommands = false
    /// Called when a device is first heard and whenever its merged data changes.
    public var onDeviceUpdate: ((DiscoveredDevice, _ isNew: Bool) -> Void)?
    /// Advertising reports whose data was malformed (address, problems).
    public var onMalformedAdvertisement: ((DeviceAddress, [String]) -> Void)?

    private var fragments: [DeviceAddress: [UInt8]] = [:]
    private var connectResult: LEConnectionComplete?
    public private(set) var connections: [UInt16: LEConnection] = [:]

    public init(host: HCIHost, info: ControllerInfo) {
        self.host = host
        self.info = info
        host.onEvent { [unowned self] ev in self.handle(ev) }
    }

    // MARK: scanning

    /// Starts scanning (active by default) with duplicate filtering off in the
    /// controller, so scan responses and changes are seen; de-duplication is done here.
    public func startScan(active: Bool = true, intervalMs: Double = 10, windowMs: Double = 10, filterDuplicates: Bool = false) throws {
        devices.removeAll(); order.removeAll(); fragments.removeAll()
        let p = LEScanParameters(active: active, interval: Self.units625(intervalMs), window: Self.units625(min(windowMs, intervalMs)),
                                 ownAddressType: info.ownAddress.type, filterPolicy: 0)
        if useExtendedCommands {
            try host.execute(p.extendedCommand)
        } else {
            try host.execute(p.command)
        }
        // Marked before the enable is answered: whatever interrupts the wait, clean-up disables scanning.
        isScanning = true
        if useExtendedCommands {
            try host.execute(.leSetExtendedScanEnable(true, filterDuplicates: filterDuplicates))
        } else {
            try host.execute(.leSetScanEnable(true, filterDuplicates: filterDuplicates))
        }
    }

    /// Stops scanning. Safe to call when not scanning.
    public func stopScan() throws {
        guard isScanning else { return }
        isScanning = false
        if useExtendedCommands {
            try host.execute(.leSetExtendedScanEnable(false, filterDuplicates: false))
        } else {
            try host.execute(.leSetScanEnable(false, filterDuplicates: false))
        }
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
            if same { devices[rep.address] = d; return }
            // A scan response that repeats the advertisement (seen from some controllers) adds nothing new.
            let echo = rep.isScanResponse && data == d.advertisementBytes
            store(&d, rep, data, parsed: echo ? d.advertisement : parse(rep.address, data))
            devices[rep.address] = d
            if !echo {
                pendingChecks.append(rep.address)
                onDeviceUpdate?(d, false)
            }
            return
        }
        var d = DiscoveredDevice(address: rep.address, rssi: rep.rssi, connectable: rep.isConnectable,
                                 advertisement: AdvertisingData(), scanResponse: nil, firstSeen: now, lastSeen: now, reports: 1)
        store(&d, rep, data, parsed: parse(rep.address, data))
        devices[rep.address] = d
        order.append(rep.address)
        pendingChecks.append(rep.address)
        onDeviceUpdate?(d, true)
    }

    private func parse(_ a: DeviceAddress, _ data: [UInt8]) -> AdvertisingData {
        let ad = AdvertisingData(data)
        if !ad.problems.isEmpty { onMalformedAdvertisement?(a, ad.problems) }
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

    /// Connects to `peer`. Scanning must be stopped first. On expiry of
    /// `timeoutMs`, sends LE Create Connection Cancel and throws `.connectTimeout`.
    public func connect(to peer: DeviceAddress, timeoutMs: Int, parameters: ConnectionParameters = ConnectionParameters()) throws -> LEConnection {
        let req = LECreateConnection(peer: peer, ownAddressType: info.ownAddress.type, scanInterval: 0x0010, scanWindow: 0x0010,
                                     filterPolicy: 0, connection: parameters)
        connectResult = nil
        pendingConnect = peer
        let deadline = Instant.now().adding(ms: timeoutMs)
        let done: Bool
        do {
            try host.executeExpectingStatus(useExtendedCommands ? req.extendedCommand : req.command)
            done = try host.pump(until: deadline) { connectResult != nil }
        } catch HCIError.interrupted(let sig) {
            // Ctrl-C/SIGTERM while connecting: cancel, and drop a connection that won the race.
            let wasInterruptible = host.interruptible
            host.interruptible = false
            defer { host.interruptible = wasInterruptible }
            if let c = try? cancelConnect(timeoutMs: 300) { try? disconnect(c, timeoutMs: 500) }
            throw HCIError.interrupted(signal: sig)
        } catch HCIError.commandFailed(let op, let status) {
            pendingConnect = nil // refused: nothing is pending
            throw HCIError.commandFailed(op, status)
        }
        if !done {
            if let c = try cancelConnect(timeoutMs: 500) { return c }
            throw GAPError.connectTimeout(peer, ms: timeoutMs)
        }
        let cc = connectResult!
        guard cc.status == .success, let c = connections[cc.handle] else { throw GAPError.connectFailed(peer, cc.status) }
        return c
    }

    /// Sends LE Create Connection Cancel and waits up to `timeoutMs` for the
    /// LE Connection Complete it causes (Unknown Connection Identifier), or for
    /// a connection that won the race, which it returns.
    private func cancelConnect(timeoutMs: Int) throws -> LEConnection? {
        defer { pendingConnect = nil }
        _ = try? host.execute(.leCreateConnectionCancel, timeoutMs: timeoutMs)
        _ = try host.pump(until: Instant.now().adding(ms: timeoutMs)) { connectResult != nil }
        guard let cc = connectResult, cc.status == .success else { return nil }
        return connections[cc.handle]
    }

    /// Sends Disconnect and waits (bounded) for Disconnection Complete.
    public func disconnect(_ c: LEConnection, reason: HCIStatus = .remoteUserTerminated, timeoutMs: Int = 1000) throws {
        guard c.isConnected else { return }
        try host.executeExpectingStatus(.disconnect(handle: c.handle, reason: reason))
        _ = try host.pump(until: Instant.now().adding(ms: timeoutMs)) { !c.isConnected }
    }

    /// A Create Connection the controller accepted and that has not yet
    /// completed or been cancelled (e.g. left behind by a Hardware Error).
    public private(set) var pendingConnect: DeviceAddress?

    /// Cancels a connect left pending. Bounded; for clean-up after a failure
    /// (a connection that completed meanwhile is in `connections`).
    public func abandonPendingConnect(timeoutMs: Int = 500) {
        guard pendingConnect != nil else { return }
        _ = try? cancelConnect(timeoutMs: timeoutMs)
    }

    private func handle(_ ev: HCIEvent) {
        switch ev {
        case let .leAdvertisingReport(reports, _):
            guard isScanning else { return }
            for r in reports { ingest(r) }
        case .leConnectionComplete(let cc):
            if cc.status == .success {
                connections[cc.handle] = LEConnection(cc)
            }
            if pendingConnect != nil {
                connectResult = cc
                pendingConnect = nil
            }
        case .leConnectionUpdateComplete(let u):
            if u.status == .success, let c = connections[u.handle] {
                c.interval = u.interval; c.latency = u.latency; c.supervisionTimeout = u.supervisionTimeout
            }
        case .disconnectionComplete(let d):
            if d.status == .success, let c = connections.removeValue(forKey: d.handle) {
                c.isConnected = false
                c.disconnectReason = d.reason
            }
        default:
            break
        }
    }
}
