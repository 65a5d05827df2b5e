// gatt-server: the server side of ATT and GATT (BLEGATTServer). A
// GATTServer session on an ATTBearer, on a peripheral-role L2CAPLink, on an
// HCIHost whose in-memory controller delivers the client's PDUs. The input:
//   byte 0: bits 0-1 the database: the pycom, particle or harness board as
//           `attled serve` plays it (Boards.database, with its ServedLED),
//           or a test database (below); bits 2-3 the bearer's preferred MTU
//           (23, 24, 185, 517); bit 4 the link is encrypted from the start;
//           bit 5 the client has a bond; bit 6 `secure` (the LED values, or
//           every value outside GAP and GATT, behind encryption); bit 7 a
//           bonded client's subscriptions restored (every CCCD: notify
//           and/or indicate as the characteristic allows).
//   then records `op, len, bytes`: op % 8 = 0-3 the bytes are one ATT PDU
//           from the client, delivered as one inbound ACL packet; 4 the
//           application updates a value (GATTServer.update: bytes[0] picks
//           the characteristic, the rest is the value, cut to its maximum
//           length), notified or indicated to the subscribed client; 5 the
//           same value sent to this client only (GATTServerSession.send);
//           6 Service Changed indicated whatever the CCCD says
//           (GATTServerSession.indicate); 7 the link becomes encrypted
//           (bond = bytes[0] bit 0 when there is a byte), session.encrypted().
// The test database: GAP, GATT, then service fff0 (an include of the
// secondary service ffe0; fff1 read+write holding 512 bytes; fff2 read-only,
// 60 bytes; fff3 read+write behind encryption with a User Description; fff4
// read+notify+indicate and its CCCD; fff5 write without response + signed,
// 20 bytes at most; fff6 write-only; a 128-bit read+write+notify value of 8
// bytes at most), ffe0 (ffe1 read+indicate), and a 128-bit service at
// 0x0030-0x004F whose attributes sit at given handles with gaps.
// Invariants, after each record:
//   - every PDU the server sends decodes, encodes back to its bytes, has a
//     tracer line, fits the negotiated MTU, and is a response, an error, a
//     confirmation, a notification or an indication (nothing else);
//   - a request (ATT's table says .request; an unknown opcode with the
//     command flag clear too) is answered by exactly one PDU, its response
//     or an Error Response naming its opcode (an undecodable one: the
//     error); a command, an unknown command, a confirmation, a response or
//     a notification from the client by none; a client's indication by one
//     confirmation. A PDU longer than ATT_MTU is not served: a request
//     gets Invalid PDU (handle 0), anything else nothing; nothing else may
//     happen for it either. Records of ops 4-7 are answered by nothing;
//   - responses hold what the database says: Exchange MTU our MTU (and the
//     bearer takes the smaller), Read and Read Blob the value's bytes (or an
//     error), discovery handles inside the requested range in increasing
//     order, Prepare Write echoes the request, a successful write leaves
//     the value written; nothing readable only over an encrypted link is
//     read, notified or written on a plain one;
//   - at most one indication is outstanding: no second Handle Value
//     Indication before a confirmation; every indication names a value that
//     indicates; a notification only to a client subscribed to it; a
//     confirmation of an outstanding indication is reported once;
//   - no value grows beyond its maximum length (512 at most); a client's PDU
//     changes only values it may write (and the harness board's button
//     after a command, to that command), a read-only value never changes.
import BLEWire
import BLEHCI
import BLEL2CAP
import BLEATT
import BLEGATT
import BLEGATTServer
import BLETrace
import LEDProfile
import AttledServe

/// The link's security as the session asks for it.
final class FuzzLinkSecurity { var encrypted = false, bonded = false }

/// The databases, built once: key = database index * 2 + secure.
nonisolated(unsafe) private var gattServerDatabases: [Int: GATTServerDatabase] = [:]

