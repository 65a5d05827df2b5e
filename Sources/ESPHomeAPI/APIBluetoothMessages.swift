// The Bluetooth proxy's scanning, connection and slot messages. Field
// numbers and types checked against aioesphomeapi/api.proto at
// esphome/aioesphomeapi 368a145f26164b707cde06c4aee76551fa7d3f46 (a copy of
// ESPHome's api.proto), section "BLUETOOTH".
//
// A device `address` is the 48-bit BD_ADDR as a number, its most
// significant byte the first one printed: AA:BB:CC:DD:EE:FF is 0xAABBCCDDEEFF.

/// What a client subscribes to (SubscribeBluetoothLEAdvertisementsRequest.flags;
/// aioesphomeapi's `BluetoothProxySubscriptionFlag`).
public struct BluetoothProxySubscriptionFlags: OptionSet, Hashable, Sendable {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }
    /// Advertisements as raw AD bytes, batched (BluetoothLERawAdvertisementsResponse).
    public static let rawAdvertisements = BluetoothProxySubscriptionFlags(rawValue: 1 << 0)
}

/// SubscribeBluetoothLEAdvertisementsRequest (66).
public struct SubscribeBluetoothLEAdvertisementsRequest: APIMessage {
    public static let messageType = APIMessageType(rawValue: 66)
    public var flags = BluetoothProxySubscriptionFlags()

    public init() {}
    public init(flags: BluetoothProxySubscriptionFlags) { self.flags = flags }
    public mutating func fields(_ f: inout some ProtoFieldWalker) throws {
        var raw = flags.rawValue
        try f.scalar(1, "flags", &raw, .uint32)
        flags = BluetoothProxySubscriptionFlags(rawValue: raw)
    }
}

/// UnsubscribeBluetoothLEAdvertisementsRequest (87).
public struct UnsubscribeBluetoothLEAdvertisementsRequest: EmptyAPIMessage {
    public static let messageType = APIMessageType(rawValue: 87)
    public init() {}
}

/// One advertisement, raw (BluetoothLERawAdvertisement).
public struct BluetoothLERawAdvertisement: ProtoMessage {
    public var address: UInt64 = 0
    public var rssi: Int32 = 0
    /// 0 public, 1 random (ESP-IDF's esp_ble_addr_type_t; 2 and 3 for RPAs).
    public var addressType: UInt32 = 0
    /// The advertising data (and scan response), AD structures as received.
    public var data: [UInt8] = []

    public init() {}
    public init(address: UInt64, rssi: Int32, addressType: UInt32, data: [UInt8]) {
        self.address = address
        self.rssi = rssi
        self.addressType = addressType
        self.data = data
    }
    public mutating func fields(_ f: inout some ProtoFieldWalker) throws {
        try f.scalar(1, "address", &address, .uint64)
        try f.scalar(2, "rssi", &rssi, .sint32)
        try f.scalar(3, "address_type", &addressType, .uint32)
        try f.bytes(4, "data", &data)
    }
}

/// BluetoothLERawAdvertisementsResponse (93): a batch of advertisements.
public struct BluetoothLERawAdvertisementsResponse: APIMessage {
    public static let messageType = APIMessageType(rawValue: 93)
    public var advertisements: [BluetoothLERawAdvertisement] = []

    public init() {}
    public init(advertisements: [BluetoothLERawAdvertisement]) { self.advertisements = advertisements }
    public mutating func fields(_ f: inout some ProtoFieldWalker) throws {
        try f.messages(1, "advertisements", &advertisements)
    }
}

/// What a BluetoothDeviceRequest asks for (BluetoothDeviceRequestType).
public struct BluetoothDeviceRequestType: ProtoEnum, Hashable, CustomStringConvertible {
    public let rawValue: Int32
    public init(rawValue: Int32) { self.rawValue = rawValue }
    /// The V1 connect, removed from ESPHome; clients send the V3 ones.
    public static let connect = BluetoothDeviceRequestType(rawValue: 0)
    public static let disconnect = BluetoothDeviceRequestType(rawValue: 1)
    public static let pair = BluetoothDeviceRequestType(rawValue: 2)
    public static let unpair = BluetoothDeviceRequestType(rawValue: 3)
    /// Connect; the proxy may keep the GATT database cached (remote caching).
    public static let connectV3WithCache = BluetoothDeviceRequestType(rawValue: 4)
    public static let connectV3WithoutCache = BluetoothDeviceRequestType(rawValue: 5)
    public static let clearCache = BluetoothDeviceRequestType(rawValue: 6)

