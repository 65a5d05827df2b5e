// hci-event: the input is one HCI packet without its H4 indicator. It is
// decoded as an event, a command (with the parameter and return-parameter
// decoders the tracer uses) and an ACL packet; whatever decodes must encode
// back to the same bytes where the stack has an encoder. The event is then
// handed to an HCIHost, as if the controller had sent it.
import BLEWire
import BLETransport
import BLEHCI

func fuzzHCIEvent(_ data: [UInt8]) {
    if let ev = try? HCIEvent.decode(data) {
        require(data.count >= 2 && data.count == 2 + Int(data[1]), "event decoded with a wrong parameter length")
        switch ev {
        case .commandComplete(let cc):
            require(cc.returnParameters.count == Int(data[1]) - 3, "Command Complete return parameters miscounted")
            let rp = cc.returnParameters
            _ = try? LocalVersion.decode(rp)
            _ = try? BufferSize.decodeLE(rp)
            _ = try? BufferSize.decodeBREDR(rp)
        case let .leAdvertisingReport(reports, extended):
            require(!reports.isEmpty, "advertising report event with no reports")
            for r in reports where !extended { require(r.data.count <= 31, "legacy report with \(r.data.count) data bytes") }
        default:
            break
        }
    }

    if let cmd = try? HCICommand.decode(data) {
        require(cmd.encoded == data, "command does not encode back to its bytes")
        let p = cmd.parameters
        if let s = try? LEScanParameters.decode(p), p[0] <= 1 {
            require(s.command.parameters == p, "LE Set Scan Parameters round trip")
        }
        if let (s, phys) = try? LEScanParameters.decodeExtended(p), phys == 0x01, p[3] <= 1 {
            require(s.extendedCommand.parameters == p, "LE Set Extended Scan Parameters round trip")
        }
        if let c = try? LECreateConnection.decode(p) {
            require(c.command.parameters == p, "LE Create Connection round trip")
        }
        if let c = try? LECreateConnection.decodeExtended(p), p[9] == 0x01 {
            require(c.extendedCommand.parameters == p, "LE Extended Create Connection round trip")
        }
        if let u = try? LEConnectionUpdate.decode(p) {
            require(u.command.parameters == p, "LE Connection Update round trip")
        }
    }

    if let acl = try? ACLPacket.decode(data) {
        require(acl.encoded == data, "ACL packet does not encode back to its bytes")
    }

    // The host takes the event as from a controller: credits, command matching, handlers.
    let transport = FakeController()
    transport.answerCommands = false
    let host = HCIHost(transport: transport)
    var seen = 0
    host.onEvent { _ in seen += 1 }
    host.enqueue(HCI.Reset().command) { _ in }
    host.handle(HCIPacket(.event, data))
    host.handle(HCIPacket(.acl, data))
    host.sendACL(handle: 0x0001, pdu: [0x01, 0x00, 0x04, 0x00, 0x0A])
    require(host.commandCredits >= 0 && host.aclCredits >= 0, "negative credits")
}
