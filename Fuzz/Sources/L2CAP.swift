// l2cap: the input is a script of what arrives on one LE link, fed to an
// L2CAPLink through HCIHost (so ACL decoding and credits take part):
//   byte 0:            the controller's ACL buffer geometry (outgoing fragment size, count)
//   tag 0x00-0x7F:     an ACL fragment: bits 0-1 Packet_Boundary_Flag, bits 2-3
//                      Broadcast_Flag, bit 4 another connection's handle; then
//                      length byte and data
//   tag 0x80-0xBF:     Number Of Completed Packets for the link, count = tag & 0x3F
//   tag 0xC0:          a raw ACL packet (length byte, bytes as they are)
//   tag 0xC1:          Disconnection Complete for the link
//   tag 0xC2-0xFF:     a whole L2CAP PDU in one start fragment; (tag - 0xC2) % 4
//                      picks the channel (ATT, signalling, SMP, dynamic 0x0040)
// A model of the reassembly rules (start resets, continuation without start
// is dropped, overflow drops) must deliver the same PDUs the link delivers,
// and the link's answers on the signalling and SMP channels must follow the
// rules of Core Vol 3 Part A 4 and Part H 3.5.5.
import BLEWire
import BLETransport
import BLEHCI
import BLEL2CAP

let linkHandle: UInt16 = 0x0040

/// What the link must answer to one signalling C-frame payload: (code, identifier, result), nil for nothing.
func expectedSignallingAnswer(_ b: [UInt8]) -> (code: UInt8, id: UInt8, accepted: Bool?, params: ConnectionParameters?)? {
    let wellFormed = b.count >= 4 && b.count == 4 + (Int(b[2]) | Int(b[3]) << 8)
    guard wellFormed else {
        return b.count >= 2 && b[1] != 0 ? (0x01, b[1], nil, nil) : nil
    }
    let code = b[0], id = b[1], data = Array(b[4...])
    switch code {
    case 0x12:
        guard data.count == 8 else { return (0x01, id, nil, nil) }
        let v = (0..<4).map { UInt16(data[2 * $0]) | UInt16(data[2 * $0 + 1]) << 8 }
        let (minI, maxI, lat, to) = (v[0], v[1], v[2], v[3])
        // Core Vol 4 Part E 7.8.12 ranges; timeout > (1 + latency) * interval_max * 2.
        let ok = minI >= 6 && maxI <= 3200 && minI <= maxI && lat <= 499 && to >= 10 && to <= 3200
            && UInt32(to) * 4 > (1 + UInt32(lat)) * UInt32(maxI)
        let p = ConnectionParameters(intervalMin: minI, intervalMax: maxI, latency: lat, supervisionTimeout: to)
        return (0x13, id, ok, ok ? p : nil)
    case 0x06, 0x14, 0x17, 0x19:
        return id != 0 ? (0x01, id, nil, nil) : nil
    case 0x01, 0x07, 0x13, 0x15, 0x16, 0x18, 0x1A:
        return nil // responses and indications are never answered
    default:
        return id != 0 ? (0x01, id, nil, nil) : nil
    }
}