private func u16(_ v: UInt16) -> BluetoothUUID { BluetoothUUID(uint16: v) }

/// The test database (layout at the top of this file).
func gattServerTestDatabase() throws -> GATTServerDatabase {
    let long = (0..<512).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 1) }
    let custom = BluetoothUUID("0000fff9-1234-5678-9abc-def012345678")!
    let service128 = BluetoothUUID("0000ffd0-1234-5678-9abc-def012345678")!
    return try GATTServerDatabase(services: [
        StandardServices.gap(name: "attled-fuzz", appearance: 0x0340),
        StandardServices.gatt(),
        ServiceDefinition(uuid: u16(0xFFF0), includes: [IncludeDefinition(uuid: u16(0xFFE0))], characteristics: [
            CharacteristicDefinition(uuid: u16(0xFFF1), properties: [.read, .write], value: long),
            CharacteristicDefinition(uuid: u16(0xFFF2), properties: .read, value: (0..<60).map { UInt8($0) }),
            CharacteristicDefinition(uuid: u16(0xFFF3), properties: [.read, .write], value: [0x42],
                                     permissions: [.read, .write, .readEncrypted, .writeEncrypted], maxLength: 16,
                                     descriptors: [DescriptorDefinition(uuid: GATTUUID.userDescription, value: Array("secret".utf8))]),
            CharacteristicDefinition(uuid: u16(0xFFF4), properties: [.read, .notify, .indicate], value: [0x01]),
            CharacteristicDefinition(uuid: u16(0xFFF5), properties: [.writeWithoutResponse, .authenticatedSignedWrites], maxLength: 20),
            CharacteristicDefinition(uuid: u16(0xFFF6), properties: .write, value: [0x00], maxLength: 4),
            CharacteristicDefinition(uuid: custom, properties: [.read, .write, .notify], value: [1, 2, 3], maxLength: 8),
        ]),
        ServiceDefinition(uuid: u16(0xFFE0), primary: false, characteristics: [
            CharacteristicDefinition(uuid: u16(0xFFE1), properties: [.read, .indicate], value: [0xE1]),
        ]),
        ServiceDefinition(uuid: service128, characteristics: [
            CharacteristicDefinition(uuid: u16(0xFFD1), properties: [.read, .write, .notify], value: [0xD1], maxLength: 2,
                                     descriptors: [DescriptorDefinition(uuid: GATTUUID.clientCharacteristicConfiguration, handle: 0x0045),
                                                   DescriptorDefinition(uuid: GATTUUID.userDescription, value: Array("gap".utf8))],
                                     declarationHandle: 0x0040, valueHandle: 0x0042),
        ], handle: 0x0030, end: 0x004F),
    ])
}

/// Database `index` (pycom, particle, harness, test), plain or `secure`.
func gattServerDatabase(_ index: Int, secure: Bool) -> GATTServerDatabase {
    let key = index * 2 + (secure ? 1 : 0)
    if let db = gattServerDatabases[key] { return db }
    let built: GATTServerDatabase?
    switch index {
    case 0: built = try? Boards.database(.pycom, name: "CassarTech", secure: secure)
    case 1: built = try? Boards.database(.particle, name: "Particle", secure: secure)
    case 2: built = try? Boards.database(.harness, name: "Harness", secure: secure)
    default: built = (try? gattServerTestDatabase()).map { secure ? $0.requiringEncryption() : $0 }
    }
    guard let db = built else { require(false, "database \(index) cannot be built"); fatalError() }
    gattServerDatabases[key] = db
    return db
}

/// What the server must send for one client PDU.
enum GATTServerAnswer: Equatable {
    case nothing
    /// Its response or an Error Response naming it; `malformed`: the error only.
    case response(ATTOpcode, malformed: Bool)
    /// A Handle Value Confirmation (the client sent an indication).
    case confirmation
    /// An Error Response Invalid PDU naming it, handle 0 (a request over ATT_MTU).
    case invalidPDU(ATTOpcode)
}

