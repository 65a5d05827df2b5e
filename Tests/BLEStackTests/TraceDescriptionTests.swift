import Testing
@testable import BLEWire
@testable import BLETransport
@testable import BLEHCI
@testable import BLEL2CAP
@testable import BLEATT
@testable import BLEGATT
@testable import BLETrace

/// One ATT PDU on handle 0x0040 as the H4 ACL packet that carries it.
private func attPacket(_ pdu: String) -> HCIPacket {
    let b = hex(pdu)
    var w = ByteWriter()
    w.u16(0x0040); w.u16(UInt16(b.count + 4)); w.u16(UInt16(b.count)); w.u16(CID.att); w.append(b)
    return HCIPacket(.acl, w.bytes)
}

/// The ATT lines (after the L2CAP line) of a PDU decoded by `dec`.
private func attFields(_ dec: PacketDecoder, _ pdu: String, _ dir: Direction) -> [String] {
    Array(dec.decode(attPacket(pdu), dir).fields.dropFirst())
}

@Suite("L2CAP reassembler (Core Vol 3 Part A 7.2)")
struct L2CAPReassemblerTests {
    private func start(_ h: String) -> ACLPacket { ACLPacket(handle: 1, boundary: .firstFlushable, data: hex(h)) }
    private func cont(_ h: String) -> ACLPacket { ACLPacket(handle: 1, boundary: .continuing, data: hex(h)) }

    @Test("a whole frame in one start fragment is complete, header read")
    func single() {
        var r = L2CAPReassembler()
        let step = r.receive(start("03 00 04 00 0a 10 00"))
        #expect(step.progress == .complete(BasicFrame(length: 3, cid: CID.att, payload: hex("0a 10 00"))))
        #expect(step.dropped.isEmpty && !r.inProgress)
    }

    @Test("fed byte by byte, progress counts every byte and the length is known from the second")
    func byteByByte() {
        let frame = hex("03 00 04 00 0a 10 00")
        var r = L2CAPReassembler()
        for (i, b) in frame.enumerated() {
            let step = r.receive(ACLPacket(handle: 1, boundary: i == 0 ? .firstNonFlushable : .continuing, data: [b]))
            #expect(step.dropped.isEmpty)
            if i + 1 < frame.count {
                #expect(step.progress == .partial(received: i + 1, expected: i == 0 ? nil : 7))
            } else {
                #expect(step.progress == .complete(BasicFrame(length: 3, cid: CID.att, payload: hex("0a 10 00"))))
            }
        }
    }

    @Test("a start fragment cuts the PDU in progress short and says by how much")
    func interrupted() {
        var r = L2CAPReassembler()
        _ = r.receive(start("05 00 04 00 0b"))
        let step = r.receive(start("01 00 04 00 13"))
        #expect(step.dropped == [.interrupted(missing: 4)])
        #expect(step.progress == .complete(BasicFrame(length: 1, cid: CID.att, payload: [0x13])))
        _ = r.receive(start("05"))
        #expect(r.receive(start("01 00 04 00 13")).dropped == [.interrupted(missing: nil)])
    }

    @Test("a continuation without a start, and data past the announced length, are dropped with typed errors that empty the state")
    func errors() {
        var r = L2CAPReassembler()
        #expect(r.receive(cont("aa bb")) == L2CAPReassembler.Step(dropped: [.continuationWithoutStart(length: 2)], progress: nil))
        _ = r.receive(start("01 00 04 00"))
        #expect(r.receive(cont("13 14")).dropped == [.overlong(received: 2, announced: 1, bytes: hex("01 00 04 00 13 14"))])
        #expect(!r.inProgress)
        #expect(r.receive(start("01 00 04 00 13 14 15")).dropped == [.overlong(received: 3, announced: 1, bytes: hex("01 00 04 00 13 14 15"))])
        #expect(ReassemblyError.continuationWithoutStart(length: 3).description == "continuation fragment (3 bytes) without a start fragment; dropped")
    }

