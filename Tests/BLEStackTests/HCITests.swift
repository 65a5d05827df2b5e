import Testing
@testable import BLEWire
@testable import BLETransport
@testable import BLEHCI

private let peer = DeviceAddress(BDAddress("C0:11:22:33:44:55")!, .random)

// MARK: - Commands

@Suite("HCI command encoders")
struct HCICommandTests {
    @Test("commands without parameters", arguments: [
        (HCI.Reset().command, "01 03 0c 00"),
        (HCI.ReadLocalVersion().command, "01 01 10 00"),
        (HCI.ReadLocalSupportedCommands().command, "01 02 10 00"),
        (HCI.ReadLocalSupportedFeatures().command, "01 03 10 00"),
        (HCI.ReadBufferSize().command, "01 05 10 00"),
        (HCI.ReadBDADDR().command, "01 09 10 00"),
        (HCI.LEReadBufferSize().command, "01 02 20 00"),
        (HCI.LEReadLocalSupportedFeatures().command, "01 03 20 00"),
        (HCI.LECreateConnectionCancel().command, "01 0e 20 00"),
    ])
    func noParameters(command: HCICommand, wire: String) throws {
        #expect(command.packet.h4 == hex(wire))
        #expect(try HCICommand.decode(command.encoded) == command)
    }

    @Test("Set Event Mask carries the standard mask, little-endian")
    func setEventMask() throws {
        let c = HCI.SetEventMask(mask: EventMasks.standard).command
        #expect(c.packet.h4 == hex("01 01 0c 08 90 88 00 02 00 80 00 20"))
        #expect(try HCICommand.decode(c.encoded) == c)
    }

    @Test("LE Set Event Mask carries the LE mask")
    func leSetEventMask() throws {
        let c = HCI.LESetEventMask(mask: EventMasks.le).command
        #expect(c.packet.h4 == hex("01 01 20 08 5f 1a 08 00 00 00 00 00"))
        #expect(try HCICommand.decode(c.encoded) == c)
    }

    @Test("LE Set Random Address writes the address in wire order")
    func leSetRandomAddress() throws {
        let c = HCI.LESetRandomAddress(address: BDAddress("C0:11:22:33:44:55")!).command
        #expect(c.packet.h4 == hex("01 05 20 06 55 44 33 22 11 c0"))
    }

    @Test("Disconnect: handle and reason (default Remote User Terminated 0x13)")
    func disconnect() {
        #expect(HCI.Disconnect(handle: 0x0001).command.packet.h4 == hex("01 06 04 03 01 00 13"))
        #expect(HCI.Disconnect(handle: 0x0EFF, reason: .localHostTerminated).command.packet.h4 == hex("01 06 04 03 ff 0e 16"))
    }

