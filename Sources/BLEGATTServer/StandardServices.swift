import BLEWire
import BLEGATT

// The GAP and GATT services every server starts with (Core Vol 3 Part C
// 12, Part G 7).

extension GATTUUID {
    public static let gapService = BluetoothUUID(uint16: 0x1800)
    public static let gattService = BluetoothUUID(uint16: 0x1801)
    public static let clientSupportedFeatures = BluetoothUUID(uint16: 0x2B29)
}

public enum StandardServices {
    /// Generic Access: Device Name and Appearance, read-only.
    public static func gap(name: String, appearance: UInt16 = 0x0000) -> ServiceDefinition {
        var a = ByteWriter(); a.u16(appearance)
        return ServiceDefinition(uuid: GATTUUID.gapService, characteristics: [
            CharacteristicDefinition(uuid: GATTUUID.deviceName, properties: .read, value: Array(name.utf8.prefix(248))),
            CharacteristicDefinition(uuid: GATTUUID.appearance, properties: .read, value: a.bytes),
        ])
    }

    /// Generic Attribute: Service Changed (indicate, with its CCCD), Client
    /// Supported Features (each client's own, one octet) and Database Hash
    /// (filled in once the database is laid out: `GATTServer`).
    public static func gatt() -> ServiceDefinition {
        ServiceDefinition(uuid: GATTUUID.gattService, characteristics: [
            CharacteristicDefinition(uuid: GATTUUID.serviceChanged, properties: .indicate, value: ServiceChangedValue.wholeDatabase.bytes,
                                     permissions: [], maxLength: 4),
            CharacteristicDefinition(uuid: GATTUUID.clientSupportedFeatures, properties: [.read, .write], value: [0x00], maxLength: 1, perClient: true),
            CharacteristicDefinition(uuid: GATTUUID.databaseHash, properties: .read, value: [UInt8](repeating: 0, count: 16),
                                     permissions: .read, maxLength: 16),
        ])
    }
}
