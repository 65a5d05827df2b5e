import Testing
@testable import BLEWire
@testable import BLETransport
@testable import BLEHCI
@testable import BLEL2CAP
@testable import BLEATT

private let signature = hex("a1 a2 a3 a4 a5 a6 a7 a8 a9 aa ab ac")

/// Every PDU case next to its bytes (Core Vol 3 Part F 3.4).
let attVectors: [(any ATTPDU, String)] = [
    (ATT.ErrorResponse(request: .readRequest, handle: 0x0003, error: .readNotPermitted), "01 0a 03 00 02"),
    (ATT.ExchangeMTURequest(mtu: 517), "02 05 02"),
    (ATT.ExchangeMTUResponse(mtu: 23), "03 17 00"),
    (ATT.FindInformationRequest(start: 0x0004, end: 0xFFFF), "04 04 00 ff ff"),
    (ATT.FindInformationResponse([HandleUUID(handle: 4, uuid: BluetoothUUID(uint16: 0x2902)), HandleUUID(handle: 5, uuid: BluetoothUUID(uint16: 0x2901))]),
     "05 01 04 00 02 29 05 00 01 29"),
    (ATT.FindInformationResponse([HandleUUID(handle: 0x10, uuid: red)]), "05 02 10 00 61 62 33 34 35 36 37 38 39 30 31 32 33 34 35 36"),
    (ATT.FindByTypeValueRequest(start: 1, end: 0xFFFF, type: 0x2800, value: hex("0d 18")), "06 01 00 ff ff 00 28 0d 18"),
    (ATT.FindByTypeValueResponse([HandlesInformation(found: 0x0010, groupEnd: 0x0020), HandlesInformation(found: 0x0030, groupEnd: 0xFFFF)]), "07 10 00 20 00 30 00 ff ff"),
    (ATT.ReadByTypeRequest(start: 1, end: 0xFFFF, type: BluetoothUUID(uint16: 0x2803)), "08 01 00 ff ff 03 28"),
    (ATT.ReadByTypeRequest(start: 1, end: 0xFFFF, type: red), "08 01 00 ff ff 61 62 33 34 35 36 37 38 39 30 31 32 33 34 35 36"),
    (ATT.ReadByTypeResponse([HandleValue(handle: 2, value: hex("0a 03 00 00 2a")), HandleValue(handle: 4, value: hex("02 05 00 01 2a"))]),
     "09 07 02 00 0a 03 00 00 2a 04 00 02 05 00 01 2a"),
    (ATT.ReadRequest(handle: 3), "0a 03 00"),
    (ATT.ReadResponse(hex("43 61 73 73")), "0b 43 61 73 73"),
    (ATT.ReadResponse([]), "0b"),
    (ATT.ReadBlobRequest(handle: 3, offset: 22), "0c 03 00 16 00"),
    (ATT.ReadBlobResponse(hex("01 02")), "0d 01 02"),
    (ATT.ReadMultipleRequest([3, 5]), "0e 03 00 05 00"),
    (ATT.ReadMultipleResponse(hex("01 02")), "0f 01 02"),
    (ATT.ReadByGroupTypeRequest(start: 1, end: 0xFFFF, type: BluetoothUUID(uint16: 0x2800)), "10 01 00 ff ff 00 28"),
    (ATT.ReadByGroupTypeResponse([GroupValue(handle: 1, endGroup: 5, value: hex("00 18")), GroupValue(handle: 6, endGroup: 9, value: hex("01 18"))]),
     "11 06 01 00 05 00 00 18 06 00 09 00 01 18"),
    (ATT.WriteRequest(handle: 0x0010, value: [0xFF]), "12 10 00 ff"),
    (ATT.WriteResponse(), "13"),
    (ATT.PrepareWriteRequest(handle: 0x0010, offset: 0, value: hex("01 02")), "16 10 00 00 00 01 02"),
    (ATT.PrepareWriteResponse(handle: 0x0010, offset: 2, value: hex("03")), "17 10 00 02 00 03"),
    (ATT.ExecuteWriteRequest(flags: 1), "18 01"),
    (ATT.ExecuteWriteResponse(), "19"),
    (ATT.HandleValueNotification(handle: 0x0012, value: [0x01]), "1b 12 00 01"),
    (ATT.HandleValueIndication(handle: 0x0012, value: [0x02]), "1d 12 00 02"),
    (ATT.HandleValueConfirmation(), "1e"),
    (ATT.ReadMultipleVariableRequest([3, 5]), "20 03 00 05 00"),
    (ATT.ReadMultipleVariableResponse([LengthValue([0xAA]), LengthValue([])]), "21 01 00 aa 00 00"),
    (ATT.ReadMultipleVariableResponse([LengthValue(hex("01 02")), LengthValue(length: 5, value: hex("03 04"))]), "21 02 00 01 02 05 00 03 04"),
    (ATT.MultipleHandleValueNotification([HandleLengthValue(handle: 0x12, value: [0x01]), HandleLengthValue(handle: 0x14, value: [])]),
     "23 12 00 01 00 01 14 00 00 00"),
    (ATT.WriteCommand(handle: 0x0010, value: hex("ff 00 00")), "52 10 00 ff 00 00"),
    (ATT.SignedWriteCommand(handle: 0x0010, value: [0x01], signature: signature), "d2 10 00 01 a1 a2 a3 a4 a5 a6 a7 a8 a9 aa ab ac"),
    (ATTUnknownPDU(opcode: ATTOpcode(rawValue: 0x3F), parameters: hex("aa")), "3f aa"),
]

