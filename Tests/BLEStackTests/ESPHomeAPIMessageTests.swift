import Testing
@testable import BLEWire
@testable import ESPHomeAPI

/// One of every declared message, each field away from its default.
private let samples: [any APIMessage] = [
    HelloRequest(clientInfo: "Home Assistant", apiVersionMajor: 1, apiVersionMinor: 10),
    HelloResponse(apiVersionMajor: 1, apiVersionMinor: 10, serverInfo: "attled", name: "attled-proxy"),
    ConnectRequest(password: "secret"), ConnectResponse(invalidPassword: true),
    DisconnectRequest(reason: .provisioningClosed), DisconnectResponse(), PingRequest(), PingResponse(),
    DeviceInfoRequest(), deviceInfo, ListEntitiesRequest(), ListEntitiesDoneResponse(), SubscribeStatesRequest(),
    SubscribeHomeassistantServicesRequest(), SubscribeHomeAssistantStatesRequest(), GetTimeRequest(),
    GetTimeResponse(epochSeconds: 0x65A0_BC00, timezone: "CET-1CEST,M3.5.0,M10.5.0/3", parsedTimezone: timezone),
    SubscribeBluetoothLEAdvertisementsRequest(flags: .rawAdvertisements),
    BluetoothLERawAdvertisementsResponse(advertisements: [
        BluetoothLERawAdvertisement(address: 0xA4C1_38F0_0D02, rssi: -60, addressType: 1, data: [2, 1, 6]),
        BluetoothLERawAdvertisement(address: 0x1122_3344_5566, rssi: 4, addressType: 0, data: []),
    ]),
    BluetoothDeviceRequest(address: 0x1122_3344_5566, requestType: .connectV3WithoutCache, hasAddressType: true, addressType: 1),
    BluetoothDeviceConnectionResponse(address: 0x1122_3344_5566, connected: true, mtu: 247, error: -2),
    BluetoothGATTGetServicesRequest(address: 7), services, BluetoothGATTGetServicesDoneResponse(address: 7),
    BluetoothGATTReadRequest(address: 7, handle: 3), BluetoothGATTReadResponse(address: 7, handle: 3, data: [0x64]),
    BluetoothGATTWriteRequest(address: 7, handle: 9, response: true, data: [1, 2]),
    BluetoothGATTReadDescriptorRequest(address: 7, handle: 4),
    BluetoothGATTWriteDescriptorRequest(address: 7, handle: 4, data: [1, 0]),
    BluetoothGATTNotifyRequest(address: 7, handle: 3, enable: true),
    BluetoothGATTNotifyDataResponse(address: 7, handle: 3, data: [0x63]),
    SubscribeBluetoothConnectionsFreeRequest(),
    BluetoothConnectionsFreeResponse(free: 1, limit: 3, allocated: [7, 0x1122_3344_5566]),
    BluetoothGATTErrorResponse(address: 7, handle: 3, error: 0x0A),
    BluetoothGATTWriteResponse(address: 7, handle: 9), BluetoothGATTNotifyResponse(address: 7, handle: 3),
    BluetoothDevicePairingResponse(address: 7, success: true, error: 0),
    BluetoothDeviceUnpairingResponse(address: 7, success: false, error: 5),
    UnsubscribeBluetoothLEAdvertisementsRequest(),
    BluetoothDeviceClearCacheResponse(address: 7, success: true),
    BluetoothScannerStateResponse(state: .running, mode: .active, configuredMode: .passive),
    BluetoothScannerSetModeRequest(mode: .active),
]

private var deviceInfo: DeviceInfoResponse {
    var d = DeviceInfoResponse()
    d.usesPassword = true; d.name = "attled-proxy"; d.macAddress = "A4:C1:38:F0:0D:01"; d.esphomeVersion = "2025.1.0"
    d.compilationTime = "Jan 1 2025"; d.model = "attled"; d.hasDeepSleep = true; d.projectName = "attled.proxy"
    d.projectVersion = "1.0"; d.webserverPort = 80; d.manufacturer = "attled"; d.friendlyName = "Attled Proxy"
    d.bluetoothProxyFeatureFlags = [.passiveScan, .activeConnections, .rawAdvertisements]
    d.bluetoothMacAddress = "A4:C1:38:F0:0D:02"; d.apiEncryptionSupported = true
    return d
}

