// signalling: the input is one C-frame payload (first byte even: LE
// signalling channel) or one SMP PDU (first byte odd), after a selector byte.
// The signalling decoder must round-trip what it accepts; the link must
// answer as Core Vol 3 Part A 4 and Part H say; the tracer must describe it.
import BLEWire
import BLETransport
import BLEHCI
import BLEL2CAP
import BLETrace
import BLESMP

func fuzzSignalling(_ data: [UInt8]) {
    guard let selector = data.first else { return }
    let payload = Array(data.dropFirst())
    let cid = selector & 1 == 0 ? CID.leSignalling : CID.smp

    if cid == CID.leSignalling, let cmd = try? SignallingCommand.decode(payload) {
        require(cmd.encoded == payload, "signalling command does not encode back to its bytes")
        _ = SignallingCommand.name(cmd.code)
        if cmd.code == SignallingCommand.connectionParameterUpdateRequest, let p = try? cmd.connectionParameters() {
            require(SignallingCommand.connectionParameterUpdateRequest(identifier: cmd.identifier, p).encoded == payload,
                    "Connection Parameter Update Request round trip")
            _ = p.isValid
        }
    } else if let code = payload.first {
        _ = (SMPCode(rawValue: code).name, PairingFailedReason(rawValue: payload.count > 1 ? payload[1] : 0).name)
        _ = SMPPDU.traceFields(bytes: payload, showKeys: false)
    }

    // The link's answer.
    let transport = FakeController()
    transport.answerCommands = false
    let host = HCIHost(transport: transport)
    host.setACLBuffers(length: 27, packets: 1 << 20)
    let link = L2CAPLink(host: host, handle: linkHandle)
    var w = ByteWriter()
    w.u16(UInt16(truncatingIfNeeded: payload.count)); w.u16(cid); w.append(payload)
    let acl = ACLPacket(handle: linkHandle, boundary: .firstFlushable, data: w.bytes)
    if payload.count <= 0xFFFF { link.receive(acl) }
    let answers = sentL2CAPPDUs(transport.sent, handle: linkHandle).map { Array($0[4...]) }
    if cid == CID.smp {
        let due = payload.first == SMPCode.pairingRequest.rawValue || payload.first == SMPCode.securityRequest.rawValue
        require(answers == (due ? [[0x05, 0x05]] : []), "SMP answer \(answers) to \(Hex.string(payload.prefix(2)))")
    } else if let want = expectedSignallingAnswer(payload) {
        require(answers.count == 1, "\(answers.count) answers to one signalling command")
        if let a = answers.first {
            require(a.count == 6 && a[0] == want.code && a[1] == want.id, "signalling answer \(Hex.string(a))")
        }
    } else {
        require(answers.isEmpty, "a signalling command that needs no answer was answered")
    }

    // The tracer, both directions.
    let decoder = PacketDecoder()
    for dir in [Direction.received, .sent] {
        let d = decoder.decode(acl.packet, dir)
        _ = Tracer.format(d, packet: acl.packet, number: 1, seconds: 0, hex: true)
    }
}