    @Test("LE Set Scan Enable and its extended form")
    func scanEnable() {
        #expect(HCI.LESetScanEnable(enable: true, filterDuplicates: false).command.packet.h4 == hex("01 0c 20 02 01 00"))
        #expect(HCI.LESetScanEnable(enable: false, filterDuplicates: true).command.packet.h4 == hex("01 0c 20 02 00 01"))
        #expect(HCI.LESetExtendedScanEnable(enable: true, filterDuplicates: false).command.packet.h4 == hex("01 42 20 06 01 00 00 00 00 00"))
        #expect(HCI.LESetExtendedScanEnable(enable: true, filterDuplicates: true, duration: 0x03E8, period: 1).command.packet.h4
                == hex("01 42 20 06 01 01 e8 03 01 00"))
    }

    @Test("LE Set Scan Parameters encodes and decodes back")
    func scanParameters() throws {
        let p = LEScanParameters(active: true, interval: 0x0010, window: 0x0010, ownAddressType: .random, filterPolicy: 0)
        #expect(p.command.packet.h4 == hex("01 0b 20 07 01 10 00 10 00 01 00"))
        #expect(try LEScanParameters.decode(p.command.parameters) == p)
        let passive = LEScanParameters(active: false, interval: 0x00A0, window: 0x0050, ownAddressType: .public, filterPolicy: 1)
        #expect(passive.command.parameters == hex("00 a0 00 50 00 00 01"))
        #expect(try LEScanParameters.decode(passive.command.parameters) == passive)
    }

    @Test("LE Set Extended Scan Parameters encodes (1M PHY) and decodes back")
    func extendedScanParameters() throws {
        let p = LEScanParameters(active: true, interval: 0x0010, window: 0x0010, ownAddressType: .random, filterPolicy: 0)
        #expect(p.extendedCommand.packet.h4 == hex("01 41 20 08 01 00 01 01 10 00 10 00"))
        let d = try LEScanParameters.decodeExtended(p.extendedCommand.parameters)
        #expect(d.params == p)
        #expect(d.phys == 0x01)
    }

    @Test("LE Set Extended Scan Parameters with two PHYs decodes the first; with none it is invalid")
    func extendedScanParametersPHYs() throws {
        let two = hex("00 00 05 01 10 00 10 00 00 20 00 20 00")
        let d = try LEScanParameters.decodeExtended(two)
        #expect(d.phys == 0x05)
        #expect(d.params == LEScanParameters(active: true, interval: 0x10, window: 0x10, ownAddressType: .public, filterPolicy: 0))
        #expect(expectWireError { try LEScanParameters.decodeExtended(hex("00 00 00")) } == .invalid(field: "Scanning_PHYs", reason: "no PHY selected"))
        #expect(throws: WireError.self) { try LEScanParameters.decodeExtended(hex("00 00 05 01 10 00 10 00")) }
    }

    @Test("LE Create Connection matches the bytes seen on the wire (peer C0:11:22:33:44:55 random, own random)")
    func createConnection() throws {
        let c = LECreateConnection(peer: peer, ownAddressType: .random)
        let wire = hex("01 0d 20 19 10 00 10 00 00 01 55 44 33 22 11 c0 01 18 00 28 00 00 00 f4 01 00 00 00 00")
        #expect(c.command.packet.h4 == wire)
        let back = try LECreateConnection.decode(Array(wire.dropFirst(4)))
        #expect(back == c)
        #expect(try HCICommand.decode(Array(wire.dropFirst())) == c.command)
    }

    @Test("LE Extended Create Connection encodes (1M PHY) and decodes back")
    func extendedCreateConnection() throws {
        let c = LECreateConnection(peer: peer, ownAddressType: .random)
        #expect(c.extendedCommand.packet.h4
                == hex("01 43 20 1a 00 01 01 55 44 33 22 11 c0 01 10 00 10 00 18 00 28 00 00 00 f4 01 00 00 00 00"))
        #expect(try LECreateConnection.decodeExtended(c.extendedCommand.parameters) == c)
        #expect(throws: WireError.self) { try LECreateConnection.decodeExtended(hex("00 01 01 55 44 33 22 11 c0 00")) }
    }

    @Test("LE Connection Update encodes and decodes back")
    func connectionUpdate() throws {
        let u = LEConnectionUpdate(handle: 0x0001, parameters: ConnectionParameters(intervalMin: 0x18, intervalMax: 0x28, latency: 0, supervisionTimeout: 0x190))
        #expect(u.command.packet.h4 == hex("01 13 20 0e 01 00 18 00 28 00 00 00 90 01 00 00 00 00"))
        #expect(try LEConnectionUpdate.decode(u.command.parameters) == u)
    }

    @Test("command decoders refuse every truncated prefix and trailing bytes")
    func commandDecodersStrict() {
        let cases: [(String, ([UInt8]) throws -> Any)] = [
            ("01 10 00 10 00 01 00", { try LEScanParameters.decode($0) }),
            ("01 00 01 01 10 00 10 00", { try LEScanParameters.decodeExtended($0) }),
            ("10 00 10 00 00 01 55 44 33 22 11 c0 01 18 00 28 00 00 00 f4 01 00 00 00 00", { try LECreateConnection.decode($0) }),
            ("00 01 01 55 44 33 22 11 c0 01 10 00 10 00 18 00 28 00 00 00 f4 01 00 00 00 00", { try LECreateConnection.decodeExtended($0) }),
            ("01 00 18 00 28 00 00 00 90 01 00 00 00 00", { try LEConnectionUpdate.decode($0) }),
            ("0d 20 02 01 00", { try HCICommand.decode($0) }),
        ]
        for (vector, decode) in cases {
            let full = hex(vector)
            #expect(throws: Never.self) { _ = try decode(full) }
            for p in prefixes(full) {
                #expect(throws: WireError.self, "\(vector) cut to \(p.count)") { _ = try decode(p) }
            }
            #expect(throws: WireError.self, "\(vector) + 1") { _ = try decode(full + [0x00]) }
        }
    }

    @Test("opcodes split into OGF and OCF, and print their names")
    func opcodes() {
        #expect(LECreateConnection.opcode.ogf == 0x08)
        #expect(LECreateConnection.opcode.ocf == 0x000D)
        #expect(HCIOpcode(ogf: 0x03, ocf: 0x003) == HCI.Reset.opcode)
        #expect(HCI.Reset.opcode.description == "Reset (0x0c03)")
        #expect(HCIOpcode(rawValue: 0xFC01).name == "Vendor Command")
        #expect(HCIOpcode(rawValue: 0x2099).description == "Unknown Command (0x2099)")
        #expect(HCIStatus.commandDisallowed.description == "Command Disallowed (0x0c)")
        #expect(HCIStatus(rawValue: 0x7E).description == "Unknown status (0x7e)")
    }
}