func fuzzL2CAP(_ data: [UInt8]) {
    var input = FuzzInput(data)
    let transport = FakeController()
    transport.answerCommands = false
    let host = HCIHost(transport: transport)
    let geometry = input.u8()
    host.setACLBuffers(length: 1 + Int(geometry & 0x3F), packets: 1 + Int(geometry >> 6))
    let link = L2CAPLink(host: host, handle: linkHandle)
    var gotATT: [[UInt8]] = [], gotDynamic: [[UInt8]] = []
    link.register(cid: CID.att) { gotATT.append($0) }
    link.register(cid: 0x0040) { gotDynamic.append($0) }
    var reassemblyErrors = 0
    link.onReassemblyError = { message in
        require(!message.isEmpty, "empty reassembly error")
        reassemblyErrors += 1
    }

    // The model.
    var rx: [UInt8] = []
    var rxActive = false
    var open = true
    var wantATT: [[UInt8]] = [], wantDynamic: [[UInt8]] = []
    var wantSignalling: [(code: UInt8, id: UInt8, accepted: Bool?, params: ConnectionParameters?)] = []
    var wantSMP = 0
    var wantErrors = 0 // a start cutting a PDU short, a continuation without a start, an overflow

    func model(_ acl: ACLPacket) {
        guard open, acl.handle == linkHandle else { return }
        if acl.isStart {
            if rxActive { wantErrors += 1 }
            rx = acl.data; rxActive = true
        } else {
            guard rxActive else { wantErrors += 1; return }
            rx += acl.data
        }
        guard rx.count >= 2 else { return }
        let expected = Int(UInt16(rx[0]) | UInt16(rx[1]) << 8) + 4
        if rx.count > expected { rx = []; rxActive = false; wantErrors += 1; return }
        guard rx.count == expected else { return }
        let cid = UInt16(rx[2]) | UInt16(rx[3]) << 8
        let payload = Array(rx[4...])
        rx = []; rxActive = false
        switch cid {
        case CID.att: wantATT.append(payload)
        case 0x0040: wantDynamic.append(payload)
        case CID.leSignalling: if let a = expectedSignallingAnswer(payload) { wantSignalling.append(a) }
        case CID.smp: if payload.first == 0x01 || payload.first == 0x0B { wantSMP += 1 }
        default: break
        }
    }

    func deliver(_ acl: ACLPacket) {
        model(acl)
        host.handle(acl.packet)
    }

    while !input.isAtEnd {
        let tag = input.u8()
        switch tag {
        case 0x00...0x7F:
            let acl = ACLPacket(handle: tag & 0x10 != 0 ? linkHandle + 1 : linkHandle,
                                boundary: ACLPacket.Boundary(rawValue: tag & 3)!, broadcast: (tag >> 2) & 3, data: input.chunk())
            deliver(acl)
        case 0x80...0xBF:
            host.handle(completedPackets(handle: linkHandle, count: UInt16(tag & 0x3F)))
        case 0xC0:
            let raw = input.chunk()
            if let acl = try? ACLPacket.decode(raw) { model(acl) }
            host.handle(HCIPacket(.acl, raw))
        case 0xC1:
            host.handle(disconnection(handle: linkHandle))
            open = false; rx = []; rxActive = false
        default:
            let cid: UInt16 = [CID.att, CID.leSignalling, CID.smp, 0x0040][Int(tag - 0xC2) % 4]
            let payload = input.chunk()
            var w = ByteWriter()
            w.u16(UInt16(payload.count)); w.u16(cid); w.append(payload)
            deliver(ACLPacket(handle: linkHandle, boundary: .firstFlushable, data: w.bytes))
        }
    }

    require(gotATT == wantATT, "ATT PDUs delivered differ from the reassembly model")
    require(gotDynamic == wantDynamic, "dynamic-channel PDUs delivered differ from the reassembly model")
    require(link.isOpen == open, "link open state")
    require(reassemblyErrors == wantErrors, "\(reassemblyErrors) reassembly errors reported, \(wantErrors) due")

    // Let every queued answer out, then compare the answers with the rules.
    var rounds = 0
    while open, host.unacknowledgedACL(handle: linkHandle) > 0, rounds < 100_000 {
        host.handle(completedPackets(handle: linkHandle, count: 0xFFFF))
        rounds += 1
    }
    let pdus = sentL2CAPPDUs(transport.sent, handle: linkHandle)
    var signalling: [[UInt8]] = [], smp: [[UInt8]] = []
    for p in pdus {
        let cid = UInt16(p[2]) | UInt16(p[3]) << 8
        switch cid {
        case CID.leSignalling: signalling.append(Array(p[4...]))
        case CID.smp: smp.append(Array(p[4...]))
        default: require(false, "the link sent a PDU on cid \(cid)")
        }
    }
    require(open ? signalling.count == wantSignalling.count : signalling.count <= wantSignalling.count,
            "\(signalling.count) signalling answers for \(wantSignalling.count) due")
    for (got, want) in zip(signalling, wantSignalling) {
        guard let cmd = try? SignallingCommand.decode(got) else { require(false, "the link sent a malformed signalling command"); return }
        require(cmd.code == want.code && cmd.identifier == want.id, "signalling answer \(cmd.code)/\(cmd.identifier), wanted \(want.code)/\(want.id)")
        require(cmd.data.count == 2, "signalling answer of \(cmd.data.count) bytes")
        if let a = want.accepted { require(cmd.data == (a ? [0, 0] : [1, 0]), "Connection Parameter Update answered \(cmd.data), wanted accepted=\(a)") }
    }
    require(open ? smp.count == wantSMP : smp.count <= wantSMP, "\(smp.count) SMP answers for \(wantSMP) due")
    require(smp.allSatisfy { $0 == [0x05, 0x05] }, "SMP answer is not Pairing Failed (Pairing Not Supported)")
    // Accepted parameters are applied with LE Connection Update, in order (even when the
    // answer itself was lost to a disconnection: the command was queued before).
    let accepted = wantSignalling.compactMap(\.params)
    let updates = transport.sent.compactMap { p -> LEConnectionUpdate? in
        guard p.type == .command, let c = try? HCICommand.decode(p.bytes), c.opcode == LEConnectionUpdate.opcode else { return nil }
        return try? LEConnectionUpdate.decode(c.parameters)
    }
    require(updates.count <= accepted.count, "more LE Connection Update commands than accepted requests")
    for (u, p) in zip(updates, accepted) {
        require(u.handle == linkHandle && u.parameters == p, "LE Connection Update does not carry the accepted parameters")
    }
}
