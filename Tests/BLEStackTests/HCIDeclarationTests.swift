import Testing
@testable import BLEWire
@testable import BLEHCI
@testable import BLETransport
@testable import BLETrace

/// HCI commands and events are declared once (`HCI.commands`, `HCI.events`,
/// `HCI.subevents`): names, encoding, decoding and the trace all come from
/// the declarations.
@Suite("HCI declarations")
struct HCIDeclarationTests {
    /// Every command declaration attled's code names, by its opcode: each is in `HCI.commands`.
    static let named: [HCIOpcode] = [
        HCI.Disconnect.opcode, HCI.SetEventMask.opcode, HCI.Reset.opcode, HCI.ReadLocalVersion.opcode,
        HCI.ReadLocalSupportedCommands.opcode, HCI.ReadLocalSupportedFeatures.opcode, HCI.ReadBufferSize.opcode,
        HCI.ReadBDADDR.opcode, HCI.LESetEventMask.opcode, HCI.LEReadBufferSize.opcode, HCI.LEReadLocalSupportedFeatures.opcode,
        HCI.LESetRandomAddress.opcode, HCI.LESetAdvertisingParameters.opcode, HCI.LESetAdvertisingData.opcode,
        HCI.LESetScanResponseData.opcode, HCI.LESetAdvertisingEnable.opcode, LEScanParameters.opcode, HCI.LESetScanEnable.opcode,
        LECreateConnection.opcode, HCI.LECreateConnectionCancel.opcode, HCI.LEReadFilterAcceptListSize.opcode,
        HCI.LEClearFilterAcceptList.opcode, HCI.LEAddDeviceToFilterAcceptList.opcode,
        HCI.LERemoveDeviceFromFilterAcceptList.opcode, LEConnectionUpdate.opcode, HCI.LEReadRemoteFeatures.opcode,
        HCI.LEEnableEncryption.opcode, HCI.LELongTermKeyRequestReply.opcode, HCI.LELongTermKeyRequestNegativeReply.opcode,
        HCI.LEReadSupportedStates.opcode, HCI.LESetDataLength.opcode, HCI.LESetPHY.opcode, HCI.LESetExtendedScanParameters.opcode,
        HCI.LESetExtendedScanEnable.opcode, HCI.LEExtendedCreateConnection.opcode, HCI.LESetAdvertisingSetRandomAddress.opcode,
        HCI.LESetExtendedAdvertisingParameters.opcode, HCI.LESetExtendedAdvertisingData.opcode,
        HCI.LESetExtendedScanResponseData.opcode, HCI.LESetExtendedAdvertisingEnable.opcode, HCI.LERemoveAdvertisingSet.opcode,
    ]
    static let namedEvents: [HCIEventCode] = [
        .disconnectionComplete, .encryptionChange, .readRemoteVersionComplete, .commandComplete, .commandStatus,
        .hardwareError, .numberOfCompletedPackets, .dataBufferOverflow, .encryptionKeyRefreshComplete, .leMeta, .vendor,
    ]
    static let namedSubevents: [LESubevent] = [
        .connectionComplete, .advertisingReport, .connectionUpdateComplete, .readRemoteFeaturesComplete, .longTermKeyRequest,
        .dataLengthChange, .enhancedConnectionComplete, .phyUpdateComplete, .extendedAdvertisingReport, .channelSelectionAlgorithm,
    ]