func fuzzGATTServer(_ data: [UInt8]) {
    var input = FuzzInput(data)
    let config = input.u8()
    let db = gattServerDatabase(Int(config & 3), secure: config & 0x40 != 0)
    let preferred = [23, 24, 185, 517][Int(config >> 2 & 3)]
    let security = FuzzLinkSecurity()
    security.encrypted = config & 0x10 != 0
    security.bonded = config & 0x20 != 0

    let transport = FakeController()
    let host = HCIHost(transport: transport)
    host.setACLBuffers(length: 251, packets: 1 << 20)
    let link = L2CAPLink(host: host, handle: linkHandle, peripheral: true)
    let bearer = ATTBearer(link: link)
    bearer.preferredMTU = UInt16(preferred)
    guard let server = try? GATTServer(database: db) else { require(false, "GATTServer refused a valid database"); return }
    let peer = DeviceAddress(BDAddress(wire: [0x55, 0x44, 0x33, 0x22, 0x11, 0xC0]), .random)
    let session = server.attach(bearer, peer: peer, isEncrypted: { security.encrypted }, hasKeys: { security.bonded })
    let led = ServedLED(server: server)
    require(config & 3 == 3 || led != nil, "a board's database has no LED")
    if config & 0x80 != 0 {
        var subs: [UInt16: UInt16] = [:]
        for c in db.characteristics where c.cccdHandle != nil {
            subs[c.valueHandle] = (c.properties.contains(.notify) ? 1 : 0) | (c.properties.contains(.indicate) ? 2 : 0)
        }
        session.restore(subs)
    }
    let serviceChanged = db.characteristics.first { $0.uuid == GATTUUID.serviceChanged }!.valueHandle
    let command = led?.led.command?.valueHandle, button = led?.led.notifier?.valueHandle

    // What the server reports, checked as it happens.
    var confirmedEvents = 0
    var commandWritten: UInt8? = nil
    server.subscribe { [unowned server] e in
        switch e {
        case let .write(s, w):
            require(s === session, "a write reported for another session")
            guard let a = server.database[w.handle] else { require(false, "a write reported on 0x\(Hex.int(w.handle, width: 4)), which is not in the database"); return }
            require(a.permissions.contains(.write), "a write reported on 0x\(Hex.int(w.handle, width: 4)), which is not writable")
            require(security.encrypted || !a.permissions.contains(.writeEncrypted), "a write to 0x\(Hex.int(w.handle, width: 4)) on a plain link")
            require(a.perClient || a.value == w.value, "the write reported is not the value stored")
            if w.handle == command { commandWritten = w.value.first }
        case let .subscribed(_, c, _, _):
            require(c.cccdHandle != nil, "subscribed to a characteristic without a CCCD")
        case .confirmed:
            confirmedEvents += 1
        case .securityNeeded:
            require(!security.encrypted, "security asked for on an encrypted link")
        }
    }

    let decoder = PacketDecoder()
    var mark = 0
    var indicating = false
    while !input.isAtEnd {
        let op = input.u8()
        let bytes = input.chunk()
        let before = server.database
        let mtuBefore = bearer.mtu
        let confirmedBefore = confirmedEvents
        commandWritten = nil
        var answer = GATTServerAnswer.nothing
        var request: (any ATTPDU)? = nil
        var confirmsIndication = false
        var delivered = false
        switch op % 8 {
        case 0...3:
            _ = decoder.attLines(bytes, handle: linkHandle, sentByUs: false)
            let pdu = try? ATT.decode(bytes)
            request = pdu
            if let first = bytes.first {
                let kind = ATTOpcode(rawValue: first).kind
                delivered = bytes.count <= mtuBefore
                if !delivered, kind == .request { answer = .invalidPDU(ATTOpcode(rawValue: first)) }
                if delivered {
                    switch kind {
                    case .request: answer = .response(ATTOpcode(rawValue: first), malformed: pdu == nil)
                    case .unknown: if first & 0x40 == 0 { answer = .response(ATTOpcode(rawValue: first), malformed: false) }
                    case .indication: if pdu != nil { answer = .confirmation }
                    case .confirmation:
                        if pdu != nil { confirmsIndication = indicating; indicating = false }
                    default: break
                    }
                }
            }
            var w = ByteWriter()
            w.u16(UInt16(bytes.count)); w.u16(CID.att); w.append(bytes)
            host.handle(ACLPacket(handle: linkHandle, boundary: .firstFlushable, data: w.bytes).packet)
        case 4, 5:
            let cs = db.characteristics
            let c = cs[Int(bytes.first ?? 0) % cs.count]
            let limit = db[c.valueHandle]?.maxLength ?? 0
            let value = Array(bytes.dropFirst().prefix(limit))
            if op % 8 == 4 {
                server.update(c.valueHandle, value)
                require(server.database[c.valueHandle]?.value == value, "update did not store the value")
            } else {
                session.send(c.valueHandle, value)
            }
        case 6:
            session.indicate(serviceChanged, bytes)
        default:
            security.encrypted = true
            if let b = bytes.first { security.bonded = b & 1 != 0 }
            session.encrypted()
        }
        let mtu = bearer.mtu
        let isClient = op % 8 < 4

        // What the server sent during this record.
        let sent = sentL2CAPPDUs(Array(transport.sent[mark...]), handle: linkHandle)
        mark = transport.sent.count
        var answers: [any ATTPDU] = []
        var confirmations = 0
        for p in sent {
            require(p.count >= 4 && p[2] == 0x04 && p[3] == 0x00, "the server sent on another channel than ATT: \(Hex.string(p))")
            let payload = Array(p[4...])
            _ = decoder.attLines(payload, handle: linkHandle, sentByUs: true)
            guard let pdu = try? ATT.decode(payload) else { require(false, "the server sent an undecodable PDU \(Hex.string(payload))"); return }
            require(pdu.encoded == payload, "\(pdu.opcode) sent does not encode back to its bytes: \(Hex.string(payload))")
            require(payload.count <= mtu, "\(pdu.opcode) of \(payload.count) bytes over ATT_MTU \(mtu)")
            switch pdu.opcode.kind {
            case .response: answers.append(pdu)
            case .confirmation: confirmations += 1
            case .indication:
                require(!indicating, "a second indication before the confirmation of the first")
                indicating = true
                guard let h = (pdu as? ATT.HandleValueIndication)?.handle else { require(false, "the server sent \(pdu.opcode)"); return }
                require(server.database.characteristic(value: h)?.properties.contains(.indicate) == true,
                        "an indication of 0x\(Hex.int(h, width: 4)), which does not indicate")
                require(security.encrypted || server.database[h]?.permissions.contains(.readEncrypted) != true,
                        "an indication of encrypted 0x\(Hex.int(h, width: 4)) on a plain link")
            case .notification:
                guard let h = (pdu as? ATT.HandleValueNotification)?.handle else { require(false, "the server sent \(pdu.opcode)"); return }
                require(session.subscriptions[h].map { $0 & 1 != 0 } == true, "a notification of 0x\(Hex.int(h, width: 4)) to a client not subscribed")
                require(security.encrypted || server.database[h]?.permissions.contains(.readEncrypted) != true,
                        "a notification of encrypted 0x\(Hex.int(h, width: 4)) on a plain link")
            default:
                require(false, "the server sent \(pdu.opcode)")
            }
        }

        // The answer to the client's PDU.
        switch answer {
        case .nothing:
            require(answers.isEmpty && confirmations == 0, "\(answers.count) responses, \(confirmations) confirmations to what needs no answer: \(Hex.string(bytes))")
        case .confirmation:
            require(answers.isEmpty && confirmations == 1, "an indication answered by \(answers.count) responses and \(confirmations) confirmations")
        case let .invalidPDU(op):
            let e = answers.first as? ATT.ErrorResponse
            require(answers.count == 1 && confirmations == 0 && e?.request == op && e?.handle == 0 && e?.error == .invalidPDU,
                    "\(op) over ATT_MTU \(mtuBefore) answered by \(answers.map { Hex.string($0.encoded) }), not Invalid PDU")
        case let .response(op, malformed):
            require(confirmations == 0 && answers.count == 1, "\(op) answered by \(answers.count) responses: \(Hex.string(bytes))")
            if let e = answers[0] as? ATT.ErrorResponse {
                require(e.request == op, "\(op) answered by an Error Response for \(e.request)")
            } else {
                require(!malformed, "a malformed \(op) answered by \(answers[0].opcode)")
                require(op.info?.response == answers[0].opcode, "\(op) answered by \(answers[0].opcode)")
                if let request { checkGATTServerResponse(request, answers[0], before: before, after: server.database, mtu: mtu,
                                                        preferred: preferred, encrypted: security.encrypted) }
            }
        }
        require(confirmedEvents - confirmedBefore == (confirmsIndication ? 1 : 0), "a confirmation reported \(confirmedEvents - confirmedBefore) times")
        if !delivered && isClient { require(mtu == mtuBefore, "a PDU the bearer dropped changed the MTU") }

        // The database: every value within its length; a client changes only what it may write.
        let attrs = server.database.attributes
        require(attrs.count == before.attributes.count, "the database changed its layout")
        for (i, a) in attrs.enumerated() {
            require(a.value.count <= min(a.maxLength, 512), "0x\(Hex.int(a.handle, width: 4)) holds \(a.value.count) bytes, more than \(min(a.maxLength, 512))")
            let old = before.attributes[i]
            require(a.handle == old.handle && a.permissions == old.permissions, "an attribute changed its handle or permissions")
            guard isClient, a.value != old.value else { continue }
            if a.handle == button, let c = commandWritten {
                require(a.value == [c], "the button does not hold the command written")
                continue
            }
            require(delivered && [0x12, 0x52, 0x18].contains(bytes.first ?? 0), "\(Hex.string(bytes)) changed 0x\(Hex.int(a.handle, width: 4))")
            require(a.permissions.contains(.write), "read-only 0x\(Hex.int(a.handle, width: 4)) changed")
            require(security.encrypted || !a.permissions.contains(.writeEncrypted), "encrypted 0x\(Hex.int(a.handle, width: 4)) written on a plain link")
        }
    }
    withExtendedLifetime((led, session, bearer)) {}
}

