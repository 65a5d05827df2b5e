// The ESPHome native API's messages a Bluetooth proxy needs, one struct per
// message: its type id and its fields, each with the field number and type
// of api.proto. Checked against:
//   aioesphomeapi/api.proto at esphome/aioesphomeapi 368a145f26164b707cde06c4aee76551fa7d3f46
//     (a copy of ESPHome's esphome/components/api/api.proto);
//   esphome/components/api/api.proto at esphome/esphome 33fdbbe30c4d9643300483bf2dfd85d992e2cf86
//     (October 2024: ids 3 and 4 as ConnectRequest / ConnectResponse; later
//     renamed Authentication*, and no longer served since ESPHome 2026.1).
// Field names in the declarations are api.proto's, so an error names the
// field as the .proto does. Fields a proxy never uses are left out; a
// decoder skips them like any unknown field.

/// HelloRequest (1), client to server, first on every connection.
public struct HelloRequest: APIMessage {
    public static let messageType = APIMessageType(rawValue: 1)
    /// The client's description, e.g. "Home Assistant 2025.1.0".
    public var clientInfo = ""
    public var apiVersionMajor: UInt32 = 0
    public var apiVersionMinor: UInt32 = 0

    public init() {}
    public init(clientInfo: String, apiVersionMajor: UInt32, apiVersionMinor: UInt32) {
        self.clientInfo = clientInfo
        self.apiVersionMajor = apiVersionMajor
        self.apiVersionMinor = apiVersionMinor
    }
    public mutating func fields(_ f: inout some ProtoFieldWalker) throws {
        try f.string(1, "client_info", &clientInfo)
        try f.scalar(2, "api_version_major", &apiVersionMajor, .uint32)
        try f.scalar(3, "api_version_minor", &apiVersionMinor, .uint32)
    }
}

/// HelloResponse (2): the API version the server speaks and its name.
public struct HelloResponse: APIMessage {
    public static let messageType = APIMessageType(rawValue: 2)
    public var apiVersionMajor: UInt32 = 0
    public var apiVersionMinor: UInt32 = 0
    /// A free-form server description (ESPHome sends its version string).
    public var serverInfo = ""
    /// The node's name (its hostname).
    public var name = ""

    public init() {}
    public init(apiVersionMajor: UInt32, apiVersionMinor: UInt32, serverInfo: String, name: String) {
        self.apiVersionMajor = apiVersionMajor
        self.apiVersionMinor = apiVersionMinor
        self.serverInfo = serverInfo
        self.name = name
    }
    public mutating func fields(_ f: inout some ProtoFieldWalker) throws {
        try f.scalar(1, "api_version_major", &apiVersionMajor, .uint32)
        try f.scalar(2, "api_version_minor", &apiVersionMinor, .uint32)
        try f.string(3, "server_info", &serverInfo)
        try f.string(4, "name", &name)
    }
}

/// ConnectRequest (3): password login, which older clients still send after
/// Hello (a Noise connection needs none; the server answers ConnectResponse).
public struct ConnectRequest: APIMessage {
    public static let messageType = APIMessageType(rawValue: 3)
    public var password = ""

    public init() {}
    public init(password: String) { self.password = password }
    public mutating func fields(_ f: inout some ProtoFieldWalker) throws {
        try f.string(1, "password", &password)
    }
}

/// ConnectResponse (4).
public struct ConnectResponse: APIMessage {
    public static let messageType = APIMessageType(rawValue: 4)
    public var invalidPassword = false

    public init() {}
    public init(invalidPassword: Bool) { self.invalidPassword = invalidPassword }
    public mutating func fields(_ f: inout some ProtoFieldWalker) throws {
        try f.scalar(1, "invalid_password", &invalidPassword, .bool)
    }
}

/// Why a side closes the connection (DisconnectRequest.reason).
public struct DisconnectReason: ProtoEnum, Hashable, CustomStringConvertible {
    public let rawValue: Int32
    public init(rawValue: Int32) { self.rawValue = rawValue }
    public static let unspecified = DisconnectReason(rawValue: 0)
    /// The device's provisioning window has closed.
    public static let provisioningClosed = DisconnectReason(rawValue: 1)
    public var description: String { rawValue == 0 ? "unspecified" : rawValue == 1 ? "provisioning closed" : "reason \(rawValue)" }
}

/// DisconnectRequest (5), either side: both close after the response.
public struct DisconnectRequest: APIMessage {
    public static let messageType = APIMessageType(rawValue: 5)
    public var reason = DisconnectReason.unspecified