    @Test("each table has one declaration per code, and every code the code names is declared")
    func tables() {
        #expect(HCI.commandTable.count == HCI.commands.count, "two commands share an opcode")
        #expect(HCI.eventTable.count == HCI.events.count, "two events share a code")
        #expect(HCI.subeventTable.count == HCI.subevents.count, "two subevents share a code")
        for op in Self.named { #expect(HCI.commandTable[op.rawValue] != nil, "\(op) has no declaration") }
        for c in Self.namedEvents { #expect(HCI.eventTable[c.rawValue] != nil, "\(c) has no declaration") }
        for s in Self.namedSubevents { #expect(HCI.subeventTable[s.rawValue] != nil, "\(s) has no declaration") }
        for d in HCI.commands { #expect(d.declaration.opcode.name == d.declaration.name) }
        #expect(HCI.events.allSatisfy { $0.declaration.subevent == nil })
        #expect(HCI.subevents.allSatisfy { $0.declaration.code == .leMeta && $0.declaration.subevent != nil })
        #expect(HCIOpcode(rawValue: 0x0C7F).name == "Unknown Command")
    }

    @Test("every command and event in the recorded captures is declared")
    func capturesAreDeclared() throws {
        for n in ["pycom-run", "synthetic"] {
            for r in Btsnoop.parse(try GoldenTraceTests.read(n + ".btsnoop")).records {
                let b = r.packet.bytes
                switch r.packet.type {
                case .command: #expect(HCI.commandTable[UInt16(b[0]) | UInt16(b[1]) << 8] != nil, "\(n) #\(r.number)")
                case .event where b[0] == 0x3E: #expect(HCI.subeventTable[b[2]] != nil, "\(n) #\(r.number)")
                case .event: #expect(HCI.eventTable[b[0]] != nil, "\(n) #\(r.number)")
                default: break
                }
            }
        }
    }

    @Test("each command's default value encodes, decodes to the same bytes, and no prefix of it decodes")
    func commandRoundTrips() throws {
        for d in HCI.commands {
            let c = d.init().command
            #expect(c.opcode == d.declaration.opcode)
            let back = try d.decode(c.parameters)
            #expect(back.command == c, "\(d.declaration.name)")
            for p in prefixes(c.parameters) {
                #expect(throws: WireError.self, "\(d.declaration.name) cut to \(p.count)") { try d.decode(p) }
            }
            #expect(throws: WireError.self, "\(d.declaration.name) with a byte more") { try d.decode(c.parameters + [0]) }
            #expect(!c.traceFields.contains { $0.hasPrefix("malformed") }, "\(d.declaration.name)")
        }
    }

    @Test("each event's default value encodes and decodes to the same bytes, and its trace is not malformed")
    func eventRoundTrips() throws {
        for d in HCI.events + HCI.subevents {
            let bytes = d.init().encoded
            let params = Array(bytes.dropFirst(d.declaration.subevent == nil ? 2 : 3))
            #expect(try d.decode(params).encoded == bytes, "\(d.declaration.name)")
            let lines = HCIEvent.traceFields(bytes) { _ in ["report"] }
            #expect(!lines.contains { $0.contains("malformed") }, "\(d.declaration.name): \(lines)")
            #expect(throws: Never.self, "\(d.declaration.name)") { try HCIEvent.decode(bytes) }
        }
    }

    @Test("LE Set Data Length: one declaration gives the bytes, the decoder and the trace (7.8.33)")
    func setDataLength() throws {
        let c = HCI.LESetDataLength(handle: 0x0040).command
        #expect(c.encoded == hex("22 20 06 40 00 fb 00 48 08"))
        let d = try HCI.LESetDataLength.decode(c.parameters)
        #expect(d.handle == 0x40 && d.txOctets == 251 && d.txTime == 2120)
        #expect(c.traceFields == ["Handle: 64", "TX octets: 251", "TX time: 2120 usec"])
        #expect(HCI.LESetDataLength.opcode.name == "LE Set Data Length")
        #expect(expectWireError { try HCI.LESetDataLength.decode(hex("40 00 fb")) } == .truncated(field: "TX_Octets", needed: 2, available: 1))
    }

    @Test("the trace prints the declarations' labels; keys are masked unless shown")
    func traces() throws {
        let enc = HCI.LEEnableEncryption(handle: 1, rand: 0x0102030405060708, ediv: 0x1234, ltk: Array(0..<16)).command
        #expect(enc.traceFields == ["Handle: 1", "Rand: <hidden>", "EDIV: <hidden>", "LTK: <16-byte key hidden>"])
        #expect(enc.traceFields(showKeys: true) == ["Handle: 1", "Rand: 0x0102030405060708", "EDIV: 0x1234",
                                                    "LTK: 0f0e0d0c0b0a09080706050403020100"])
        var adv = HCI.LESetAdvertisingData(); adv.data = hex("02 01 06")
        #expect(adv.command.parameters.count == 32)
        #expect(adv.command.traceFields == ["Data: 02 01 06"])
        #expect(try HCI.LESetAdvertisingData.decode(adv.command.parameters).data == hex("02 01 06"))
        // A return parameter line built from two fields, in btmon's order.
        let cc = hex("0e 0c 01 01 10 00 09 34 12 0a 5f 00 78 56")
        #expect(HCIEvent.traceFields(cc) { _ in [] } == [
            "Read Local Version Information (0x1001) ncmd 1", "  Status: Success (0x00)",
            "  HCI version: 5.0 (0x09) - revision 0x1234", "  LMP version: 5.1 (0x0a) - subversion 0x5678",
            "  Manufacturer: 0x005f"])
        // A subevent without a case in HCIEvent passes through, and its trace comes from its declaration.
        let csa = hex("3e 04 14 01 00 01")
        #expect(try HCIEvent.decode(csa) == .leMeta(.channelSelectionAlgorithm, hex("01 00 01")))
        #expect(HCIEvent.traceFields(csa) { _ in [] } == ["LE Channel Selection Algorithm (0x14)", "  Handle: 1", "  Algorithm: #2 (0x01)"])
        let ltkReq = hex("3e 0d 05 01 00 08 07 06 05 04 03 02 01 34 12")
        #expect(HCIEvent.traceFields(ltkReq) { _ in [] } == ["LE Long Term Key Request (0x05)", "  Handle: 1", "  Rand: <hidden>", "  EDIV: <hidden>"])
        #expect(HCIEvent.traceFields(hex("3e 03 05 01 00")) { _ in [] }.contains { $0.contains("malformed") })
    }
}