    public var description: String {
        let names = ["connect", "disconnect", "pair", "unpair", "connect v3 with cache", "connect v3 without cache", "clear cache"]
        return rawValue >= 0 && Int(rawValue) < names.count ? names[Int(rawValue)] : "request type \(rawValue)"
    }
}

/// BluetoothDeviceRequest (68): connect, disconnect, pair, unpair, clear the cache.
public struct BluetoothDeviceRequest: APIMessage {
    public static let messageType = APIMessageType(rawValue: 68)
    public var address: UInt64 = 0
    public var requestType = BluetoothDeviceRequestType.connect
    /// Whether `addressType` was given (deprecated; newer clients always give it).
    public var hasAddressType = false
    public var addressType: UInt32 = 0

    public init() {}
    public init(address: UInt64, requestType: BluetoothDeviceRequestType, hasAddressType: Bool = false, addressType: UInt32 = 0) {
        self.address = address
        self.requestType = requestType
        self.hasAddressType = hasAddressType
        self.addressType = addressType
    }
    public mutating func fields(_ f: inout some ProtoFieldWalker) throws {
        try f.scalar(1, "address", &address, .uint64)
        try f.scalar(2, "request_type", &requestType, .enumeration)
        try f.scalar(3, "has_address_type", &hasAddressType, .bool)
        try f.scalar(4, "address_type", &addressType, .uint32)
    }
}

/// BluetoothDeviceConnectionResponse (69): a link came up or went down.
public struct BluetoothDeviceConnectionResponse: APIMessage {
    public static let messageType = APIMessageType(rawValue: 69)
    public var address: UInt64 = 0
    public var connected = false
    public var mtu: UInt32 = 0
    /// The reason a link failed or ended (an HCI status or a stack error), 0 for none.
    public var error: Int32 = 0

    public init() {}
    public init(address: UInt64, connected: Bool, mtu: UInt32 = 0, error: Int32 = 0) {
        self.address = address
        self.connected = connected
        self.mtu = mtu
        self.error = error
    }
    public mutating func fields(_ f: inout some ProtoFieldWalker) throws {
        try f.scalar(1, "address", &address, .uint64)
        try f.scalar(2, "connected", &connected, .bool)
        try f.scalar(3, "mtu", &mtu, .uint32)
        try f.scalar(4, "error", &error, .int32)
    }
}

/// SubscribeBluetoothConnectionsFreeRequest (80).
public struct SubscribeBluetoothConnectionsFreeRequest: EmptyAPIMessage {
    public static let messageType = APIMessageType(rawValue: 80)
    public init() {}
}

/// BluetoothConnectionsFreeResponse (81): the proxy's connection slots.
public struct BluetoothConnectionsFreeResponse: APIMessage {
    public static let messageType = APIMessageType(rawValue: 81)
    public var free: UInt32 = 0
    public var limit: UInt32 = 0
    /// The addresses holding a slot.
    public var allocated: [UInt64] = []

    public init() {}
    public init(free: UInt32, limit: UInt32, allocated: [UInt64]) {
        self.free = free
        self.limit = limit
        self.allocated = allocated
    }
    public mutating func fields(_ f: inout some ProtoFieldWalker) throws {
        try f.scalar(1, "free", &free, .uint32)
        try f.scalar(2, "limit", &limit, .uint32)
        try f.repeated(3, "allocated", &allocated, .uint64)
    }
}

/// The shape of BluetoothDevicePairingResponse (85), BluetoothDeviceUnpairingResponse
/// (86) and BluetoothDeviceClearCacheResponse (88): address, an outcome, an error.
public protocol BluetoothDeviceOutcome: APIMessage {
    var address: UInt64 { get set }
    var success: Bool { get set }
    var error: Int32 { get set }
    /// api.proto's name of the outcome field: "paired" or "success".
    static var outcomeField: String { get }
}

