import Testing
@testable import BLEWire
@testable import BLETransport
@testable import BLEHCI
@testable import BLEL2CAP
import BLESMP

/// A link on handle 0x0001 over a scripted controller, recording ATT payloads and reassembly errors.
private final class LinkFixture {
    let ctl = ScriptedController()
    let host: HCIHost
    let link: L2CAPLink
    var att: [[UInt8]] = []
    var errors: [String] = []

    init(peripheral: Bool = false) {
        host = HCIHost(transport: ctl)
        host.interruptible = false
        host.setACLBuffers(length: 27, packets: 8)
        link = L2CAPLink(host: host, handle: 0x0001, peripheral: peripheral)
        link.register(cid: CID.att) { [unowned self] in self.att.append($0) }
        link.onReassemblyError = { [unowned self] in self.errors.append($0) }
    }

    func start(_ h: String) { link.receive(ACLPacket(handle: 1, boundary: .firstFlushable, data: hex(h))) }
    func cont(_ h: String) { link.receive(ACLPacket(handle: 1, boundary: .continuing, data: hex(h))) }
}

@Suite("L2CAP reassembly")
struct L2CAPReassemblyTests {
    @Test("a PDU in one fragment is delivered to its channel without the basic header")
    func single() {
        let f = LinkFixture()
        f.start("05 00 04 00 0b 01 02 03 04")
        #expect(f.att == [hex("0b 01 02 03 04")])
        #expect(f.errors == [])
    }

    @Test("a PDU split across many fragments is reassembled")
    func manyFragments() {
        let f = LinkFixture()
        let payload = [0x0B] + (1...40).map { UInt8($0) }
        let pdu = hex("29 00 04 00") + payload
        var offset = 0
        var first = true
        for size in [1, 1, 3, 5, 7, 9, 11, 8] {
            let part = Array(pdu[offset..<offset + size])
            f.link.receive(ACLPacket(handle: 1, boundary: first ? .firstFlushable : .continuing, data: part))
            offset += size
            first = false
            if offset < pdu.count { #expect(f.att.isEmpty, "delivered early at \(offset)") }
        }
        #expect(offset == pdu.count)
        #expect(f.att == [payload])
        #expect(f.errors == [])
    }

    @Test("the length field itself split across fragments (1-byte start) is reassembled")
    func splitLengthField() {
        let f = LinkFixture()
        f.start("03")
        f.cont("00 04 00 0b")
        f.cont("aa bb")
        #expect(f.att == [hex("0b aa bb")])
    }

    @Test("a start fragment arriving mid-PDU drops the old PDU (reported) and begins the new one")
    func startMidPDU() {
        let f = LinkFixture()
        f.start("0a 00 04 00 0b 01 02")
        f.start("03 00 04 00 0b aa bb")
        #expect(f.att == [hex("0b aa bb")])
        #expect(f.errors.count == 1)
        #expect(f.errors.first?.contains("previous PDU dropped") == true)
        #expect(f.errors.first?.hasPrefix("start fragment while 7 byte(s)") == true, "\(f.errors)")
    }

    @Test("a start fragment after a 1-byte start (length still unknown) is reported, not trapped on")
    func startAfterPartialLength() {
        let f = LinkFixture()
        f.start("05")
        f.start("01 00 04 00 1e")
        #expect(f.att == [hex("1e")])
        #expect(f.errors.count == 1)
        #expect(f.errors.first?.contains("previous PDU dropped") == true)
    }

    @Test("an orphan continuation is dropped and reported")
    func orphanContinuation() {
        let f = LinkFixture()
        f.cont("0b 01 02")
        #expect(f.att.isEmpty)
        #expect(f.errors == ["continuation fragment (3 bytes) without a start fragment; dropped"])
        // The next whole PDU still goes through.
        f.start("01 00 04 00 1e")
        #expect(f.att == [hex("1e")])
    }

    @Test("a continuation after a completed PDU is an orphan")
    func continuationAfterComplete() {
        let f = LinkFixture()
        f.start("01 00 04 00 1e")
        f.cont("ff")
        #expect(f.att == [hex("1e")])
        #expect(f.errors.count == 1)
    }

    @Test("data past the announced length is dropped and reported")
    func overflow() {
        let f = LinkFixture()
        f.start("03 00 04 00 0b 01")
        f.cont("02 03 04")
        #expect(f.att.isEmpty)
        #expect(f.errors == ["PDU longer than its basic header says (5 > 3 bytes); dropped"])
        f.cont("05")
        #expect(f.errors.count == 2) // the state was reset: this is now an orphan
        f.start("01 00 04 00 1e")
        #expect(f.att == [hex("1e")])
    }

    @Test("a single start fragment longer than its length is dropped")
    func overflowInStart() {
        let f = LinkFixture()
        f.start("01 00 04 00 1e ff")
        #expect(f.att.isEmpty)
        #expect(f.errors.count == 1)
    }

    @Test("a start fragment that cuts a PDU short and is itself too long reports two drops (l2cap fuzz finding)")
    func interruptingOverflow() {
        let f = LinkFixture()
        f.start("05 00 04 00 0b")
        f.start("00 00 04 00 13")
        #expect(f.att.isEmpty)
        #expect(f.errors == ["start fragment while 4 byte(s) of the previous PDU were missing; previous PDU dropped",
                             "PDU longer than its basic header says (1 > 0 bytes); dropped"])
    }

    @Test("ACL for another handle is ignored by the link; ACL through the host reaches it")
    func handleFilter() throws {
        let f = LinkFixture()
        f.ctl.deliver(h4("02 02 20 05 00 01 00 04 00 1e"), h4("02 01 20 05 00 01 00 04 00 13"))
        _ = try f.host.pump(until: Instant.now().adding(ms: 100)) { f.ctl.inbox.isEmpty }
        #expect(f.att == [hex("13")])
    }

    @Test("PDUs on unregistered channels are dropped silently")
    func unknownChannel() {
        let f = LinkFixture()
        f.start("02 00 40 00 aa bb")
        #expect(f.att.isEmpty && f.errors.isEmpty && f.ctl.sent.isEmpty)
    }

    @Test("Disconnection Complete closes the link: nothing is received or sent afterwards")
    func disconnectCloses() throws {
        let f = LinkFixture()
        f.start("0a 00 04 00 0b")
        f.ctl.deliver(h4("04 05 04 00 01 00 13"), h4("02 01 20 05 00 01 00 04 00 13"))
        _ = try f.host.pump(until: Instant.now().adding(ms: 100)) { f.ctl.inbox.isEmpty }
        #expect(!f.link.isOpen)
        #expect(f.att.isEmpty)
        f.link.send(cid: CID.att, hex("0a 03 00"))
        #expect(f.ctl.sent.isEmpty)
    }

    @Test("send frames the payload with the basic header")
    func sendFrames() {
        let f = LinkFixture()
        f.link.send(cid: CID.att, hex("12 10 00 ff"))
        #expect(f.ctl.sentHex() == ["02 01 00 08 00 04 00 04 00 12 10 00 ff"])
    }
}