// MARK: - Events

/// One event vector (bytes after the H4 indicator) and its decoding.
struct EventVector: Sendable, CustomTestStringConvertible {
    let name: String
    let wire: String
    let expected: HCIEvent
    /// The smallest parameter length that still decodes (Command Complete's
    /// return parameters are open-ended); nil: only the full length does.
    var minimumParameters: Int? = nil
    var testDescription: String { name }
}

private let leConnectionComplete = LEConnectionComplete(
    status: .success, handle: 0x0001, role: 0, peer: peer, localRPA: nil, peerRPA: nil,
    interval: 0x0018, latency: 0, supervisionTimeout: 0x01F4, centralClockAccuracy: 0, enhanced: false)

private let enhancedConnectionComplete = LEConnectionComplete(
    status: .success, handle: 0x0002, role: 0, peer: peer,
    localRPA: BDAddress("46:05:04:03:02:01"), peerRPA: BDAddress("56:15:14:13:12:11"),
    interval: 0x0028, latency: 0, supervisionTimeout: 0x00C8, centralClockAccuracy: 1, enhanced: true)

private let legacyReports: [AdvertisingReport] = [
    AdvertisingReport(eventType: 0x13, legacyType: 0, address: DeviceAddress(BDAddress("C0:11:22:33:44:55")!, .public), rssi: -59, data: hex("02 01 06")),
    AdvertisingReport(eventType: 0x1B, legacyType: 4, address: DeviceAddress(BDAddress("11:22:33:44:55:66")!, .random), rssi: -80, data: hex("04 09 41 42 43")),
]

private let extendedReport: AdvertisingReport = {
    var r = AdvertisingReport(eventType: 0x0001, legacyType: nil, address: peer, rssi: -59,
                              data: hex("0b 09 43 61 73 73 61 72 54 65 63 68"))
    r.primaryPHY = 1; r.secondaryPHY = 0; r.sid = 0xFF; r.txPower = 127; r.periodicInterval = 0
    return r
}()

private let directedReport: AdvertisingReport = {
    var r = AdvertisingReport(eventType: 0x0005, legacyType: nil, address: peer, rssi: -40, data: [])
    r.primaryPHY = 1; r.secondaryPHY = 2; r.sid = 3; r.txPower = -4; r.periodicInterval = 0x0010
    r.directAddress = DeviceAddress(BDAddress("C1:22:33:44:55:66")!, .random)
    return r
}()