extension BluetoothDeviceOutcome {
    /// A response for `address`: the outcome and the error (0 for none).
    public init(address: UInt64, success: Bool, error: Int32 = 0) {
        self.init()
        self.address = address
        self.success = success
        self.error = error
    }
    /// address 1 (uint64), the outcome 2 (bool), error 3 (int32).
    public mutating func fields(_ f: inout some ProtoFieldWalker) throws {
        try f.scalar(1, "address", &address, .uint64)
        try f.scalar(2, Self.outcomeField, &success, .bool)
        try f.scalar(3, "error", &error, .int32)
    }
}

/// BluetoothDevicePairingResponse (85): `success` is api.proto's `paired`.
public struct BluetoothDevicePairingResponse: BluetoothDeviceOutcome {
    public static let messageType = APIMessageType(rawValue: 85)
    public static let outcomeField = "paired"
    public var address: UInt64 = 0
    public var success = false
    public var error: Int32 = 0
    public init() {}
}

/// BluetoothDeviceUnpairingResponse (86).
public struct BluetoothDeviceUnpairingResponse: BluetoothDeviceOutcome {
    public static let messageType = APIMessageType(rawValue: 86)
    public static let outcomeField = "success"
    public var address: UInt64 = 0
    public var success = false
    public var error: Int32 = 0
    public init() {}
}

/// BluetoothDeviceClearCacheResponse (88).
public struct BluetoothDeviceClearCacheResponse: BluetoothDeviceOutcome {
    public static let messageType = APIMessageType(rawValue: 88)
    public static let outcomeField = "success"
    public var address: UInt64 = 0
    public var success = false
    public var error: Int32 = 0
    public init() {}
}

/// The scanner's state (BluetoothScannerState).
public struct BluetoothScannerState: ProtoEnum, Hashable {
    public let rawValue: Int32
    public init(rawValue: Int32) { self.rawValue = rawValue }
    public static let idle = BluetoothScannerState(rawValue: 0)
    public static let starting = BluetoothScannerState(rawValue: 1)
    public static let running = BluetoothScannerState(rawValue: 2)
    public static let failed = BluetoothScannerState(rawValue: 3)
    public static let stopping = BluetoothScannerState(rawValue: 4)
    public static let stopped = BluetoothScannerState(rawValue: 5)
}

/// Passive or active scanning (BluetoothScannerMode).
public struct BluetoothScannerMode: ProtoEnum, Hashable {
    public let rawValue: Int32
    public init(rawValue: Int32) { self.rawValue = rawValue }
    public static let passive = BluetoothScannerMode(rawValue: 0)
    public static let active = BluetoothScannerMode(rawValue: 1)
}

/// BluetoothScannerStateResponse (126).
public struct BluetoothScannerStateResponse: APIMessage {
    public static let messageType = APIMessageType(rawValue: 126)
    public var state = BluetoothScannerState.idle
    public var mode = BluetoothScannerMode.passive
    /// The mode configured at start-up (a client's SetMode may differ).
    public var configuredMode = BluetoothScannerMode.passive

    public init() {}
    public init(state: BluetoothScannerState, mode: BluetoothScannerMode, configuredMode: BluetoothScannerMode) {
        self.state = state
        self.mode = mode
        self.configuredMode = configuredMode
    }
    public mutating func fields(_ f: inout some ProtoFieldWalker) throws {
        try f.scalar(1, "state", &state, .enumeration)
        try f.scalar(2, "mode", &mode, .enumeration)
        try f.scalar(3, "configured_mode", &configuredMode, .enumeration)
    }
}

/// BluetoothScannerSetModeRequest (127).
public struct BluetoothScannerSetModeRequest: APIMessage {
    public static let messageType = APIMessageType(rawValue: 127)
    public var mode = BluetoothScannerMode.passive

    public init() {}
    public init(mode: BluetoothScannerMode) { self.mode = mode }
    public mutating func fields(_ f: inout some ProtoFieldWalker) throws {
        try f.scalar(1, "mode", &mode, .enumeration)
    }
}