private var timezone: ParsedTimezone {
    var rule = DSTRule()
    rule.timeSeconds = -3600; rule.day = 0; rule.type = .monthWeekDay; rule.month = 3; rule.week = 5; rule.dayOfWeek = 0
    var tz = ParsedTimezone()
    tz.stdOffsetSeconds = -3600; tz.dstOffsetSeconds = -7200; tz.dstStart = rule; tz.dstEnd = DSTRule()
    return tz
}

private let services = BluetoothGATTGetServicesResponse(address: 0xA4C1_38F0_0D02, services: [
    BluetoothGATTService(uuid: BluetoothGATTUUID(uuid: [0x0000_180F_0000_1000, 0x8000_0080_5F9B_34FB]), handle: 1, characteristics: [
        BluetoothGATTCharacteristic(uuid: BluetoothGATTUUID(shortUUID: 0x2A19), handle: 3, properties: 0x12, descriptors: [
            BluetoothGATTDescriptor(uuid: BluetoothGATTUUID(shortUUID: 0x2902), handle: 4),
        ]),
    ]),
])

private func roundTrips<M: APIMessage>(_ m: M) throws -> Bool {
    guard case let .known(back) = try APIMessages.decode(type: M.messageType, payload: m.protobuf) else { return false }
    return (back as? M) == m
}

/// Offsets where a top-level field ends in a canonical encoding.
private func fieldEnds(_ bytes: [UInt8]) throws -> Set<Int> {
    var r = ProtoReader(bytes)
    var ends: Set<Int> = [0]
    while !r.isAtEnd {
        try r.skip(try r.tag().wireType)
        ends.insert(r.offset)
    }
    return ends
}

@Suite("ESPHome API: message declarations")
struct ESPHomeAPIMessageTests {
    @Test("the table lists every sample's type once, and the ids are unique")
    func table() {
        #expect(APIMessages.byType.count == APIMessages.all.count)
        let sampleIDs = Set(samples.map { type(of: $0).messageType.rawValue })
        #expect(sampleIDs == Set(APIMessages.byType.keys))
        #expect(APIMessageType(rawValue: 93).description == "BluetoothLERawAdvertisementsResponse (93)")
        #expect(APIMessageType(rawValue: 12).description == "unknown message (12)")
    }

    @Test("every message round-trips through its declaration")
    func roundTrip() throws {
        for m in samples {
            #expect(try roundTrips(m), "\(m)")
        }
    }

    @Test("HelloRequest: the bytes Google's protobuf writes")
    func helloRequest() throws {
        // 0a 0d "aioesphomeapi": field 1 LEN, 13 bytes; 10 01: field 2 = 1; 18 0a: field 3 = 10.
        let bytes = hex("0a 0d 61 69 6f 65 73 70 68 6f 6d 65 61 70 69 10 01 18 0a")
        #expect(bytes == NoiseVector.clientPayload1)
        let m = HelloRequest(clientInfo: "aioesphomeapi", apiVersionMajor: 1, apiVersionMinor: 10)
        #expect(m.protobuf == bytes)
        #expect(try HelloRequest(protobuf: bytes) == m)
    }

    @Test("HelloResponse and a raw advertisement batch: Google's bytes")
    func serverMessages() throws {
        // 08 01, 10 0a: versions; 1a 06 "attled"; 22 0c "attled-proxy".
        let hello = HelloResponse(apiVersionMajor: 1, apiVersionMinor: 10, serverInfo: "attled", name: "attled-proxy")
        #expect(hello.protobuf == hex("08 01 10 0a 1a 06 61 74 74 6c 65 64 22 0c 61 74 74 6c 65 64 2d 70 72 6f 78 79"))
        #expect(hello.protobuf == NoiseVector.serverPayload1)
        // 0a 15: advertisements[0], 21 bytes: 08 + address 0xA4C138F00D02 in 7-bit groups
        // (82 9a c0 c7 93 98 29); 10 77: rssi -60, ZigZag 119; address_type 0 left out;
        // 22 09: data, 9 bytes.
        let batch = BluetoothLERawAdvertisementsResponse(advertisements: [
            BluetoothLERawAdvertisement(address: 0xA4C1_38F0_0D02, rssi: -60, addressType: 0, data: hex("02 01 06 05 09 61 74 74 31")),
        ])
        let bytes = hex("0a 15 08 82 9a c0 c7 93 98 29 10 77 22 09 02 01 06 05 09 61 74 74 31")
        #expect(batch.protobuf == bytes)
        #expect(bytes == NoiseVector.serverPayload2)
        #expect(try BluetoothLERawAdvertisementsResponse(protobuf: bytes) == batch)
    }

