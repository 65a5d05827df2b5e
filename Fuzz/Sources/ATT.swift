// att: the client side of ATT. The input is a GATT session as the server
// would play it:
//   byte 0:   which procedure the client runs (low 4 bits) and its MTU (high bits)
//   then:     length-prefixed ATT PDUs, the server's side, delivered one per
//             read in order whatever the client asked
// Every PDU is decoded on its own first: what decodes must encode back to
// its bytes (a UUID may take its shorter form). Then the procedure runs over
// an ATTBearer on an L2CAPLink on an HCIHost whose controller plays the PDUs;
// when they run out the controller "closes", which ends the procedure at
// once. PDUs the procedure did not consume reach the bearer unsolicited.
import BLEWire
import BLETransport
import BLEHCI
import BLEL2CAP
import BLEATT
import BLEGATT
import BLETrace

/// Decodes one PDU and holds it to its encoding.
func checkATTPDU(_ b: [UInt8]) {
    _ = PacketDecoder().attLines(b)
    guard let pdu = try? ATT.decode(b) else { return }
    let e = pdu.encoded
    require(pdu.opcode.rawValue == b[0], "opcode changed in decoding")
    if e == b { return }
    // Only PDUs that carry UUIDs may differ (a 16-bit UUID sent in its 128-bit form
    // is encoded in 2 bytes); the encoding must then be a fixed point.
    let withUUID: Set<UInt8> = [0x05, 0x08, 0x10]
    require(withUUID.contains(b[0]), "ATT \(pdu.opcode) does not encode back to its bytes: \(Hex.string(b)) -> \(Hex.string(e))")
    guard let again = try? ATT.decode(e) else {
        require(false, "re-encoded \(pdu.opcode) does not decode: \(Hex.string(b)) -> \(Hex.string(e))")
        return
    }
    require(again.encoded == e, "ATT encoding is not a fixed point for \(pdu.opcode)")
}

func fuzzATT(_ data: [UInt8]) {
    var input = FuzzInput(data)
    let selector = input.u8()
    var pdus: [[UInt8]] = []
    while !input.isAtEnd { pdus.append(input.chunk()) }
    for p in pdus { checkATTPDU(p) }

    let transport = FakeController()
    let host = HCIHost(transport: transport)
    host.setACLBuffers(length: 251, packets: 1 << 20)
    let link = L2CAPLink(host: host, handle: linkHandle)
    let bearer = ATTBearer(link: link)
    bearer.preferredMTU = [23, 24, 185, 517][Int(selector >> 6)]
    var notifications = 0, indications = 0
    bearer.onNotification = { _ in notifications += 1 }
    bearer.onIndication = { _ in indications += 1 }
    for p in pdus {
        var w = ByteWriter()
        w.u16(UInt16(p.count)); w.u16(CID.att); w.append(p)
        transport.inbox.append(ACLPacket(handle: linkHandle, boundary: .firstFlushable, data: w.bytes).packet)
    }

    let gatt = GATTClient(bearer: bearer)
    let ledService = BluetoothUUID("36353433-3231-3039-3837-363534333231")!
    let service = Service(uuid: ledService, start: 0x000E, end: 0x0014)
    let characteristic = Characteristic(declarationHandle: 0x000F, properties: [.read, .write, .notify],
                                        valueHandle: 0x0010, uuid: BluetoothUUID(uint16: 0x2A00), end: 0x0014)
    do {
        switch selector & 0x0F {
        case 0: _ = try bearer.exchangeMTU()
        case 1: _ = try gatt.discoverPrimaryServices()
        case 2: _ = try gatt.discoverPrimaryService(uuid: ledService)
        case 3: _ = try gatt.discoverCharacteristics(of: service)
        case 4: _ = try gatt.discoverDescriptors(of: characteristic)
        case 5: _ = try gatt.readLong(0x0003)
        case 6: _ = try gatt.read(type: GATTUUID.databaseHash)
        case 7: try gatt.write(0x0010, value: [0xFF, 0x00, 0x00], withResponse: true)
        case 8: try gatt.subscribe(characteristic)
        case 9: _ = try gatt.read(0x0010)
        default:
            // What `attled gatt` does: MTU, services, characteristics, descriptors.
            _ = try bearer.exchangeMTU()
            for s in try gatt.discoverPrimaryServices() {
                for c in try gatt.discoverCharacteristics(of: s) { _ = try gatt.discoverDescriptors(of: c) }
            }
        }
    } catch {
        _ = "\(error)" // every error must describe itself without trapping
    }
    // What the procedure left unread arrives unsolicited.
    while transport.pendingInbox > 0, host.failure == nil {
        guard case let .packet(p)? = try? transport.receive(timeoutMs: 0, wakeFD: -1) else { break }
        host.handle(p)
    }

    // The client's own PDUs: each decodes and fits the MTU; every indication was confirmed.
    var confirmations = 0
    for p in sentL2CAPPDUs(transport.sent, handle: linkHandle) {
        let payload = Array(p[4...])
        guard let pdu = try? ATT.decode(payload) else { require(false, "client sent an undecodable ATT PDU \(Hex.string(payload))"); return }
        require(payload.count <= max(Int(bearer.preferredMTU), 23) || pdu.opcode == .errorResponse, "client PDU longer than the MTU")
        if pdu.opcode == .handleValueConfirmation { confirmations += 1 }
    }
    require(confirmations == indications, "\(indications) indications but \(confirmations) confirmations")
    require(bearer.mtu >= 23 && bearer.mtu <= max(Int(bearer.preferredMTU), 23), "negotiated MTU \(bearer.mtu) out of range")
    _ = notifications
}