@Suite("ATT PDUs")
struct ATTPDUTests {
    @Test("every PDU case encodes to its bytes and decodes back", arguments: attVectors.indices)
    func roundTrip(i: Int) throws {
        let (pdu, wire) = attVectors[i]
        #expect(pdu.encoded == hex(wire))
        let back = try ATT.decode(hex(wire))
        #expect(back == pdu)
        #expect(back.opcode == pdu.opcode)
        #expect(back.encoded == hex(wire))
    }

    @Test("every opcode in the table has a vector, and its name")
    func everyOpcodeCovered() {
        let covered = Set(attVectors.map { hex($0.1)[0] })
        for (code, info) in ATTOpcode.table {
            #expect(covered.contains(code), "opcode 0x\(Hex.int(code, width: 2)) \(info.name) has no vector")
            #expect(ATTOpcode(rawValue: code).name == info.name)
        }
    }

    @Test("the opcode table pairs each request with its response")
    func table() {
        let pairs: [(ATTOpcode, ATTOpcode)] = [(.exchangeMTURequest, .exchangeMTUResponse), (.findInformationRequest, .findInformationResponse),
                                               (.findByTypeValueRequest, .findByTypeValueResponse), (.readByTypeRequest, .readByTypeResponse),
                                               (.readRequest, .readResponse), (.readBlobRequest, .readBlobResponse),
                                               (.readMultipleRequest, .readMultipleResponse), (.readByGroupTypeRequest, .readByGroupTypeResponse),
                                               (.writeRequest, .writeResponse), (.prepareWriteRequest, .prepareWriteResponse),
                                               (.executeWriteRequest, .executeWriteResponse), (.handleValueIndication, .handleValueConfirmation),
                                               (.readMultipleVariableRequest, .readMultipleVariableResponse)]
        for (req, rsp) in pairs {
            #expect(req.info?.response == rsp, "\(req)")
            #expect(rsp.kind == (rsp == .handleValueConfirmation ? .confirmation : .response))
        }
        #expect(ATTOpcode.writeCommand.kind == .command && ATTOpcode.signedWriteCommand.kind == .command)
        #expect(ATTOpcode.handleValueNotification.kind == .notification)
        #expect(ATTOpcode(rawValue: 0x3F).kind == .unknown && !ATTOpcode(rawValue: 0x3F).isCommandFlagSet)
        #expect(ATTOpcode(rawValue: 0x7F).isCommandFlagSet)
        #expect(ATTOpcode.readRequest.description == "Read Request (0x0a)")
        #expect(ATTOpcode(rawValue: 0x3F).description == "Unknown ATT opcode (0x3f)")
        #expect(ATTErrorCode.writeNotPermitted.description == "Write Not Permitted (0x03)")
        #expect(ATTErrorCode(rawValue: 0x80).name == "Application Error")
        #expect(ATTErrorCode(rawValue: 0x30).name == "Reserved error")
    }