/// Holds a successful response to its request and the database.
func checkGATTServerResponse(_ request: any ATTPDU, _ response: any ATTPDU, before: GATTServerDatabase, after: GATTServerDatabase,
                             mtu: Int, preferred: Int, encrypted: Bool) {
    func readable(_ h: UInt16) -> Bool {
        guard let a = before[h] else { return false }
        return a.permissions.contains(.read) && (encrypted || !a.permissions.contains(.readEncrypted))
    }
    func ascending(_ hs: [UInt16], _ start: UInt16, _ end: UInt16, _ what: String) {
        require(!hs.isEmpty, "an empty \(what)")
        require(hs.allSatisfy { $0 >= start && $0 <= end }, "\(what) outside 0x\(Hex.int(start, width: 4))-0x\(Hex.int(end, width: 4))")
        require(zip(hs, hs.dropFirst()).allSatisfy { $0 < $1 }, "\(what) not in increasing order")
        require(hs.allSatisfy { before[$0] != nil }, "\(what) names a handle not in the database")
    }
    switch (request, response) {
    case let (q as ATT.ExchangeMTURequest, r as ATT.ExchangeMTUResponse):
        require(Int(r.mtu) == preferred, "Exchange MTU answered \(r.mtu), not our \(preferred)")
        require(mtu == max(23, min(Int(q.mtu), preferred)), "ATT_MTU \(mtu) after the client offered \(q.mtu)")
    case let (q as ATT.ReadRequest, r as ATT.ReadResponse):
        require(readable(q.handle), "Read of 0x\(Hex.int(q.handle, width: 4)) answered, which may not be read")
        if let a = before[q.handle], !a.perClient { require(r.value == Array(a.value.prefix(mtu - 1)), "Read Response is not the value") }
    case let (q as ATT.ReadBlobRequest, r as ATT.ReadBlobResponse):
        require(readable(q.handle), "Read Blob of 0x\(Hex.int(q.handle, width: 4)) answered, which may not be read")
        if let a = before[q.handle], !a.perClient {
            require(Int(q.offset) <= a.value.count && r.value == Array(a.value[Int(q.offset)...].prefix(mtu - 1)), "Read Blob Response is not the value's part")
        }
    case let (q as ATT.ReadMultipleRequest, _):
        require(q.handles.allSatisfy(readable), "Read Multiple answered though a handle may not be read")
    case let (q as ATT.ReadMultipleVariableRequest, _):
        require(q.handles.allSatisfy(readable), "Read Multiple Variable answered though a handle may not be read")
    case let (q as ATT.ReadByTypeRequest, r as ATT.ReadByTypeResponse):
        ascending(r.values.map(\.handle), q.start, q.end, "Read By Type Response")
        require(r.values.allSatisfy { before[$0.handle]?.type == q.type && readable($0.handle) }, "Read By Type Response lists another type or an unreadable value")
    case let (q as ATT.ReadByGroupTypeRequest, r as ATT.ReadByGroupTypeResponse):
        ascending(r.groups.map(\.handle), q.start, q.end, "Read By Group Type Response")
        require(r.groups.allSatisfy { before[$0.handle]?.type == q.type && $0.endGroup >= $0.handle }, "Read By Group Type Response lists another type or a bad group end")
    case let (q as ATT.FindInformationRequest, r as ATT.FindInformationResponse):
        ascending(r.information.map(\.handle), q.start, q.end, "Find Information Response")
        require(r.information.allSatisfy { before[$0.handle]?.type == $0.uuid }, "Find Information Response names another type")
    case let (q as ATT.FindByTypeValueRequest, r as ATT.FindByTypeValueResponse):
        ascending(r.handles.map(\.found), q.start, q.end, "Find By Type Value Response")
        require(r.handles.allSatisfy { before[$0.found]?.type == BluetoothUUID(uint16: q.type) && $0.groupEnd >= $0.found }, "Find By Type Value Response lists another type")
    case let (q as ATT.WriteRequest, _ as ATT.WriteResponse):
        guard let a = before[q.handle] else { require(false, "Write Request to 0x\(Hex.int(q.handle, width: 4)) acknowledged, which is not in the database"); return }
        require(a.permissions.contains(.write) && (encrypted || !a.permissions.contains(.writeEncrypted)), "Write Request to 0x\(Hex.int(q.handle, width: 4)) acknowledged, which may not be written")
        if !a.perClient { require(after[q.handle]?.value == q.value, "Write Response but 0x\(Hex.int(q.handle, width: 4)) does not hold the value") }
    case let (q as ATT.PrepareWriteRequest, r as ATT.PrepareWriteResponse):
        require(r.handle == q.handle && r.offset == q.offset && r.value == q.value, "Prepare Write Response does not echo the request")
        require(before[q.handle].map { $0.permissions.contains(.write) && (encrypted || !$0.permissions.contains(.writeEncrypted)) } == true,
                "Prepare Write to 0x\(Hex.int(q.handle, width: 4)) queued, which may not be written")
    default:
        break
    }
}
