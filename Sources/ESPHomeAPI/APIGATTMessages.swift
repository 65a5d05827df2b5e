// The Bluetooth proxy's GATT messages: service discovery, reads, writes,
// notifications. Field numbers and types checked against
// aioesphomeapi/api.proto at esphome/aioesphomeapi
// 368a145f26164b707cde06c4aee76551fa7d3f46 (a copy of ESPHome's api.proto).
// `address` is the device's BD_ADDR as a number (see APIBluetoothMessages.swift);
// `handle` an ATT attribute handle.

/// A GATT UUID as the API carries it: 128-bit UUIDs as two uint64 (`uuid`,
/// most significant half first), 16- and 32-bit ones in `short_uuid` (API
/// 1.12 and later); only one of the two is set.
public struct BluetoothGATTUUID: Hashable, Sendable {
    /// Empty, or [high 64 bits, low 64 bits] of the 128-bit UUID.
    public var uuid: [UInt64] = []
    public var shortUUID: UInt32 = 0

    public init() {}
    public init(uuid: [UInt64] = [], shortUUID: UInt32 = 0) {
        self.uuid = uuid
        self.shortUUID = shortUUID
    }
}

/// A descriptor (BluetoothGATTDescriptor): uuid 1, handle 2, short_uuid 3.
public struct BluetoothGATTDescriptor: ProtoMessage {
    public var uuid = BluetoothGATTUUID()
    public var handle: UInt32 = 0

    public init() {}
    public init(uuid: BluetoothGATTUUID, handle: UInt32) {
        self.uuid = uuid
        self.handle = handle
    }
    public mutating func fields(_ f: inout some ProtoFieldWalker) throws {
        try f.repeated(1, "uuid", &uuid.uuid, .uint64)
        try f.scalar(2, "handle", &handle, .uint32)
        try f.scalar(3, "short_uuid", &uuid.shortUUID, .uint32)
    }
}

/// A characteristic (BluetoothGATTCharacteristic): uuid 1, handle 2
/// (its value handle), properties 3, descriptors 4, short_uuid 5.
public struct BluetoothGATTCharacteristic: ProtoMessage {
    public var uuid = BluetoothGATTUUID()
    public var handle: UInt32 = 0
    /// The Characteristic Properties octet (Core Vol 3 Part G 3.3.1.1).
    public var properties: UInt32 = 0
    public var descriptors: [BluetoothGATTDescriptor] = []

    public init() {}
    public init(uuid: BluetoothGATTUUID, handle: UInt32, properties: UInt32, descriptors: [BluetoothGATTDescriptor] = []) {
        self.uuid = uuid
        self.handle = handle
        self.properties = properties
        self.descriptors = descriptors
    }
    public mutating func fields(_ f: inout some ProtoFieldWalker) throws {
        try f.repeated(1, "uuid", &uuid.uuid, .uint64)
        try f.scalar(2, "handle", &handle, .uint32)
        try f.scalar(3, "properties", &properties, .uint32)
        try f.messages(4, "descriptors", &descriptors)
        try f.scalar(5, "short_uuid", &uuid.shortUUID, .uint32)
    }
}

/// A service (BluetoothGATTService): uuid 1, handle 2 (its declaration's),
/// characteristics 3, short_uuid 4.
public struct BluetoothGATTService: ProtoMessage {
    public var uuid = BluetoothGATTUUID()
    public var handle: UInt32 = 0
    public var characteristics: [BluetoothGATTCharacteristic] = []

    public init() {}
    public init(uuid: BluetoothGATTUUID, handle: UInt32, characteristics: [BluetoothGATTCharacteristic] = []) {
        self.uuid = uuid
        self.handle = handle
        self.characteristics = characteristics
    }
    public mutating func fields(_ f: inout some ProtoFieldWalker) throws {
        try f.repeated(1, "uuid", &uuid.uuid, .uint64)
        try f.scalar(2, "handle", &handle, .uint32)
        try f.messages(3, "characteristics", &characteristics)
        try f.scalar(4, "short_uuid", &uuid.shortUUID, .uint32)
    }
}

