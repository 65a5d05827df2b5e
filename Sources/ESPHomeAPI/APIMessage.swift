import BLEWire

/// An ESPHome native API message type: api.proto's `option (id)`, carried in
/// every frame beside the payload. Open: a type this library does not
/// declare survives decoding (as `DecodedAPIMessage.unknown`) and prints as
/// its number. Both frame formats carry it in 16 bits (the Noise frame's
/// `u16`; ESPHome refuses a larger plaintext varint too).
public struct APIMessageType: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt16
    /// Any type id, declared or not.
    public init(rawValue: UInt16) { self.rawValue = rawValue }

    /// The declared message's name (its api.proto name), or nil.
    public var name: String? { APIMessages.byType[rawValue].map { String(describing: $0) } }
    public var description: String { "\(name ?? "unknown message") (\(rawValue))" }
}

/// A message of the ESPHome native API: a protobuf message with its type id.
public protocol APIMessage: ProtoMessage {
    /// api.proto's `option (id)`.
    static var messageType: APIMessageType { get }
}

/// A message with no fields (api.proto's `// Empty`): nothing to declare.
public protocol EmptyAPIMessage: APIMessage {}

extension EmptyAPIMessage {
    /// No fields: the payload is empty, and any fields a newer peer sends are skipped.
    public mutating func fields(_ f: inout some ProtoFieldWalker) throws {}
}

/// A message as it came off a frame: one of ours, decoded, or a type this
/// library does not declare, kept as its payload so the caller can skip
/// (or log) it and read on.
public enum DecodedAPIMessage: Sendable {
    case known(any APIMessage)
    case unknown(APIMessageType, [UInt8])

    /// The message's type id either way.
    public var type: APIMessageType {
        switch self {
        case let .known(m): return Swift.type(of: m).messageType
        case let .unknown(t, _): return t
        }
    }
}

/// The table of every declared message: what a frame's type id decodes to.
public enum APIMessages {
    /// Every message this library declares (`APIMessages.swift`,
    /// `APIBluetoothMessages.swift`, `APIGATTMessages.swift`).
    public static let all: [any APIMessage.Type] = [
        HelloRequest.self, HelloResponse.self, ConnectRequest.self, ConnectResponse.self,
        DisconnectRequest.self, DisconnectResponse.self, PingRequest.self, PingResponse.self,
        DeviceInfoRequest.self, DeviceInfoResponse.self, ListEntitiesRequest.self, ListEntitiesDoneResponse.self,
        SubscribeStatesRequest.self, SubscribeHomeassistantServicesRequest.self, SubscribeHomeAssistantStatesRequest.self,
        GetTimeRequest.self, GetTimeResponse.self,
        SubscribeBluetoothLEAdvertisementsRequest.self, BluetoothLERawAdvertisementsResponse.self,
        BluetoothDeviceRequest.self, BluetoothDeviceConnectionResponse.self,
        BluetoothGATTGetServicesRequest.self, BluetoothGATTGetServicesResponse.self, BluetoothGATTGetServicesDoneResponse.self,
        BluetoothGATTReadRequest.self, BluetoothGATTReadResponse.self, BluetoothGATTWriteRequest.self,
        BluetoothGATTReadDescriptorRequest.self, BluetoothGATTWriteDescriptorRequest.self,
        BluetoothGATTNotifyRequest.self, BluetoothGATTNotifyDataResponse.self,
        SubscribeBluetoothConnectionsFreeRequest.self, BluetoothConnectionsFreeResponse.self,
        BluetoothGATTErrorResponse.self, BluetoothGATTWriteResponse.self, BluetoothGATTNotifyResponse.self,
        BluetoothDevicePairingResponse.self, BluetoothDeviceUnpairingResponse.self,
        UnsubscribeBluetoothLEAdvertisementsRequest.self, BluetoothDeviceClearCacheResponse.self,
        BluetoothScannerStateResponse.self, BluetoothScannerSetModeRequest.self,
    ]

    /// `all` by type id (a test holds the ids unique).
    static let byType: [UInt16: any APIMessage.Type] =
        Dictionary(all.map { ($0.messageType.rawValue, $0) }, uniquingKeysWith: { first, _ in first })

    /// Decodes a frame's payload by its type id.
    /// - Returns: `.known` with the message, or `.unknown` with the payload
    ///   for a type not in `all`.
    /// - Throws: `WireError` when a declared message's payload is not valid protobuf for it.
    public static func decode(type: APIMessageType, payload: [UInt8]) throws -> DecodedAPIMessage {
        guard let m = byType[type.rawValue] else { return .unknown(type, payload) }
        return .known(try m.init(protobuf: payload))
    }

    /// A message's type id and payload, for a frame encoder.
    public static func encode(_ message: some APIMessage) -> (type: APIMessageType, payload: [UInt8]) {
        (type(of: message).messageType, message.protobuf)
    }
}