    public init() {}
    public init(reason: DisconnectReason) { self.reason = reason }
    public mutating func fields(_ f: inout some ProtoFieldWalker) throws {
        try f.scalar(1, "reason", &reason, .enumeration)
    }
}

/// DisconnectResponse (6).
public struct DisconnectResponse: EmptyAPIMessage {
    public static let messageType = APIMessageType(rawValue: 6)
    public init() {}
}

/// PingRequest (7), either side.
public struct PingRequest: EmptyAPIMessage {
    public static let messageType = APIMessageType(rawValue: 7)
    public init() {}
}

/// PingResponse (8).
public struct PingResponse: EmptyAPIMessage {
    public static let messageType = APIMessageType(rawValue: 8)
    public init() {}
}

/// DeviceInfoRequest (9).
public struct DeviceInfoRequest: EmptyAPIMessage {
    public static let messageType = APIMessageType(rawValue: 9)
    public init() {}
}

/// The Bluetooth proxy's features (DeviceInfoResponse.bluetooth_proxy_feature_flags;
/// aioesphomeapi's `BluetoothProxyFeature`).
public struct BluetoothProxyFeatures: OptionSet, Hashable, Sendable {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }
    public static let passiveScan = BluetoothProxyFeatures(rawValue: 1 << 0)
    public static let activeConnections = BluetoothProxyFeatures(rawValue: 1 << 1)
    public static let remoteCaching = BluetoothProxyFeatures(rawValue: 1 << 2)
    public static let pairing = BluetoothProxyFeatures(rawValue: 1 << 3)
    public static let cacheClearing = BluetoothProxyFeatures(rawValue: 1 << 4)
    public static let rawAdvertisements = BluetoothProxyFeatures(rawValue: 1 << 5)
    /// BluetoothScannerStateResponse and BluetoothScannerSetModeRequest.
    public static let stateAndMode = BluetoothProxyFeatures(rawValue: 1 << 6)
    public static let connectionParamsSetting = BluetoothProxyFeatures(rawValue: 1 << 7)
}

/// DeviceInfoResponse (10): who the node is and what it offers. Left out:
/// the legacy version fields (11, 14), voice assistant (17), areas and
/// sub-devices (16, 20 - 22), Z-Wave (23, 24), serial proxies (25),
/// api_encryption_provisionable (26).
public struct DeviceInfoResponse: APIMessage {
    public static let messageType = APIMessageType(rawValue: 10)
    public var usesPassword = false
    /// The node's name (hostname).
    public var name = ""
    /// The node's MAC, "AC:BC:32:89:0E:A9".
    public var macAddress = ""
    public var esphomeVersion = ""
    public var compilationTime = ""
    public var model = ""
    public var hasDeepSleep = false
    public var projectName = ""
    public var projectVersion = ""
    public var webserverPort: UInt32 = 0
    public var manufacturer = ""
    public var friendlyName = ""
    public var bluetoothProxyFeatureFlags = BluetoothProxyFeatures()
    /// The Bluetooth controller's address, "AC:BC:32:89:0E:AA".
    public var bluetoothMacAddress = ""
    /// The node speaks Noise (and can take a new key).
    public var apiEncryptionSupported = false

    public init() {}
    public mutating func fields(_ f: inout some ProtoFieldWalker) throws {
        var flags = bluetoothProxyFeatureFlags.rawValue
        try f.scalar(1, "uses_password", &usesPassword, .bool)
        try f.string(2, "name", &name)
        try f.string(3, "mac_address", &macAddress)
        try f.string(4, "esphome_version", &esphomeVersion)
        try f.string(5, "compilation_time", &compilationTime)
        try f.string(6, "model", &model)
        try f.scalar(7, "has_deep_sleep", &hasDeepSleep, .bool)
        try f.string(8, "project_name", &projectName)
        try f.string(9, "project_version", &projectVersion)
        try f.scalar(10, "webserver_port", &webserverPort, .uint32)
        try f.string(12, "manufacturer", &manufacturer)
        try f.string(13, "friendly_name", &friendlyName)
        try f.scalar(15, "bluetooth_proxy_feature_flags", &flags, .uint32)
        try f.string(18, "bluetooth_mac_address", &bluetoothMacAddress)
        try f.scalar(19, "api_encryption_supported", &apiEncryptionSupported, .bool)
        bluetoothProxyFeatureFlags = BluetoothProxyFeatures(rawValue: flags)
    }
}