    @Test("malformed responses throw WireError", arguments: [
        "09 00", "09 00 01 00", "09 01 01", "09 04", "09 04 01 00 aa 02 00", "09 03 01 00 aa 02",
        "11 03 01 00 02", "11 04", "11 06 01 00 05 00 00 18 06", "11 00",
        "05 03 01 00 02 29", "05 00 01 00 02 29", "05 01", "05 01 04 00 02", "05 02 10 00 01 02", "05",
        "07", "07 01 00 02", "07 01 00 02 00 03",
        "01 0a 03 00 02 00", "01 0a 03 00", "03 17 00 00", "03 17", "13 00", "19 00", "1e 00",
        "08 01 00 ff ff 78 56 34 12", "08 01 00 ff ff", "10 01 00 ff ff 03", "0e 03 00", "0e 03 00 05", "0a 03 00 00", "0c 03 00 16",
        "d2 10 00 01 02", "d2 10", "18", "18 01 00", "12 10", "1b", "1d 12",
    ])
    func malformed(wire: String) {
        #expect(throws: WireError.self) { try ATT.decode(hex(wire)) }
    }

    @Test("the empty PDU throws")
    func empty() {
        #expect(expectWireError { try ATT.decode([]) } == .truncated(field: "opcode", needed: 1, available: 0))
    }

    @Test("every truncated prefix of every vector decodes or throws WireError, never traps", arguments: attVectors.indices)
    func prefixesNeverTrap(i: Int) {
        let wire = hex(attVectors[i].1)
        for p in prefixes(wire) {
            do {
                let pdu = try ATT.decode(p)
                #expect(pdu.opcode.rawValue == wire[0])
                #expect(pdu.encoded == p, "re-encoding a decoded prefix changes it")
            } catch is WireError {
            } catch {
                Issue.record("prefix \(Hex.string(p)) threw \(error)")
            }
        }
    }

    @Test("a Find Information Response takes its format from the first entry")
    func findInformationFormat() {
        #expect(ATT.FindInformationResponse([]).encoded == hex("05 01"))
        #expect(ATT.FindInformationResponse([HandleUUID(handle: 1, uuid: BluetoothUUID("00002902-0000-1000-8000-00805f9b34fb")!)]).encoded
                == hex("05 01 01 00 02 29"))
    }
}

// MARK: - Bearer

@Suite("ATT bearer")
struct ATTBearerTests {
    @Test("GATT/CL/GAC/BV-01-C exchange MTU: both offer 517, the effective MTU is 517 (bytes as on the wire)")
    func exchangeMTU517() throws {
        let f = BearerFixture()
        f.ctl.expect(h4("02 01 00 07 00 03 00 04 00 02 05 02"), reply: [h4("02 01 20 07 00 03 00 04 00 03 05 02")])
        #expect(try f.bearer.exchangeMTU() == 517)
        #expect(f.bearer.mtu == 517)
        #expect(f.bearer.mtuExchanged)
        f.verifyScriptDone()
    }

    @Test("exchange MTU: the effective MTU is the smaller of the two, never below 23",
          arguments: [(UInt16(517), UInt16(100), 100), (185, 517, 185), (517, 20, 23), (517, 23, 23)])
    func exchangeMTUMinimum(ours: UInt16, theirs: UInt16, effective: Int) throws {
        let f = BearerFixture()
        f.bearer.preferredMTU = ours
        f.expectATT(Hex.string(ATT.ExchangeMTURequest(mtu: ours).encoded), reply: Hex.string(ATT.ExchangeMTUResponse(mtu: theirs).encoded))
        #expect(try f.bearer.exchangeMTU() == effective)
        #expect(f.bearer.mtu == effective)
        f.verifyScriptDone()
    }