@Suite("L2CAP LE signalling and SMP")
struct L2CAPSignallingTests {
    @Test("Connection Parameter Update Request is answered accepted (0x13, result 0) and LE Connection Update is queued")
    func parameterUpdateAccepted() {
        let f = LinkFixture()
        var seen: [(ConnectionParameters, Bool)] = []
        f.link.onConnectionParameterRequest = { seen.append(($0, $1)) }
        f.link.receive(try! ACLPacket.decode(hex("01 20 10 00 0c 00 05 00 12 01 08 00 18 00 28 00 00 00 90 01")))
        #expect(f.ctl.sentHex() == [
            "02 01 00 0a 00 06 00 05 00 13 01 02 00 00 00",
            "01 13 20 0e 01 00 18 00 28 00 00 00 90 01 00 00 00 00",
        ])
        #expect(seen.count == 1)
        #expect(seen.first?.0 == ConnectionParameters(intervalMin: 0x18, intervalMax: 0x28, latency: 0, supervisionTimeout: 0x190))
        #expect(seen.first?.1 == true)
    }

    @Test("an out-of-range request is rejected (result 1) and no LE Connection Update is sent")
    func parameterUpdateRejected() {
        let f = LinkFixture()
        // Interval min 5 (6.25 ms) is below 7.5 ms.
        f.start("0c 00 05 00 12 07 08 00 05 00 28 00 00 00 90 01")
        #expect(f.ctl.sentHex() == ["02 01 00 0a 00 06 00 05 00 13 07 02 00 01 00"])
        #expect(!f.ctl.sentOpcodes.contains(0x2013))
    }

    @Test("the application's policy can reject valid parameters")
    func parameterPolicy() {
        let f = LinkFixture()
        f.link.acceptConnectionParameters = { _ in false }
        f.start("0c 00 05 00 12 02 08 00 18 00 28 00 00 00 90 01")
        #expect(f.ctl.sentHex() == ["02 01 00 0a 00 06 00 05 00 13 02 02 00 01 00"])
    }

    @Test("a Connection Parameter Update Request with the wrong data length gets Command Reject")
    func parameterUpdateMalformed() {
        let f = LinkFixture()
        f.start("0a 00 05 00 12 03 06 00 18 00 28 00 00 00")
        #expect(f.ctl.sentHex() == ["02 01 00 0a 00 06 00 05 00 01 03 02 00 00 00"])
    }

    @Test("unknown or unsupported signalling requests get Command Reject (command not understood)",
          arguments: [("0e 00 05 00 14 04 0a 00 80 00 40 00 17 00 17 00 0a 00", UInt8(4)),
                      ("08 00 05 00 06 05 04 00 40 00 40 00", 5),
                      ("04 00 05 00 30 06 00 00", 6)])
    func commandReject(pdu: String, identifier: UInt8) {
        let f = LinkFixture()
        f.start(pdu)
        #expect(f.ctl.sentHex() == ["02 01 00 0a 00 06 00 05 00 01 \(Hex.int(identifier, width: 2)) 02 00 00 00"])
    }

    @Test("a malformed signalling command with a readable identifier gets Command Reject; identifier 0 gets nothing")
    func malformedSignalling() {
        let f = LinkFixture()
        f.start("05 00 05 00 12 09 08 00 18")
        #expect(f.ctl.sentHex() == ["02 01 00 0a 00 06 00 05 00 01 09 02 00 00 00"])
        let g = LinkFixture()
        g.start("03 00 05 00 12 00 08")
        #expect(g.ctl.sent.isEmpty)
    }

    @Test("unsolicited responses and rejects are ignored")
    func unsolicitedResponses() {
        let f = LinkFixture()
        f.start("06 00 05 00 13 01 02 00 00 00")
        f.start("06 00 05 00 01 01 02 00 00 00")
        #expect(f.ctl.sent.isEmpty)
    }

    @Test("SMP Pairing Request gets Pairing Failed, Pairing Not Supported (05 05)")
    func pairingRequest() {
        let f = LinkFixture()
        var codes: [UInt8] = []
        f.link.onSMP = { codes.append($0) }
        f.start("07 00 06 00 01 03 00 01 10 07 07")
        #expect(f.ctl.sentHex() == ["02 01 00 06 00 02 00 06 00 05 05"])
        #expect(codes == [0x01])
    }

    @Test("SMP Security Request gets Pairing Failed 0x05")
    func securityRequest() {
        let f = LinkFixture()
        f.start("02 00 06 00 0b 01")
        #expect(f.ctl.sentHex() == ["02 01 00 06 00 02 00 06 00 05 05"])
    }

    @Test("other SMP PDUs and empty SMP PDUs get no answer")
    func otherSMP() {
        let f = LinkFixture()
        f.start("02 00 06 00 05 05")
        f.start("00 00 06 00")
        #expect(f.ctl.sent.isEmpty)
    }

    @Test("our own Connection Parameter Update Request encodes with incrementing identifiers (peripheral link)")
    func ownRequest() {
        let f = LinkFixture(peripheral: true)
        f.host.setACLBuffers(length: 27, packets: 8)
        let p = ConnectionParameters(intervalMin: 0x18, intervalMax: 0x28, latency: 0, supervisionTimeout: 0x190)
        f.link.requestConnectionParameters(p)
        f.link.requestConnectionParameters(p)
        #expect(f.ctl.sentHex() == ["02 01 00 10 00 0c 00 05 00 12 01 08 00 18 00 28 00 00 00 90 01",
                                    "02 01 00 10 00 0c 00 05 00 12 02 08 00 18 00 28 00 00 00 90 01"])
    }

    @Test("signalling commands decode strictly and round trip")
    func signallingCodec() throws {
        let wire = hex("12 01 08 00 18 00 28 00 00 00 90 01")
        let c = try SignallingCommand.decode(wire)
        #expect(c.code == 0x12 && c.identifier == 1 && c.data.count == 8)
        #expect(c.encoded == wire)
        for p in prefixes(wire) { #expect(throws: WireError.self) { try SignallingCommand.decode(p) } }
        #expect(throws: WireError.self) { try SignallingCommand.decode(wire + [0]) }
        #expect(SignallingCommand.name(0x12) == "Connection Parameter Update Request")
        #expect(SignallingCommand.name(0x7F) == "Unknown signalling command")
        #expect(CID.name(4) == "ATT" && CID.name(5) == "LE Signalling" && CID.name(6) == "SMP" && CID.name(0x40) == "dynamic" && CID.name(0x20) == "reserved")
        // SMP's names live with its PDUs (BLESMP): one table.
        #expect(SMPCode(rawValue: 0x0B).name == "Security Request" && PairingFailedReason(rawValue: 0x05).name == "Pairing Not Supported")
    }
}

