import Testing
@testable import BLEWire
@testable import BLEATT
@testable import BLEGATT

/// Reading several values at once (Core Vol 3 Part G 4.8.4, 4.8.5) and the
/// fall-backs, as scripted byte exchanges at ATT_MTU 23.
@Suite("GATT.TS client: read multiple (GAR)")
struct ReadMultipleTests {
    @Test("read multiple variable length: three values of different lengths in one round trip")
    func variable() throws {
        let (f, gatt) = client()
        f.expectATT("20 10 00 12 00 14 00", reply: "21 01 00 ff 00 00 03 00 01 02 03")
        let r = try gatt.readMultiple([0x10, 0x12, 0x14])
        #expect(r.values == [[0xFF], [], [1, 2, 3]])
        #expect(r.method == .variable)
        #expect(gatt.bearer.transactions.count == 1)
        f.verifyScriptDone()
    }

    @Test("read multiple variable length: a value cut at the MTU is completed with Read Blob, one left out is read in full")
    func variableTruncated() throws {
        let (f, gatt) = client()
        // 0x10 is 25 bytes long; the server sent 18 of them, and nothing of 0x12.
        let head = (0..<18).map { UInt8($0) }, tail = (18..<25).map { UInt8($0) }
        f.expectATT("20 10 00 12 00", reply: "21 19 00 \(Hex.string(head))")
        f.expectATT("0c 10 00 12 00", reply: "0d \(Hex.string(tail))")
        f.expectATT("0a 12 00", reply: "0b aa")
        let r = try gatt.readMultiple([0x10, 0x12])
        #expect(r.values == [head + tail, [0xAA]])
        f.verifyScriptDone()
    }

    @Test("read multiple variable length: a cut value that one Read Response holds is read again with Read")
    func variableTruncatedShort() throws {
        let (f, gatt) = client()
        // 0x10 is 22 bytes (ATT_MTU - 1); the server cut it to 20 (ATT_MTU - 3).
        let value = (0..<22).map { UInt8($0) }
        f.expectATT("20 10 00 12 00", reply: "21 16 00 \(Hex.string(Array(value.prefix(20))))")
        f.expectATT("0a 10 00", reply: "0b \(Hex.string(value))")
        f.expectATT("0a 12 00", reply: "0b aa")
        #expect(try gatt.readMultiple([0x10, 0x12]).values == [value, [0xAA]])
        f.verifyScriptDone()
    }

    @Test("Request Not Supported: Read Multiple with known lengths, split by them; remembered for the next read")
    func fallbackToReadMultiple() throws {
        let (f, gatt) = client()
        f.expectATT("20 10 00 12 00", reply: "01 20 10 00 06")
        f.expectATT("0e 10 00 12 00", reply: "0f 01 02 03")
        #expect(try gatt.readMultiple([0x10, 0x12], lengths: [1, 2]).values == [[1], [2, 3]])
        // The refusal is remembered: no second Read Multiple Variable.
        f.expectATT("0e 10 00 12 00", reply: "0f 04 05 06")
        let again = try gatt.readMultiple([0x10, 0x12], lengths: [1, 2])
        #expect(again.values == [[4], [5, 6]] && again.method == .multiple)
        f.verifyScriptDone()
    }

    @Test("Request Not Supported without known lengths: one Read per value")
    func fallbackToSingleReads() throws {
        let (f, gatt) = client()
        f.expectATT("20 10 00 12 00", reply: "01 20 10 00 06")
        f.expectATT("0a 10 00", reply: "0b 01")
        f.expectATT("0a 12 00", reply: "0b 02 03")
        let r = try gatt.readMultiple([0x10, 0x12])
        #expect(r.values == [[1], [2, 3]] && r.method == .single)
        f.verifyScriptDone()
    }

    @Test("both refused: single reads, and neither is asked again")
    func bothRefused() throws {
        let (f, gatt) = client()
        f.expectATT("20 10 00 12 00", reply: "01 20 10 00 06")
        f.expectATT("0e 10 00 12 00", reply: "01 0e 10 00 06")
        f.expectATT("0a 10 00", reply: "0b 01")
        f.expectATT("0a 12 00", reply: "0b 02")
        #expect(try gatt.readMultiple([0x10, 0x12], lengths: [1, 1]).values == [[1], [2]])
        f.expectATT("0a 10 00", reply: "0b 03")
        f.expectATT("0a 12 00", reply: "0b 04")
        #expect(try gatt.readMultiple([0x10, 0x12], lengths: [1, 1]).values == [[3], [4]])
        f.verifyScriptDone()
    }

    @Test("an error other than Request Not Supported fails the read, naming the handle")
    func otherError() throws {
        let (f, gatt) = client()
        f.expectATT("20 10 00 12 00", reply: "01 20 12 00 02")
        #expect(throws: ATTError.errorResponse(request: .readMultipleVariableRequest, handle: 0x12, code: .readNotPermitted)) {
            try gatt.readMultiple([0x10, 0x12])
        }
        f.verifyScriptDone()
    }

    @Test("more values than handles is a malformed response")
    func tooManyValues() throws {
        let (f, gatt) = client()
        f.expectATT("20 10 00 12 00", reply: "21 01 00 01 01 00 02 01 00 03")
        #expect(throws: GATTError.malformed(procedure: "Read Multiple Variable", reason: "3 values for 2 handles")) {
            try gatt.readMultiple([0x10, 0x12])
        }
        f.verifyScriptDone()
    }
}

/// The one-declaration rule: every opcode of the table is a declared PDU
/// whose encoder, decoder and trace agree.
@Suite("ATT declarations")
struct ATTDeclarationTests {
    @Test("every declared PDU has its own opcode, and a blank one round-trips through its declaration")
    func everyDeclaration() throws {
        var seen = Set<UInt8>()
        for type in ATT.all {
            let op = type.declaration.opcode.rawValue
            #expect(seen.insert(op).inserted, "opcode 0x\(Hex.int(op, width: 2)) declared twice")
            #expect(ATTOpcode.table[op]?.name == type.declaration.name)
            if let answer = type.declaration.response {
                #expect(ATT.table[answer.rawValue] != nil, "\(type.declaration.name) answered by an undeclared opcode")
            }
        }
        #expect(Set(ATTOpcode.table.keys) == seen)
    }

    @Test("Read Multiple Variable Response: a cut last value keeps the attribute's length; the trace says so")
    func truncatedTuple() throws {
        let pdu = try ATT.decode(hex("21 01 00 aa 05 00 01 02"))
        let r = try #require(pdu as? ATT.ReadMultipleVariableResponse)
        #expect(r.values.map(\.isTruncated) == [false, true])
        #expect(pdu.traceFields() == ["Value: aa", "Value: 01 02 (2 of 5 bytes)"])
        #expect(pdu.encoded == hex("21 01 00 aa 05 00 01 02"))
    }

    @Test("the first handle a request names is the one an Error Response carries")
    func firstHandle() {
        #expect(ATT.ReadBlobRequest(handle: 7, offset: 22).firstHandle == 7)
        #expect(ATT.ReadByTypeRequest(start: 3, end: 9, type: BluetoothUUID(uint16: 0x2803)).firstHandle == 3)
        #expect(ATT.ReadMultipleVariableRequest([0x10, 0x12]).firstHandle == 0x10)
        #expect(ATT.ExchangeMTURequest(mtu: 517).firstHandle == nil)
    }
}
