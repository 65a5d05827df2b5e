import Testing
@testable import BLEWire
@testable import BLESMP

/// SMP's PDUs are declared once (`SMPPDU.fields`): the table's parameter
/// lengths, the encoder, the decoder and the trace all come from it.
@Suite("SMP declarations")
struct SMPDeclarationTests {
    @Test("every code has a declaration whose parameter length is the specification's (Core Vol 3 Part H 3.5, 3.6)")
    func lengths() {
        let spec: [UInt8: Int] = [0x01: 6, 0x02: 6, 0x03: 16, 0x04: 16, 0x05: 1, 0x06: 16, 0x07: 10, 0x08: 16,
                                  0x09: 7, 0x0A: 16, 0x0B: 1, 0x0C: 64, 0x0D: 16, 0x0E: 1]
        #expect(Set(SMPCode.table.keys) == Set(spec.keys))
        for (code, n) in spec {
            #expect(SMPCode(rawValue: code).info?.parameterLength == n, "code 0x\(Hex.int(code, width: 2))")
            #expect(SMPPDU.blank(SMPCode(rawValue: code))?.encoded.count == 1 + n)
        }
        #expect(SMPPDU.blank(SMPCode(rawValue: 0x0F)) == nil)
    }

    @Test("the trace prints the declaration's field names; keys masked unless shown")
    func traceLines() throws {
        let ident = SMPPDU.centralIdentification(ediv: 0x1234, rand: 0x0102030405060708)
        #expect(ident.traceFields(showKeys: false) == ["EDIV: <hidden>", "Rand: <hidden>"])
        #expect(ident.traceFields(showKeys: true) == ["EDIV: 0x1234", "Rand: 0x0102030405060708"])
        let failed = try SMPPDU.decode(hex("05 05"))
        #expect(failed.traceFields(showKeys: false) == ["Reason: Pairing Not Supported (0x05)"])
        let addr = SMPPDU.identityAddressInformation(type: 1, address: BDAddress(wire: hex("55 44 33 22 11 c0")))
        #expect(addr.traceFields(showKeys: false) == ["Identity address: C0:11:22:33:44:55 (static random)"])
        #expect(SMPPDU.traceSummary(hex("05 05")) == "Pairing Failed (0x05) len 1")
        #expect(SMPPDU.traceSummary(hex("0f 01")) == "Unknown SMP command (0x0f) len 1")
        // A malformed key PDU: the reason, its bytes hidden.
        let bad = SMPPDU.traceFields(bytes: hex("06 11 22 33"), showKeys: false)
        #expect(bad.count == 1 && bad[0].hasPrefix("malformed") && bad[0].hasSuffix("<3 bytes hidden>") && !bad[0].contains("22"))
    }
}