@Suite("L2CAP signalling declarations")
struct SignallingDeclarationTests {
    @Test("every declared command round-trips its fields, and its row gives the name and request kind")
    func everyCommand() throws {
        var seen = Set<UInt8>()
        for d in SignallingCommand.declarations {
            #expect(seen.insert(d.code).inserted, "code 0x\(Hex.int(d.code, width: 2)) declared twice")
            let values = d.fields.indices.map { UInt16(0x0101 * ($0 + 1)) }
            let c = SignallingCommand.make(d.code, identifier: 7, values)
            #expect(try SignallingCommand.decode(c.encoded).values() == values)
            #expect(SignallingCommand.name(d.code) == d.name && SignallingCommand.isRequest(d.code) == d.isRequest)
            if !d.fields.isEmpty { #expect(c.traceFields.count == d.fields.count) }
        }
        // The requests of Core Vol 3 Part A 4 on LE.
        #expect(Set(SignallingCommand.declarations.filter(\.isRequest).map(\.code)) == [0x06, 0x12, 0x14, 0x17, 0x19])
        #expect(throws: WireError.self) { try SignallingCommand(code: 0x13, identifier: 1, data: [0]).values() }
        #expect(throws: WireError.self) { try SignallingCommand(code: 0x7F, identifier: 1, data: []).values() }
    }
}
