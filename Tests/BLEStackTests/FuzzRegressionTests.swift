import Testing
@testable import BLEWire
@testable import BLETransport
@testable import BLEATT
@testable import BLEHCI

/// Inputs the libFuzzer harnesses in Fuzz/ found, kept as unit tests. Each
/// names the harness and the invariant the input broke; the hex is the
/// harness's input (or, for harnesses that take a script, the packet in it).
@Suite("Fuzz regressions")
struct FuzzRegressionTests {
    // att: "what decodes encodes back to what decodes". A Find Information
    // Response (format 2) whose first UUID is a 16-bit UUID written in 128-bit
    // form, the second a true 128-bit UUID: the encoder chose format 1 from the
    // first entry alone and wrote 2-byte and 16-byte UUIDs in one list.
    @Test("a Find Information Response mixing UUID widths encodes in format 2")
    func findInformationMixedWidths() throws {
        let bytes = hex("05 02 01 00 fb 34 9b 5f 80 00 00 80 00 10 00 00 00 28 00 00 02 00 00 01 02 03 04 05 06 07 08 09 0a 0b 0c 0d 0e 0f")
        let pdu = try ATT.decode(bytes)
        guard let list = (pdu as? ATT.FindInformationResponse)?.information else { Issue.record("decoded as \(pdu)"); return }
        #expect(list.map(\.uuid.uint16) == [0x2800, nil])
        #expect(pdu.encoded == bytes)
        #expect(try ATT.decode(pdu.encoded) == pdu)
    }

    // hci-event: "a command decodes and encodes back to its bytes". LE
    // Connection Update with handle 0x1800: the declared decoder masked the
    // handle to 12 bits as events' handles are, so 0x0800 was encoded back.
    // A command's handle is the 16-bit field it was sent with.
    @Test("LE Connection Update with the handle's upper bits set round-trips")
    func connectionUpdateHandleBits() throws {
        let cmd = try HCICommand.decode(hex("13 20 0e 00 18 00 28 00 00 00 90 01 00 00 00 00 00"))
        let u = try LEConnectionUpdate.decode(cmd.parameters)
        #expect(u.handle == 0x1800)
        #expect(u.command.parameters == cmd.parameters)
    }

    @Test("a Find Information Response of 16-bit UUIDs only still encodes in format 1")
    func findInformationShortForm() throws {
        let pdu = ATT.FindInformationResponse([HandleUUID(handle: 0x0011, uuid: BluetoothUUID(uint16: 0x2902))])
        #expect(pdu.encoded == hex("05 01 11 00 02 29"))
    }

    // transport-spec: "a spec's text parses back to it". tcp:[[x]]:1 parsed to
    // host "[x]", printed as tcp:[x]:1, which parses to host "x".
    @Test("tcp: hosts with brackets left after the IPv6 pair are refused", arguments: [
        "74 63 70 3a 5b 5b 78 5d 5d 3a 31",  // tcp:[[x]]:1
        "74 63 70 3a 5b 5b 5d 5d 3a 31",     // tcp:[[]]:1 (printed as tcp:[]:1, which has no host)
        "74 63 70 3a 5b 61 3a 31",           // tcp:[a:1
    ])
    func transportSpecBrackets(_ input: String) {
        let text = String(decoding: hex(input), as: UTF8.self)
        #expect(throws: TransportError.self) { try TransportSpec.parse(text) }
        #expect((try? TransportSpec.parse("tcp:[::1]:9000")) == .tcp(host: "::1", port: 9000))
    }

    // transport-spec: uart:PATH؀ (U+0600, a Prepend scalar) printed as serial:PATH؀,115200,
    // where "؀," is one Character; a Character split found no comma and the reparse kept
    // ",115200" in the path. Separators are now found among Unicode scalars.
    @Test("a separator fused into one Character with its neighbour still separates", arguments: [
        "uart:/vt:/v//t:/v+k++++\u{600}",
        "serial:/dev/tty\u{600},9600,rtscts",
        "tcp:host\u{600}:9000",
        "tcp:[::1\u{301}]:9000",
        "unix:\u{301}/run/x",
    ])
    func transportSpecGraphemes(_ text: String) throws {
        let spec = try TransportSpec.parse(text)
        #expect(try TransportSpec.parse(spec.description) == spec)
    }

    @Test("the fused separators split where the scalars say")
    func transportSpecGraphemeFields() throws {
        #expect(try TransportSpec.parse("uart:/dev/tty\u{600}") == .serial(path: "/dev/tty\u{600}", baud: 115200, rtscts: false))
        #expect(try TransportSpec.parse("serial:/dev/tty\u{600},9600") == .serial(path: "/dev/tty\u{600}", baud: 9600, rtscts: false))
        #expect(try TransportSpec.parse("tcp:host\u{600}:9000") == .tcp(host: "host\u{600}", port: 9000))
    }
}