    @Test("BluetoothDeviceRequest: address, enum, bool, uint32")
    func deviceRequest() throws {
        // 08: field 1 varint, 0x112233445566 in 7-bit groups, least significant first:
        // 0x66 -> e6, then aa 91 9a a3 a4, last 04. 10 04: connect v3 with cache.
        // 18 01: has_address_type. 20 01: address_type random.
        let m = BluetoothDeviceRequest(address: 0x1122_3344_5566, requestType: .connectV3WithCache, hasAddressType: true, addressType: 1)
        let bytes = hex("08 e6 aa 91 9a a3 a4 04 10 04 18 01 20 01")
        #expect(m.protobuf == bytes)
        #expect(try BluetoothDeviceRequest(protobuf: bytes) == m)
        // An enum value this library does not name survives.
        #expect(try BluetoothDeviceRequest(protobuf: hex("10 63")).requestType.rawValue == 99)
    }

    @Test("GATT services: nested messages, the 128-bit UUID as two uint64, a short UUID")
    func gattServices() throws {
        // services[0] (12 25, 37 bytes): uuid unpacked as ESPHome writes it, 08 + 0x0000180F00001000,
        // 08 + 0x800000805F9B34FB; handle 1 (10 01); characteristics[0] (1a 0e): handle 3 (10 03),
        // properties 0x12 (18 12), descriptors[0] (22 05: handle 4, short_uuid 0x2902 = 18 82 52),
        // short_uuid 0x2A19 (28 99 54).
        let bytes = hex("""
            08 82 9a c0 c7 93 98 29 12 25 \
            08 80 a0 80 80 f0 81 06 08 fb e9 ec fc 85 90 80 80 80 01 10 01 \
            1a 0e 10 03 18 12 22 05 10 04 18 82 52 28 99 54
            """)
        #expect(services.protobuf == bytes)
        #expect(try BluetoothGATTGetServicesResponse(protobuf: bytes) == services)
        // Google's protobuf packs the repeated uuid (0a 11 ...): it decodes the same.
        let packed = hex("08 82 9a c0 c7 93 98 29 12 27 0a 11 80 a0 80 80 f0 81 06 fb e9 ec fc 85 90 80 80 80 01 10 01 1a 10 0a 02 01 02 10 03 18 12 22 06 0a 02 03 04 10 04")
        let decoded = try BluetoothGATTGetServicesResponse(protobuf: packed)
        #expect(decoded.services.first?.uuid.uuid == [0x0000_180F_0000_1000, 0x8000_0080_5F9B_34FB])
        #expect(decoded.services.first?.characteristics.first?.uuid.uuid == [1, 2])
        #expect(decoded.services.first?.characteristics.first?.descriptors.first == BluetoothGATTDescriptor(uuid: BluetoothGATTUUID(uuid: [3, 4]), handle: 4))
    }