let eventVectors: [EventVector] = [
    EventVector(name: "Command Complete (Reset)", wire: "0e 04 01 03 0c 00",
                expected: .commandComplete(CommandComplete(numCommandPackets: 1, opcode: HCI.Reset.opcode, returnParameters: [0])), minimumParameters: 3),
    EventVector(name: "Command Complete (Read BD_ADDR)", wire: "0e 0a 01 09 10 00 55 44 33 22 11 c0",
                expected: .commandComplete(CommandComplete(numCommandPackets: 1, opcode: HCI.ReadBDADDR.opcode, returnParameters: hex("00 55 44 33 22 11 c0"))),
                minimumParameters: 3),
    EventVector(name: "Command Status", wire: "0f 04 00 01 0d 20",
                expected: .commandStatus(CommandStatus(status: .success, numCommandPackets: 1, opcode: LECreateConnection.opcode))),
    EventVector(name: "Disconnection Complete", wire: "05 04 00 01 00 13",
                expected: .disconnectionComplete(DisconnectionComplete(status: .success, handle: 1, reason: .remoteUserTerminated))),
    EventVector(name: "Number Of Completed Packets", wire: "13 09 02 01 00 02 00 40 00 01 00",
                expected: .numberOfCompletedPackets([.init(handle: 1, count: 2), .init(handle: 0x40, count: 1)])),
    EventVector(name: "Hardware Error", wire: "10 01 07", expected: .hardwareError(0x07)),
    EventVector(name: "Data Buffer Overflow", wire: "1a 01 01", expected: .dataBufferOverflow(linkType: 1)),
    EventVector(name: "LE Connection Complete", wire: "3e 13 01 00 01 00 00 01 55 44 33 22 11 c0 18 00 00 00 f4 01 00",
                expected: .leConnectionComplete(leConnectionComplete)),
    EventVector(name: "LE Enhanced Connection Complete",
                wire: "3e 1f 0a 00 02 00 00 01 55 44 33 22 11 c0 01 02 03 04 05 46 11 12 13 14 15 56 28 00 00 00 c8 00 01",
                expected: .leConnectionComplete(enhancedConnectionComplete)),
    EventVector(name: "LE Enhanced Connection Complete v2",
                wire: "3e 22 29 00 02 00 00 01 55 44 33 22 11 c0 01 02 03 04 05 46 11 12 13 14 15 56 28 00 00 00 c8 00 01 00 ff ff",
                expected: .leConnectionComplete(enhancedConnectionComplete)),
    EventVector(name: "LE Advertising Report (two reports)",
                wire: "3e 1e 02 02 00 00 55 44 33 22 11 c0 03 02 01 06 c5 04 01 66 55 44 33 22 11 05 04 09 41 42 43 b0",
                expected: .leAdvertisingReport(legacyReports, extended: false)),
    EventVector(name: "LE Extended Advertising Report",
                wire: "3e 26 0d 01 01 00 01 55 44 33 22 11 c0 01 00 ff 7f c5 00 00 00 00 00 00 00 00 00 0c 0b 09 43 61 73 73 61 72 54 65 63 68",
                expected: .leAdvertisingReport([extendedReport], extended: true)),
    EventVector(name: "LE Extended Advertising Report (directed)",
                wire: "3e 1a 0d 01 05 00 01 55 44 33 22 11 c0 01 02 03 fc d8 10 00 01 66 55 44 33 22 c1 00",
                expected: .leAdvertisingReport([directedReport], extended: true)),
    EventVector(name: "LE Connection Update Complete", wire: "3e 0a 03 00 01 00 28 00 00 00 90 01",
                expected: .leConnectionUpdateComplete(LEConnectionUpdateComplete(status: .success, handle: 1, interval: 0x28, latency: 0, supervisionTimeout: 0x190))),
    EventVector(name: "LE Data Length Change", wire: "3e 0b 07 01 00 fb 00 48 08 1b 00 48 01",
                expected: .leDataLengthChange(LEDataLengthChange(handle: 1, maxTxOctets: 251, maxTxTime: 0x0848, maxRxOctets: 27, maxRxTime: 0x0148))),
]