    @Test("a notification arriving between a request and its response is delivered, and the response completes the request")
    func notificationBetween() throws {
        let f = BearerFixture()
        f.expectATT("0a 03 00", reply: "1b 12 00 01 02", "0b 41 42")
        #expect(try f.bearer.request(ATT.ReadRequest(handle: 3)) == ATT.ReadResponse(hex("41 42")))
        #expect(f.notifications == [HandleValue(handle: 0x12, value: hex("01 02"))])
        f.verifyScriptDone()
    }

    @Test("the peer's own Exchange MTU Request during our discovery is answered with ours, and discovery completes")
    func peerMTURequestMidDiscovery() throws {
        let f = BearerFixture()
        f.expectATT("10 01 00 ff ff 00 28", reply: "02 64 00", "11 06 01 00 05 00 00 18")
        f.expectATT("03 05 02")
        let rsp = try f.bearer.request(ATT.ReadByGroupTypeRequest(start: 1, end: 0xFFFF, type: BluetoothUUID(uint16: 0x2800)))
        #expect(rsp == ATT.ReadByGroupTypeResponse([GroupValue(handle: 1, endGroup: 5, value: hex("00 18"))]))
        #expect(f.bearer.mtu == 100)
        #expect(f.sentATT == ["10 01 00 ff ff 00 28", "03 05 02"])
        f.verifyScriptDone()
    }

    @Test("an indication is delivered and confirmed (0x1E sent)")
    func indicationConfirmed() throws {
        let f = BearerFixture()
        f.ctl.expect(ACL.out(hex("1e")))
        f.ctl.deliver(ACL.in(hex("1d 12 00 07")))
        try f.drain()
        #expect(f.indications == [HandleValue(handle: 0x12, value: [0x07])])
        #expect(f.sentATT == ["1e"])
        f.verifyScriptDone()
    }

    @Test("a peer Read Request gets Error Response Request Not Supported naming the request and handle")
    func peerReadRequest() throws {
        let f = BearerFixture()
        f.ctl.expect(ACL.out(hex("01 0a 03 00 06")))
        f.ctl.deliver(ACL.in(hex("0a 03 00")))
        try f.drain()
        f.verifyScriptDone()
    }

    @Test("peer requests without a handle, unknown requests and malformed requests are answered with an Error Response")
    func peerOtherRequests() throws {
        let f = BearerFixture()
        f.ctl.expect(ACL.out(hex("01 18 00 00 06")))      // Execute Write Request: Request Not Supported
        f.ctl.expect(ACL.out(hex("01 3f 00 00 06")))      // unknown request opcode: Request Not Supported
        f.ctl.expect(ACL.out(hex("01 0a 00 00 04")))      // Read Request with a 1-byte handle: Invalid PDU
        f.ctl.deliver(ACL.in(hex("18 01")), ACL.in(hex("3f 01 02")), ACL.in(hex("7f 01")), ACL.in(hex("0a 03")), ACL.in(hex("52 10 00 01")))
        try f.drain()
        f.verifyScriptDone()
    }

    @Test("an Error Response naming a different request is ignored; the right response still completes the request")
    func errorForOtherRequestIgnored() throws {
        let f = BearerFixture()
        f.expectATT("0a 03 00", reply: "01 08 01 00 0a", "0b 07")
        #expect(try f.bearer.request(ATT.ReadRequest(handle: 3)) == ATT.ReadResponse([0x07]))
        #expect(f.unexpectedPDUs.count == 1)
        #expect(f.unexpectedPDUs.first?.contains("Error Response for Read By Type Request") == true)
        f.verifyScriptDone()
    }