/// BluetoothGATTGetServicesRequest (70): discover the device's database.
public struct BluetoothGATTGetServicesRequest: APIMessage {
    public static let messageType = APIMessageType(rawValue: 70)
    public var address: UInt64 = 0

    public init() {}
    public init(address: UInt64) { self.address = address }
    public mutating func fields(_ f: inout some ProtoFieldWalker) throws {
        try f.scalar(1, "address", &address, .uint64)
    }
}

/// BluetoothGATTGetServicesResponse (71): some of the services (a proxy
/// sends several, then the Done response).
public struct BluetoothGATTGetServicesResponse: APIMessage {
    public static let messageType = APIMessageType(rawValue: 71)
    public var address: UInt64 = 0
    public var services: [BluetoothGATTService] = []

    public init() {}
    public init(address: UInt64, services: [BluetoothGATTService]) {
        self.address = address
        self.services = services
    }
    public mutating func fields(_ f: inout some ProtoFieldWalker) throws {
        try f.scalar(1, "address", &address, .uint64)
        try f.messages(2, "services", &services)
    }
}

/// BluetoothGATTGetServicesDoneResponse (72).
public struct BluetoothGATTGetServicesDoneResponse: APIMessage {
    public static let messageType = APIMessageType(rawValue: 72)
    public var address: UInt64 = 0

    public init() {}
    public init(address: UInt64) { self.address = address }
    public mutating func fields(_ f: inout some ProtoFieldWalker) throws {
        try f.scalar(1, "address", &address, .uint64)
    }
}

/// The shape of the GATT messages that name an attribute and nothing more:
/// address 1, handle 2.
public protocol BluetoothGATTHandleMessage: APIMessage {
    var address: UInt64 { get set }
    var handle: UInt32 { get set }
}

extension BluetoothGATTHandleMessage {
    /// The message for attribute `handle` of device `address`.
    public init(address: UInt64, handle: UInt32) {
        self.init()
        self.address = address
        self.handle = handle
    }
    /// address 1 (uint64), handle 2 (uint32).
    public mutating func fields(_ f: inout some ProtoFieldWalker) throws {
        try f.scalar(1, "address", &address, .uint64)
        try f.scalar(2, "handle", &handle, .uint32)
    }
}

/// BluetoothGATTReadRequest (73): read a characteristic value.
public struct BluetoothGATTReadRequest: BluetoothGATTHandleMessage {
    public static let messageType = APIMessageType(rawValue: 73)
    public var address: UInt64 = 0
    public var handle: UInt32 = 0
    public init() {}
}

/// BluetoothGATTReadDescriptorRequest (76).
public struct BluetoothGATTReadDescriptorRequest: BluetoothGATTHandleMessage {
    public static let messageType = APIMessageType(rawValue: 76)
    public var address: UInt64 = 0
    public var handle: UInt32 = 0
    public init() {}
}

/// BluetoothGATTWriteResponse (83): a write (with response) completed.
public struct BluetoothGATTWriteResponse: BluetoothGATTHandleMessage {
    public static let messageType = APIMessageType(rawValue: 83)
    public var address: UInt64 = 0
    public var handle: UInt32 = 0
    public init() {}
}

/// BluetoothGATTNotifyResponse (84): notifications were switched.
public struct BluetoothGATTNotifyResponse: BluetoothGATTHandleMessage {
    public static let messageType = APIMessageType(rawValue: 84)
    public var address: UInt64 = 0
    public var handle: UInt32 = 0
    public init() {}
}

/// The shape of the GATT messages that carry a value: address 1, handle 2, data 3.
public protocol BluetoothGATTDataMessage: APIMessage {
    var address: UInt64 { get set }
    var handle: UInt32 { get set }
    var data: [UInt8] { get set }
}