/// ListEntitiesRequest (11): a proxy has no entities and answers at once
/// with ListEntitiesDoneResponse.
public struct ListEntitiesRequest: EmptyAPIMessage {
    public static let messageType = APIMessageType(rawValue: 11)
    public init() {}
}

/// ListEntitiesDoneResponse (19).
public struct ListEntitiesDoneResponse: EmptyAPIMessage {
    public static let messageType = APIMessageType(rawValue: 19)
    public init() {}
}

/// SubscribeStatesRequest (20).
public struct SubscribeStatesRequest: EmptyAPIMessage {
    public static let messageType = APIMessageType(rawValue: 20)
    public init() {}
}

/// SubscribeHomeassistantServicesRequest (34).
public struct SubscribeHomeassistantServicesRequest: EmptyAPIMessage {
    public static let messageType = APIMessageType(rawValue: 34)
    public init() {}
}

/// SubscribeHomeAssistantStatesRequest (38).
public struct SubscribeHomeAssistantStatesRequest: EmptyAPIMessage {
    public static let messageType = APIMessageType(rawValue: 38)
    public init() {}
}

/// GetTimeRequest (36), server to client: asks Home Assistant for the time.
public struct GetTimeRequest: EmptyAPIMessage {
    public static let messageType = APIMessageType(rawValue: 36)
    public init() {}
}

/// How a DSTRule names its day (DSTRuleType).
public struct DSTRuleType: ProtoEnum, Hashable {
    public let rawValue: Int32
    public init(rawValue: Int32) { self.rawValue = rawValue }
    public static let none = DSTRuleType(rawValue: 0)
    public static let monthWeekDay = DSTRuleType(rawValue: 1)
    public static let julianNoLeap = DSTRuleType(rawValue: 2)
    public static let dayOfYear = DSTRuleType(rawValue: 3)
}

/// A daylight-saving transition rule (DSTRule, inside ParsedTimezone).
public struct DSTRule: ProtoMessage {
    public var timeSeconds: Int32 = 0
    public var day: UInt32 = 0
    public var type = DSTRuleType.none
    public var month: UInt32 = 0
    public var week: UInt32 = 0
    public var dayOfWeek: UInt32 = 0

    public init() {}
    public mutating func fields(_ f: inout some ProtoFieldWalker) throws {
        try f.scalar(1, "time_seconds", &timeSeconds, .sint32)
        try f.scalar(2, "day", &day, .uint32)
        try f.scalar(3, "type", &type, .enumeration)
        try f.scalar(4, "month", &month, .uint32)
        try f.scalar(5, "week", &week, .uint32)
        try f.scalar(6, "day_of_week", &dayOfWeek, .uint32)
    }
}

/// The client's time zone, parsed (ParsedTimezone, in GetTimeResponse).
public struct ParsedTimezone: ProtoMessage {
    public var stdOffsetSeconds: Int32 = 0
    public var dstOffsetSeconds: Int32 = 0
    public var dstStart: DSTRule?
    public var dstEnd: DSTRule?

    public init() {}
    public mutating func fields(_ f: inout some ProtoFieldWalker) throws {
        try f.scalar(1, "std_offset_seconds", &stdOffsetSeconds, .sint32)
        try f.scalar(2, "dst_offset_seconds", &dstOffsetSeconds, .sint32)
        try f.message(3, "dst_start", &dstStart)
        try f.message(4, "dst_end", &dstEnd)
    }
}

/// GetTimeResponse (37), client to server.
public struct GetTimeResponse: APIMessage {
    public static let messageType = APIMessageType(rawValue: 37)
    /// Seconds since 1970 (UTC).
    public var epochSeconds: UInt32 = 0
    /// A POSIX TZ string (deprecated in favour of `parsedTimezone`).
    public var timezone = ""
    public var parsedTimezone: ParsedTimezone?

    public init() {}
    public init(epochSeconds: UInt32, timezone: String = "", parsedTimezone: ParsedTimezone? = nil) {
        self.epochSeconds = epochSeconds
        self.timezone = timezone
        self.parsedTimezone = parsedTimezone
    }
    public mutating func fields(_ f: inout some ProtoFieldWalker) throws {
        try f.scalar(1, "epoch_seconds", &epochSeconds, .fixed32)
        try f.string(2, "timezone", &timezone)
        try f.message(3, "parsed_timezone", &parsedTimezone)
    }
}