@Suite("HCI event decoders")
struct HCIEventTests {
    @Test("each event vector decodes to its value", arguments: eventVectors)
    func decodes(v: EventVector) throws {
        #expect(try HCIEvent.decode(hex(v.wire)) == v.expected)
    }

    @Test("every truncated prefix of every event vector throws WireError (never traps)", arguments: eventVectors)
    func truncatedPrefixes(v: EventVector) {
        for p in prefixes(hex(v.wire)) {
            #expect(throws: WireError.self, "cut to \(p.count)") { try HCIEvent.decode(p) }
        }
    }

    @Test("parameters cut short with a consistent length field throw WireError", arguments: eventVectors)
    func innerTruncation(v: EventVector) {
        let full = hex(v.wire)
        let params = Array(full.dropFirst(2))
        let minimum = v.minimumParameters ?? params.count
        for n in 0..<params.count {
            let cut = [full[0], UInt8(n)] + params.prefix(n)
            if n >= minimum {
                #expect(throws: Never.self, "\(n) parameter bytes") { try HCIEvent.decode(cut) }
            } else {
                #expect(throws: WireError.self, "\(n) parameter bytes") { try HCIEvent.decode(cut) }
            }
        }
    }

    @Test("a byte after the announced parameters throws trailingBytes", arguments: eventVectors)
    func trailingAfterPacket(v: EventVector) {
        let e = expectWireError { try HCIEvent.decode(hex(v.wire) + [0x00]) }
        guard case .trailingBytes(_, 1)? = e else { Issue.record("got \(String(describing: e))"); return }
    }

    @Test("fixed-size events with an extra parameter byte inside the length throw",
          arguments: ["0f 05 00 01 0d 20 00", "05 05 00 01 00 13 00", "13 06 01 01 00 01 00 00",
                      "3e 14 01 00 01 00 00 01 55 44 33 22 11 c0 18 00 00 00 f4 01 00 00",
                      "3e 0b 03 00 01 00 28 00 00 00 90 01 00", "3e 0c 07 01 00 fb 00 48 08 1b 00 48 01 00",
                      "3e 0d 02 01 00 00 55 44 33 22 11 c0 00 c5 00", "3e 1b 0d 01 05 00 01 55 44 33 22 11 c0 01 02 03 fc d8 10 00 01 66 55 44 33 22 c1 00 00"])
    func trailingInsideParameters(wire: String) {
        let e = expectWireError { try HCIEvent.decode(hex(wire)) }
        guard case .trailingBytes? = e else { Issue.record("got \(String(describing: e))"); return }
    }

    @Test("the connection handle is masked to 12 bits")
    func handleMask() throws {
        #expect(try HCIEvent.decode(hex("05 04 00 01 f0 13")) == .disconnectionComplete(DisconnectionComplete(status: .success, handle: 1, reason: .remoteUserTerminated)))
        #expect(try HCIEvent.decode(hex("13 05 01 40 30 02 00")) == .numberOfCompletedPackets([.init(handle: 0x40, count: 2)]))
    }

    @Test("an advertising report with zero reports is invalid, legacy or extended")
    func zeroReports() {
        #expect(expectWireError { try HCIEvent.decode(hex("3e 02 02 00")) } == .invalid(field: "Num_Reports", reason: "0 reports"))
        #expect(expectWireError { try HCIEvent.decode(hex("3e 02 0d 00")) } == .invalid(field: "Num_Reports", reason: "0 reports"))
    }

    @Test("a legacy report with more than 31 data bytes is invalid")
    func legacyDataTooLong() {
        let data = [UInt8](repeating: 0, count: 32)
        let params = hex("02 01 00 00 55 44 33 22 11 c0 20") + data + [0xc5]
        #expect(expectWireError { try HCIEvent.decode([0x3E, UInt8(params.count)] + params) } == .invalid(field: "Data_Length", reason: "32 > 31"))
    }