extension BluetoothGATTDataMessage {
    /// The message carrying `data` for attribute `handle` of device `address`.
    public init(address: UInt64, handle: UInt32, data: [UInt8]) {
        self.init()
        self.address = address
        self.handle = handle
        self.data = data
    }
    /// address 1 (uint64), handle 2 (uint32), data 3 (bytes).
    public mutating func fields(_ f: inout some ProtoFieldWalker) throws {
        try f.scalar(1, "address", &address, .uint64)
        try f.scalar(2, "handle", &handle, .uint32)
        try f.bytes(3, "data", &data)
    }
}

/// BluetoothGATTReadResponse (74): the value read.
public struct BluetoothGATTReadResponse: BluetoothGATTDataMessage {
    public static let messageType = APIMessageType(rawValue: 74)
    public var address: UInt64 = 0
    public var handle: UInt32 = 0
    public var data: [UInt8] = []
    public init() {}
}

/// BluetoothGATTWriteDescriptorRequest (77) (a CCCD write goes through
/// BluetoothGATTNotifyRequest instead).
public struct BluetoothGATTWriteDescriptorRequest: BluetoothGATTDataMessage {
    public static let messageType = APIMessageType(rawValue: 77)
    public var address: UInt64 = 0
    public var handle: UInt32 = 0
    public var data: [UInt8] = []
    public init() {}
}

/// BluetoothGATTNotifyDataResponse (79): a notification or indication's value.
public struct BluetoothGATTNotifyDataResponse: BluetoothGATTDataMessage {
    public static let messageType = APIMessageType(rawValue: 79)
    public var address: UInt64 = 0
    public var handle: UInt32 = 0
    public var data: [UInt8] = []
    public init() {}
}

/// BluetoothGATTWriteRequest (75): address 1, handle 2, response 3, data 4.
public struct BluetoothGATTWriteRequest: APIMessage {
    public static let messageType = APIMessageType(rawValue: 75)
    public var address: UInt64 = 0
    public var handle: UInt32 = 0
    /// Write Request (true) or Write Command (false).
    public var response = false
    public var data: [UInt8] = []

    public init() {}
    public init(address: UInt64, handle: UInt32, response: Bool, data: [UInt8]) {
        self.address = address
        self.handle = handle
        self.response = response
        self.data = data
    }
    public mutating func fields(_ f: inout some ProtoFieldWalker) throws {
        try f.scalar(1, "address", &address, .uint64)
        try f.scalar(2, "handle", &handle, .uint32)
        try f.scalar(3, "response", &response, .bool)
        try f.bytes(4, "data", &data)
    }
}

/// BluetoothGATTNotifyRequest (78): switch notifications of a characteristic on or off.
public struct BluetoothGATTNotifyRequest: APIMessage {
    public static let messageType = APIMessageType(rawValue: 78)
    public var address: UInt64 = 0
    public var handle: UInt32 = 0
    public var enable = false

    public init() {}
    public init(address: UInt64, handle: UInt32, enable: Bool) {
        self.address = address
        self.handle = handle
        self.enable = enable
    }
    public mutating func fields(_ f: inout some ProtoFieldWalker) throws {
        try f.scalar(1, "address", &address, .uint64)
        try f.scalar(2, "handle", &handle, .uint32)
        try f.scalar(3, "enable", &enable, .bool)
    }
}

/// BluetoothGATTErrorResponse (82): a GATT operation failed.
public struct BluetoothGATTErrorResponse: APIMessage {
    public static let messageType = APIMessageType(rawValue: 82)
    public var address: UInt64 = 0
    public var handle: UInt32 = 0
    /// The ATT error code, or a stack error.
    public var error: Int32 = 0

    public init() {}
    public init(address: UInt64, handle: UInt32, error: Int32) {
        self.address = address
        self.handle = handle
        self.error = error
    }
    public mutating func fields(_ f: inout some ProtoFieldWalker) throws {
        try f.scalar(1, "address", &address, .uint64)
        try f.scalar(2, "handle", &handle, .uint32)
        try f.scalar(3, "error", &error, .int32)
    }
}