    @Test("an Error Response to the request throws errorResponse naming the request, handle and code")
    func errorResponse() throws {
        let f = BearerFixture()
        f.expectATT("12 10 00 ff", reply: "01 12 10 00 03")
        #expect(throws: ATTError.errorResponse(request: .writeRequest, handle: 0x0010, code: .writeNotPermitted)) {
            try f.bearer.request(ATT.WriteRequest(handle: 0x10, value: [0xFF]))
        }
        f.verifyScriptDone()
    }

    @Test("a wrong response opcode fails the request with unexpectedResponse")
    func wrongResponse() throws {
        let f = BearerFixture()
        f.expectATT("0a 03 00", reply: "13")
        #expect(throws: ATTError.unexpectedResponse(request: .readRequest, received: .writeResponse)) {
            try f.bearer.request(ATT.ReadRequest(handle: 3))
        }
        f.verifyScriptDone()
    }

    @Test("a malformed response to the request fails it with malformedResponse")
    func malformedResponse() throws {
        let f = BearerFixture()
        f.expectATT("08 01 00 ff ff 03 28", reply: "09 01 02 00")
        do {
            _ = try f.bearer.request(ATT.ReadByTypeRequest(start: 1, end: 0xFFFF, type: BluetoothUUID(uint16: 0x2803)))
            Issue.record("no error")
        } catch let ATTError.malformedResponse(request, reason) {
            #expect(request == .readByTypeRequest)
            #expect(reason.contains("Length"))
        }
        f.verifyScriptDone()
    }

    @Test("a response with no request outstanding is reported and ignored")
    func strayResponse() throws {
        let f = BearerFixture()
        f.ctl.deliver(ACL.in(hex("13")), ACL.in(hex("09 01")))
        try f.drain()
        #expect(f.unexpectedPDUs.count == 2)
        #expect(f.ctl.sent.isEmpty)
    }

    @Test("Disconnection Complete fails the pending request once with .disconnected, and later requests at once")
    func disconnectFailsPending() throws {
        let f = BearerFixture()
        f.ctl.expect(ACL.out(hex("0a 03 00")), reply: [h4("04 05 04 00 01 00 08")])
        #expect(throws: ATTError.disconnected(reason: .connectionTimeout)) { try f.bearer.request(ATT.ReadRequest(handle: 3)) }
        #expect(f.bearer.transactions.count == 1)
        #expect(f.bearer.transactions.first?.response == nil)
        // A late response after the link went down does not resurrect anything.
        f.ctl.deliver(ACL.in(hex("0b 01")))
        try f.drain()
        let sentBefore = f.ctl.sent.count
        #expect(throws: ATTError.disconnected(reason: .connectionTimeout)) { try f.bearer.request(ATT.ReadRequest(handle: 3)) }
        #expect(throws: ATTError.disconnected(reason: .connectionTimeout)) { try f.bearer.send(ATT.WriteCommand(handle: 3, value: [1])) }
        #expect(f.ctl.sent.count == sentBefore)
        #expect(f.bearer.transactions.count == 1)
        f.verifyScriptDone()
    }

    @Test("a Disconnection Complete for another handle does not disturb the request")
    func otherHandleDisconnect() throws {
        let f = BearerFixture()
        f.ctl.expect(ACL.out(hex("0a 03 00")), reply: [h4("04 05 04 00 02 00 13"), ACL.in(hex("0b 01"))])
        #expect(try f.bearer.request(ATT.ReadRequest(handle: 3)) == ATT.ReadResponse([0x01]))
    }

    @Test("a request never answered times out; the bearer is then closed and a second request throws bearerClosed")
    func timeoutClosesBearer() throws {
        let f = BearerFixture()
        f.bearer.transactionTimeoutMs = 30
        f.expectATT("0a 03 00")
        let start = Instant.now()
        #expect(throws: ATTError.timeout(request: .readRequest, handle: 0x0003, ms: 30)) { try f.bearer.request(ATT.ReadRequest(handle: 3)) }
        #expect(Instant.now().usSince(start) >= 30_000)
        #expect(throws: ATTError.bearerClosed) { try f.bearer.request(ATT.ReadRequest(handle: 3)) }
        #expect(throws: ATTError.bearerClosed) { try f.bearer.send(ATT.WriteCommand(handle: 3, value: [1])) }
        #expect(f.sentATT == ["0a 03 00"])
        f.verifyScriptDone()
    }

    @Test("a PDU larger than the MTU is refused before sending")
    func tooLong() {
        let f = BearerFixture()
        let value = [UInt8](repeating: 0xAA, count: 21)
        #expect(throws: ATTError.tooLong(request: .writeRequest, size: 24, mtu: 23)) { try f.bearer.request(ATT.WriteRequest(handle: 0x10, value: value)) }
        #expect(throws: ATTError.tooLong(request: .writeCommand, size: 24, mtu: 23)) { try f.bearer.send(ATT.WriteCommand(handle: 0x10, value: value)) }
        #expect(f.ctl.sent.isEmpty)
    }

    @Test("a Write Command is sent at once and counted (the GATT-level case GATT/CL/GAW/BV-01-C is in GATTConformanceTests)")
    func writeCommand() throws {
        let f = BearerFixture()
        f.expectATT("52 10 00 ff 00 00")
        try f.bearer.send(ATT.WriteCommand(handle: 0x10, value: hex("ff 00 00")))
        #expect(f.bearer.commandsSent == 1)
        f.verifyScriptDone()
    }

    @Test("a request fragmented over several ACL packets goes out whole (27-byte buffers, 2 credits)")
    func fragmentedRequest() throws {
        let f = BearerFixture(aclLength: 27, aclPackets: 2)
        f.bearer.preferredMTU = 64
        f.expectATT("02 40 00", reply: "03 40 00")
        _ = try f.bearer.exchangeMTU()
        let value = (0..<40).map { UInt8($0) }
        let pdu = ATT.WriteRequest(handle: 0x10, value: value).encoded
        var l2cap = ByteWriter(); l2cap.u16(UInt16(pdu.count)); l2cap.u16(4); l2cap.append(pdu)
        let all = l2cap.bytes
        f.ctl.expect(ACLPacket(handle: 1, boundary: .firstNonFlushable, data: Array(all[0..<27])).packet)
        f.ctl.expect(ACLPacket(handle: 1, boundary: .continuing, data: Array(all[27...])).packet, reply: [ACL.in(hex("13"))])
        #expect(try f.bearer.request(ATT.WriteRequest(handle: 0x10, value: value)) == ATT.WriteResponse())
        f.verifyScriptDone()
    }

    @Test("a response fragmented by the controller is reassembled before the bearer sees it")
    func fragmentedResponse() throws {
        let f = BearerFixture()
        // 22 bytes: the largest Read Response ATT_MTU 23 allows, split over three ACL packets.
        let value = (0..<22).map { UInt8($0) }
        var l2cap = ByteWriter(); l2cap.u16(23); l2cap.u16(4); l2cap.u8(0x0B); l2cap.append(value)
        let all = l2cap.bytes
        f.ctl.expect(ACL.out(hex("0a 03 00")), reply: [
            ACLPacket(handle: 1, boundary: .firstFlushable, data: Array(all[0..<10])).packet,
            ACLPacket(handle: 1, boundary: .continuing, data: Array(all[10..<20])).packet,
            ACLPacket(handle: 1, boundary: .continuing, data: Array(all[20...])).packet,
        ])
        #expect(try f.bearer.request(ATT.ReadRequest(handle: 3)) == ATT.ReadResponse(value))
        f.verifyScriptDone()
    }

    @Test("ATT errors describe the request and handle")
    func descriptions() {
        #expect(ATTError.errorResponse(request: .writeRequest, handle: 0x10, code: .writeNotPermitted).description
                == "the device answered Write Request on handle 0x0010 with Write Not Permitted (0x03)")
        #expect(ATTError.timeout(request: .readRequest, handle: 3, ms: 30).description == "the device did not answer Read Request on handle 0x0003 within 30 ms")
        #expect(ATTError.unexpectedResponse(request: .readRequest, received: .writeResponse).description.contains("Write Response"))
    }
}


/// Two PDUs are equal in a test when their bytes are.
func == (a: any ATTPDU, b: any ATTPDU) -> Bool { a.encoded == b.encoded }
func == (a: (any ATTPDU)?, b: any ATTPDU) -> Bool { a?.encoded == b.encoded }