    @Test("legacy event types map to extended type bits", arguments: [
        (UInt8(0), UInt16(0x13), "ADV_IND"), (1, 0x15, "ADV_DIRECT_IND"), (2, 0x12, "ADV_SCAN_IND"),
        (3, 0x10, "ADV_NONCONN_IND"), (4, 0x1B, "SCAN_RSP"), (9, 0x10, "reserved 0x09"),
    ])
    func legacyTypes(t: UInt8, bits: UInt16, name: String) {
        #expect(AdvertisingReport.extendedType(legacy: t) == bits)
        #expect(AdvertisingReport.legacyTypeName(t) == name)
    }

    @Test("report flags read the extended event type bits")
    func reportFlags() {
        var r = AdvertisingReport(eventType: 0x001B, legacyType: 4, address: peer, rssi: 0, data: [])
        #expect(r.isConnectable && r.isScannable && !r.isDirected && r.isScanResponse && r.isLegacyPDU && r.dataStatus == 0)
        r.eventType = 0x0024
        #expect(!r.isConnectable && r.isDirected && r.dataStatus == 1)
        r.eventType = 0x0040
        #expect(r.dataStatus == 2)
    }

    @Test("unknown LE subevents and unknown events pass through with their bytes")
    func passThrough() throws {
        #expect(try HCIEvent.decode(hex("3e 06 0c 00 01 00 02 02")) == .leMeta(.phyUpdateComplete, hex("00 01 00 02 02")))
        #expect(try HCIEvent.decode(hex("ff 03 aa bb cc")) == .other(.vendor, hex("aa bb cc")))
        #expect(try HCIEvent.decode(hex("08 04 00 01 00 01")) == .other(.encryptionChange, hex("00 01 00 01")))
        #expect(HCIEventCode(rawValue: 0x77).description == "Unknown Event (0x77)")
        #expect(LESubevent(rawValue: 0x77).description == "Unknown LE Subevent (0x77)")
        #expect(LESubevent.extendedAdvertisingReport.description == "LE Extended Advertising Report (0x0d)")
    }

    @Test("Command Complete status is the first return parameter, nil when there are none")
    func commandCompleteStatus() throws {
        guard case .commandComplete(let cc) = try HCIEvent.decode(hex("0e 04 01 05 20 12")) else { Issue.record("not CC"); return }
        #expect(cc.status == .invalidParameters)
        guard case .commandComplete(let nop) = try HCIEvent.decode(hex("0e 03 01 00 00")) else { Issue.record("not CC"); return }
        #expect(nop.status == nil)
        #expect(nop.opcode.rawValue == 0)
    }
}

// MARK: - Return parameters

@Suite("HCI return parameters")
struct ReturnParameterTests {
    @Test("Read Local Version Information")
    func localVersion() throws {
        let v = try LocalVersion.decode(hex("00 0c 34 12 0c 5f 00 78 56"))
        #expect(v.hciVersion == 0x0C && v.hciRevision == 0x1234 && v.lmpVersion == 0x0C && v.manufacturer == 0x005F && v.lmpSubversion == 0x5678)
        #expect(LocalVersion.coreVersionName(0x0C) == "5.3")
        #expect(LocalVersion.coreVersionName(6) == "4.0")
        #expect(LocalVersion.coreVersionName(0x40) == "unknown (64)")
        for p in prefixes(hex("00 0c 34 12 0c 5f 00 78 56")) {
            #expect(throws: WireError.self) { try LocalVersion.decode(p) }
        }
    }

