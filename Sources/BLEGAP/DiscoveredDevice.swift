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