    // Found by the l2cap fuzz harness ("reassembly errors reported as due"):
    // a start fragment that cuts a PDU short and is itself too long drops two
    // PDUs, and both are reported.
    @Test("a start fragment that interrupts a PDU and is itself overlong reports both drops")
    func interruptedThenOverlong() {
        var r = L2CAPReassembler()
        _ = r.receive(start("05 00 04 00 0b"))
        let step = r.receive(start("00 00 04 00 13"))
        #expect(step.dropped == [.interrupted(missing: 4), .overlong(received: 1, announced: 0, bytes: hex("00 00 04 00 13"))])
        #expect(step.progress == nil && !r.inProgress)
    }
}

@Suite("Shared protocol names")
struct SharedNamesTests {
    @Test("GATTUUID.name and the tracer use the one Assigned Numbers table")
    func oneTable() {
        for (v, n) in AssignedNumbers.uuidNames {
            #expect(GATTUUID.name(BluetoothUUID(uint16: v)) == n)
            #expect(BluetoothUUID(uint16: v).namedDescription == "\(n) (\(Hex.int(v, width: 4)))")
        }
        #expect(BluetoothUUID(uint32: 0x0000_2A00).assignedName == "Device Name")
        #expect(BluetoothUUID("19B10010-E8F2-537E-4F6C-D104768A1214")?.assignedName == nil)
    }

    @Test("characteristic declarations in the trace list CharacteristicProperties.names")
    func propertyNames() throws {
        let c = try Characteristic.decodeDeclaration(handle: 2, value: hex("3e 03 00 00 2a"))
        #expect(c.declarationTraceFields.first == "Properties: 0x3e (\(c.properties.names.joined(separator: ", ")))")
        #expect(c.declarationTraceFields.first == "Properties: 0x3e (read, write-without-response, write, notify, indicate)")
    }
}

@Suite("GATT and ATT trace fields")
struct TraceDescriptionTests {
    @Test("include declarations: 4 bytes (128-bit service, no UUID) or 6 (16-bit UUID); others malformed")
    func includeDeclaration() throws {
        #expect(try IncludeDeclaration.decode(hex("20 00 25 00")) == IncludeDeclaration(start: 0x20, end: 0x25, uuid: nil))
        #expect(try IncludeDeclaration.decode(hex("10 00 15 00 0f 18")) == IncludeDeclaration(start: 0x10, end: 0x15, uuid: BluetoothUUID(uint16: 0x180F)))
        for bad in ["20 00 25", "20 00 25 00 01", "00 00 05 00", "20 00 1f 00", "20 00 25 00" + String(repeating: " 00", count: 16)] {
            #expect(throws: WireError.self) { try IncludeDeclaration.decode(hex(bad)) }
        }
    }