    @Test("LE Read Buffer Size and Read Buffer Size")
    func bufferSizes() throws {
        #expect(try BufferSize.decodeLE(hex("00 1b 00 40")) == BufferSize(aclLength: 27, aclPackets: 64))
        #expect(try BufferSize.decodeBREDR(hex("00 fd 03 40 08 00")) == BufferSize(aclLength: 1021, aclPackets: 8))
        for p in prefixes(hex("00 1b 00 40")) { #expect(throws: WireError.self) { try BufferSize.decodeLE(p) } }
        for p in prefixes(hex("00 fd 03 40 08 00")) { #expect(throws: WireError.self) { try BufferSize.decodeBREDR(p) } }
    }
}

// MARK: - Connection parameters and ACL

@Suite("Connection parameters")
struct ConnectionParametersTests {
    @Test("range checks at their boundaries", arguments: [
        // (min, max, latency, timeout, valid)
        (UInt16(0x18), UInt16(0x28), UInt16(0), UInt16(0x1F4), true),  // defaults
        (6, 6, 0, 10, true),          // shortest interval, shortest timeout
        (5, 6, 0, 10, false),         // interval below 7.5 ms
        (6, 3200, 0, 3200, true),     // longest interval
        (6, 3201, 0, 3200, false),    // interval above 4 s
        (0x28, 0x18, 0, 0x1F4, false), // min > max
        (6, 6, 499, 3200, true),      // highest latency
        (6, 6, 500, 3200, false),     // latency above 499
        (6, 6, 0, 9, false),          // timeout below 100 ms
        (6, 6, 0, 3201, false),       // timeout above 32 s
        (0x28, 0x28, 0, 10, false),   // timeout equal to (1 + latency) * interval * 2: not longer
        (0x28, 0x28, 0, 11, true),    // just longer
        (0x18, 0x28, 4, 50, false),   // 500 ms vs (1 + 4) * 50 ms * 2 = 500 ms
        (0x18, 0x28, 4, 51, true),
    ])
    func isValid(min: UInt16, max: UInt16, latency: UInt16, timeout: UInt16, valid: Bool) {
        #expect(ConnectionParameters(intervalMin: min, intervalMax: max, latency: latency, supervisionTimeout: timeout).isValid == valid)
    }
}

@Suite("ACL packets")
struct ACLPacketTests {
    @Test("encode: handle, boundary and broadcast flags, length, data", arguments: [
        (ACLPacket.Boundary.firstNonFlushable, UInt8(0), "01 00 03 00 aa bb cc"),
        (.continuing, 0, "01 10 03 00 aa bb cc"),
        (.firstFlushable, 0, "01 20 03 00 aa bb cc"),
        (.complete, 0, "01 30 03 00 aa bb cc"),
        (.firstFlushable, 1, "01 60 03 00 aa bb cc"),
    ])
    func encodeDecode(boundary: ACLPacket.Boundary, broadcast: UInt8, wire: String) throws {
        let p = ACLPacket(handle: 0x0001, boundary: boundary, broadcast: broadcast, data: hex("aa bb cc"))
        #expect(p.encoded == hex(wire))
        #expect(p.packet.h4 == [0x02] + hex(wire))
        #expect(try ACLPacket.decode(hex(wire)) == p)
        #expect(p.isStart == (boundary != .continuing))
    }

    @Test("the handle is masked to 12 bits on encode and decode")
    func handleMask() throws {
        #expect(ACLPacket(handle: 0xFEDC, boundary: .firstNonFlushable, data: []).encoded == hex("dc 0e 00 00"))
        #expect(try ACLPacket.decode(hex("ff 2f 00 00")).handle == 0x0FFF)
    }

    @Test("every truncated prefix throws; a trailing byte throws")
    func strict() {
        let wire = hex("01 20 05 00 01 00 04 00 13")
        for p in prefixes(wire) { #expect(throws: WireError.self) { try ACLPacket.decode(p) } }
        #expect(expectWireError { try ACLPacket.decode(wire + [0]) } == .trailingBytes(context: "ACL packet", count: 1))
    }
}

@Suite("HCI errors")
struct HCIErrorTests {
    @Test("errors name the command and status")
    func descriptions() {
        #expect(HCIError.commandFailed(LECreateConnection.opcode, .commandDisallowed).description
                == "the controller rejected LE Create Connection (0x200d): Command Disallowed (0x0c)")
        #expect(HCIError.commandTimeout(HCI.LESetScanEnable.opcode, ms: 50).description.hasPrefix("the controller did not answer LE Set Scan Enable (0x200c) within 50 ms"))
        #expect(HCIError.hardwareError(0x07).description.contains("Hardware Error 0x07"))
        #expect(HCIError.transport(.closedByPeer("tcp:x:1")).description.contains("tcp:x:1"))
    }
}
