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
    private var connecting: DeviceAddress?
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

    /// Pumps until `match` accepts a device (returned) or `deadline` passes (nil).
    public func waitForDevice(until deadline: Instant, where match: (DiscoveredDevice) -> Bool) throws -> DiscoveredDevice? {
        var found: DiscoveredDevice? = nil
        var checked = 0
        _ = try host.pump(until: deadline) {
            if found != nil { return true }
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
        let ad = AdvertisingData(data)
        if !ad.problems.isEmpty { onMalformedAdvertisement?(rep.address, ad.problems) }
        let now = Instant.now()
        let isNew = devices[rep.address] == nil
        var d = devices[rep.address] ?? DiscoveredDevice(address: rep.address, rssi: rep.rssi, connectable: rep.isConnectable,
                                                         advertisement: AdvertisingData(), scanResponse: nil,
                                                         firstSeen: now, lastSeen: now, reports: 0)
        let before = Self.signature(d)
        if rep.isScanResponse {
            // A scan response that repeats the advertisement (seen from some controllers) adds nothing new.
            d.scanResponse = ad
        } else {
            d.advertisement = ad
            d.connectable = rep.isConnectable
        }
        if rep.rssi != 127 { d.rssi = rep.rssi }
        d.lastSeen = now
        d.reports += 1
        devices[rep.address] = d
        if isNew { order.append(rep.address) }
        let changed = isNew || before != Self.signature(d)
        if changed {
            pendingChecks.append(rep.address)
            onDeviceUpdate?(d, isNew)
        }
    }

    /// The distinct AD structures a device has shown: a change means something new was learned
    /// (a scan response that repeats the advertisement, as some controllers send, is not news).
    static func signature(_ d: DiscoveredDevice) -> Set<[UInt8]> {
        Set(d.merged.structures.map { [$0.type.rawValue] + $0.data })
    }

    // MARK: connecting

    /// Connects to `peer`. Scanning must be stopped first. On expiry of
    /// `timeoutMs`, sends LE Create Connection Cancel and throws `.connectTimeout`.
    public func connect(to peer: DeviceAddress, timeoutMs: Int, parameters: ConnectionParameters = ConnectionParameters()) throws -> LEConnection {
        let req = LECreateConnection(peer: peer, ownAddressType: info.ownAddress.type, scanInterval: 0x0010, scanWindow: 0x0010,
                                     filterPolicy: 0, connection: parameters)
        connecting = peer
        connectResult = nil
        defer { connecting = nil }
        let deadline = Instant.now().adding(ms: timeoutMs)
        let done: Bool
        do {
            try host.executeExpectingStatus(useExtendedCommands ? req.extendedCommand : req.command)
            pendingConnect = peer
            done = try host.pump(until: deadline) { connectResult != nil }
        } catch HCIError.interrupted(let sig) {
            // Ctrl-C/SIGTERM while connecting: cancel, and drop a connection that won the race.
            let wasInterruptible = host.interruptible
            host.interruptible = false
            defer { host.interruptible = wasInterruptible }
            _ = try? host.execute(.leCreateConnectionCancel, timeoutMs: 500)
            _ = try? host.pump(until: Instant.now().adding(ms: 300)) { connectResult != nil }
            pendingConnect = nil
            if let cc = connectResult, cc.status == .success, let c = connections[cc.handle] {
                try? disconnect(c, timeoutMs: 500)
            }
            throw HCIError.interrupted(signal: sig)
        }
        if !done {
            // Cancel; the controller answers with LE Connection Complete (Unknown
            // Connection Identifier), or a connection that won the race.
            _ = try? host.execute(.leCreateConnectionCancel)
            _ = try host.pump(until: Instant.now().adding(ms: 500)) { connectResult != nil }
            pendingConnect = nil
            if let cc = connectResult, cc.status == .success, let c = connections[cc.handle] {
                return c
            }
            throw GAPError.connectTimeout(peer, ms: timeoutMs)
        }
        let cc = connectResult!
        guard cc.status == .success, let c = connections[cc.handle] else { throw GAPError.connectFailed(peer, cc.status) }
        return c
    }

    /// Sends Disconnect and waits (bounded) for Disconnection Complete.
    public func disconnect(_ c: LEConnection, reason: HCIStatus = .remoteUserTerminated, timeoutMs: Int = 1000) throws {
        guard c.isConnected else { return }
        try host.executeExpectingStatus(.disconnect(handle: c.handle, reason: reason))
        _ = try host.pump(until: Instant.now().adding(ms: timeoutMs)) { !c.isConnected }
    }

    /// Cancels a pending connection attempt (used on signals).
    public func cancelPendingConnect() {
        if connecting != nil { _ = try? host.execute(.leCreateConnectionCancel, timeoutMs: 500) }
    }

    public var isConnecting: Bool { connecting != nil }

    /// A Create Connection the controller accepted and that has not yet
    /// completed or been cancelled (e.g. left behind by a Hardware Error).
    public private(set) var pendingConnect: DeviceAddress?

    /// Cancels a connect left pending, and disconnects one that completed
    /// meanwhile. Bounded; for clean-up after a failure.
    public func abandonPendingConnect(timeoutMs: Int = 500) {
        guard pendingConnect != nil else { return }
        _ = try? host.execute(.leCreateConnectionCancel, timeoutMs: timeoutMs)
        let before = Set(connections.keys)
        connecting = pendingConnect
        connectResult = nil
        _ = try? host.pump(until: Instant.now().adding(ms: timeoutMs)) { connectResult != nil }
        connecting = nil
        pendingConnect = nil
        for (h, c) in connections where !before.contains(h) { try? disconnect(c, timeoutMs: timeoutMs) }
        if let cc = connectResult, cc.status == .success, let c = connections[cc.handle], c.isConnected { try? disconnect(c, timeoutMs: timeoutMs) }
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
            pendingConnect = nil
            if connecting != nil { connectResult = cc }
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