    @Test("slots, errors, time, scanner state, pairing: hand-derived bytes")
    func smallVectors() throws {
        // allocated: one tag per element (18 ...), as ESPHome writes it; Google's packed 1a 07 ... reads the same.
        let free = BluetoothConnectionsFreeResponse(free: 2, limit: 3, allocated: [0xA4C1_38F0_0D02])
        #expect(free.protobuf == hex("08 02 10 03 18 82 9a c0 c7 93 98 29"))
        #expect(try BluetoothConnectionsFreeResponse(protobuf: hex("08 02 10 03 1a 07 82 9a c0 c7 93 98 29")) == free)
        // int32 -1: sign-extended, ten bytes.
        let error = BluetoothGATTErrorResponse(address: 1, handle: 0x0E, error: -1)
        #expect(error.protobuf == hex("08 01 10 0e 18 ff ff ff ff ff ff ff ff ff 01"))
        #expect(try BluetoothGATTErrorResponse(protobuf: error.protobuf) == error)
        // 0d: field 1 fixed32, little-endian; 12 03 "UTC".
        let time = GetTimeResponse(epochSeconds: 0x65A0_BC00, timezone: "UTC")
        #expect(time.protobuf == hex("0d 00 bc a0 65 12 03 55 54 43"))
        // Running (2), active (1); configured passive (0) left out.
        #expect(BluetoothScannerStateResponse(state: .running, mode: .active, configuredMode: .passive).protobuf == hex("08 02 10 01"))
        #expect(BluetoothDevicePairingResponse(address: 1, success: true).protobuf == hex("08 01 10 01"))
        #expect(BluetoothGATTWriteRequest(address: 0xA4C1_38F0_0D02, handle: 0x2A, response: true, data: [1, 2, 3]).protobuf
                == hex("08 82 9a c0 c7 93 98 29 10 2a 18 01 22 03 01 02 03"))
        #expect(PingRequest().protobuf == [])
    }

    @Test("DeviceInfoResponse: two-byte tags for fields 15 and up")
    func deviceInfoVector() throws {
        var d = DeviceInfoResponse()
        d.name = "attled-proxy"; d.macAddress = "A4:C1:38:F0:0D:01"; d.esphomeVersion = "2025.1.0"; d.model = "attled"
        d.manufacturer = "attled"; d.friendlyName = "Attled Proxy"; d.bluetoothProxyFeatureFlags = BluetoothProxyFeatures(rawValue: 63)
        d.bluetoothMacAddress = "A4:C1:38:F0:0D:02"; d.apiEncryptionSupported = true
        // Google's bytes for fields 2 - 18, then 98 01 01: field 19 (19 << 3 = 152 = 98 01) = true.
        // 78 3f: field 15 (120) = 63; 92 01 11: field 18 (146) LEN 17.
        let bytes = hex("""
            12 0c 61 74 74 6c 65 64 2d 70 72 6f 78 79 1a 11 41 34 3a 43 31 3a 33 38 3a 46 30 3a 30 44 3a 30 31 \
            22 08 32 30 32 35 2e 31 2e 30 32 06 61 74 74 6c 65 64 62 06 61 74 74 6c 65 64 \
            6a 0c 41 74 74 6c 65 64 20 50 72 6f 78 79 78 3f \
            92 01 11 41 34 3a 43 31 3a 33 38 3a 46 30 3a 30 44 3a 30 32 98 01 01
            """)
        #expect(d.protobuf == bytes)
        #expect(try DeviceInfoResponse(protobuf: bytes) == d)
    }

    @Test("every prefix of several encodings decodes to its fields so far, or is a truncation")
    func truncatedPrefixes() throws {
        let cases: [any APIMessage] = [deviceInfo, services, samples[18], samples[19], samples[20],
                                       GetTimeResponse(epochSeconds: 1, timezone: "UTC", parsedTimezone: timezone)]
        for m in cases {
            try checkPrefixes(m)
        }
    }

    private func checkPrefixes<M: APIMessage>(_ m: M) throws {
        let bytes = m.protobuf
        let ends = try fieldEnds(bytes)
        for prefix in prefixes(bytes) {
            if ends.contains(prefix.count) {
                // A prefix ending between fields is a message with fewer fields.
                #expect((try? M(protobuf: prefix))?.protobuf == prefix, "\(M.self) cut at \(prefix.count)")
            } else {
                let error = expectWireError("\(M.self) cut at \(prefix.count)") { try M(protobuf: prefix) }
                guard case .truncated = error else { Issue.record("\(M.self) cut at \(prefix.count): \(String(describing: error))"); continue }
            }
        }
    }

    @Test("an unknown message type decodes as unknown, its payload kept")
    func unknownType() throws {
        guard case let .unknown(type, payload) = try APIMessages.decode(type: APIMessageType(rawValue: 12), payload: [1, 2]) else {
            Issue.record("type 12 decoded as known"); return
        }
        #expect(type.rawValue == 12 && payload == [1, 2])
        guard case let .known(m) = try APIMessages.decode(type: PingRequest.messageType, payload: []) else {
            Issue.record("PingRequest not known"); return
        }
        #expect(m is PingRequest)
    }

    @Test("random payloads for every type never trap; what decodes re-encodes stably")
    func randomPayloads() {
        var g = ESPHomeTestRandom(state: 93)
        for _ in 0..<3_000 {
            let bytes = g.bytes(Int.random(in: 0...48, using: &g))
            for t in APIMessages.all {
                guard case let .known(m)? = try? APIMessages.decode(type: t.messageType, payload: bytes) else { continue }
                #expect((try? roundTrips(m)) == true, "\(t) from \(Hex.string(bytes))")
            }
        }
    }
}