    @Test("Find Included Services: the request type, both include forms, and the Read of a 128-bit included service's declaration")
    func findIncludedServices() {
        let dec = PacketDecoder()
        #expect(attFields(dec, "08 01 00 ff ff 02 28", .sent) == [
            "        ATT: Read By Type Request (0x08) len 6", "          Handle range: 0x0001-0xffff", "          Attribute type: Include (2802)"])
        #expect(attFields(dec, "09 08 02 00 10 00 15 00 0f 18", .received) == [
            "        ATT: Read By Type Response (0x09) len 9", "          Attribute data length: 8", "          Handle: 0x0002",
            "            Included service: 0x0010-0x0015", "            UUID: Battery (180f)"])
        _ = attFields(dec, "08 03 00 ff ff 02 28", .sent)
        #expect(attFields(dec, "09 06 03 00 20 00 25 00", .received).suffix(2) == [
            "            Included service: 0x0020-0x0025", "            UUID: none (128-bit, in the service declaration at 0x0020)"])
        _ = attFields(dec, "0a 20 00", .sent)
        #expect(attFields(dec, "0b 15 14 13 12 11 10 0f 0e 0d 0c 0b 0a 09 08 07 06", .received).last
                == "            Service UUID: 06070809-0a0b-0c0d-0e0f-101112131415")
        // A malformed include is shown with its bytes and the reason.
        _ = attFields(dec, "08 04 00 ff ff 02 28", .sent)
        let bad = attFields(dec, "09 07 04 00 20 00 25 00 01", .received)
        #expect(bad.contains("            Value: 20 00 25 00 01"))
        #expect(bad.last?.hasPrefix("            malformed Include: ") == true)
    }

    @Test("Read By Type for a value type shows values, even of a declaration's size")
    func readByTypeAnyType() {
        let dec = PacketDecoder()
        _ = attFields(dec, "08 01 00 ff ff 00 2a", .sent)
        #expect(attFields(dec, "09 07 03 00 41 74 74 6c 65", .received).last == "            Value: 41 74 74 6c 65 \"Attle\"")
        // Without the request (a capture started mid-exchange), a characteristic declaration is still recognised.
        #expect(attFields(PacketDecoder(), "09 07 02 00 02 03 00 00 2a", .received).suffix(3) == [
            "            Properties: 0x02 (read)", "            Value handle: 0x0003", "            Value UUID: Device Name (2a00)"])
    }

    @Test("Read Blob, Prepare Write and Execute Write carry handle, offset, part and flags")
    func longProcedures() {
        let dec = PacketDecoder()
        #expect(attFields(dec, "0c 10 00 16 00", .sent) == ["        ATT: Read Blob Request (0x0c) len 4", "          Handle: 0x0010", "          Offset: 22"])
        #expect(attFields(dec, "0d 41 42", .received) == ["        ATT: Read Blob Response (0x0d) len 2", "          Value: 41 42 \"AB\""])
        #expect(attFields(dec, "16 10 00 16 00 6a 6b", .sent) == [
            "        ATT: Prepare Write Request (0x16) len 6", "          Handle: 0x0010", "          Offset: 22", "          Data: 6a 6b \"jk\""])
        #expect(attFields(dec, "17 10 00 16 00 6a 6b", .received).count == 4)
        #expect(attFields(dec, "18 00", .sent).last == "          Flags: Cancel all prepared writes (0x00)")
        #expect(attFields(dec, "18 01", .sent).last == "          Flags: Immediately write all pending values (0x01)")
        #expect(attFields(dec, "18 02", .sent).last == "          Flags: reserved (0x02)")
        #expect(attFields(dec, "01 0c 10 00 0b", .received).suffix(3) == [
            "          Read Blob Request (0x0c)", "          Handle: 0x0010", "          Error: Attribute Not Long (0x0b)"])
    }

    @Test("every PDU ATTPDU encodes describes itself without trapping, with a summary naming its opcode")
    func everyPDU() {
        let pdus: [any ATTPDU] = [
            ATT.ErrorResponse(request: .readRequest, handle: 1, error: .invalidHandle), ATT.ExchangeMTURequest(mtu: 517),
            ATT.FindInformationResponse([HandleUUID(handle: 1, uuid: BluetoothUUID(uint16: 0x2902))]),
            ATT.ReadByTypeResponse([HandleValue(handle: 2, value: hex("02 03 00 00 2a"))]),
            ATT.ReadByGroupTypeResponse([GroupValue(handle: 1, endGroup: 5, value: hex("00 18"))]),
            ATT.ReadMultipleRequest([1, 2]), ATT.SignedWriteCommand(handle: 1, value: [1], signature: Array(repeating: 0xAA, count: 12)),
            ATTUnknownPDU(opcode: ATTOpcode(rawValue: 0x7F), parameters: [0]),
        ]
        for p in pdus {
            #expect(ATT.traceSummary(p.encoded).hasPrefix(p.opcode.description))
            #expect(!p.traceFields().isEmpty)
        }
        #expect(ATT.traceSummary([]) == "empty PDU")
    }
}
