#if canImport(Glibc)
import Glibc
#endif
import Testing
@testable import BLEWire
@testable import BLETransport
@testable import BLEHCI
@testable import BLEL2CAP
@testable import BLESMP
@testable import Attled

private let clientAddress = DeviceAddress(BDAddress("C0:11:22:33:44:55")!, .random)
private let us = DeviceAddress(BDAddress("F0:F1:F2:F3:F4:01")!, .public)
private let clientIRK = SMPSecret((0..<16).map { UInt8(0x50 + $0) })
private let legacyKey = LongTermKey(key: SMPSecret((0..<16).map { UInt8($0 * 3) }), ediv: 0xBEEF, rand: 0x0102_0304_0506_0708,
                                    secureConnections: false)
private let scKey = LongTermKey(key: SMPSecret((0..<16).map { UInt8(0x90 + $0) }), secureConnections: true)

private func ltkRequest(ediv: UInt16, rand: UInt64) -> HCIPacket {
    var e = HCI.LELongTermKeyRequest()
    e.handle = ACL.handle; e.ediv = ediv; e.rand = rand
    return HCIPacket(.event, e.encoded)
}

private func reply(_ key: LongTermKey) -> HCIPacket {
    var c = HCI.LELongTermKeyRequestReply()
    c.handle = ACL.handle; c.ltk = key.key.bytes
    return c.command.packet
}

private var negativeReply: HCIPacket {
    var c = HCI.LELongTermKeyRequestNegativeReply()
    c.handle = ACL.handle
    return c.command.packet
}

private let encryptionOn = h4("04 08 04 00 01 00 01")

/// A peripheral link on the scripted controller, its events recorded.
private final class Peripheral {
    let f = BearerFixture(aclLength: 251) // whole SMP PDUs in one fragment, for `CentralPeer`
    let security: PeripheralSecurity
    var events: [PeripheralSecurityEvent] = []
    init(store: BondStore?, central: DeviceAddress = clientAddress, options: PeripheralSecurityOptions = PeripheralSecurityOptions()) {
        security = PeripheralSecurity(host: f.host, l2cap: f.link, central: central, local: us, store: store, options: options)
        security.onEvent = { [unowned self] in self.events.append($0) }
    }
}

private func store(with bonds: Bond...) throws -> BondStore {
    let s = BondStore(directory: BondStoreTests().tempDir() + "/attled")
    for b in bonds { try s.save(b) }
    return s
}

@Suite("PeripheralSecurity: LE Long Term Key Request, Encryption Change, SMP as peripheral")
struct PeripheralSecurityTests {
    @Test("a legacy bond: the EDIV and Rand we distributed get its LTK; others a Negative Reply", arguments: [true, false])
    func legacyBond(matching: Bool) throws {
        let b = Bond(identity: clientAddress, longTermKey: legacyKey, irk: nil, lastAddress: clientAddress, role: .peripheral)
        let p = Peripheral(store: try store(with: b))
        #expect(p.security.hasBond)
        if matching {
            p.f.ctl.expect(reply(legacyKey), reply: [Ev.complete(HCI.LELongTermKeyRequestReply.opcode, [0, 1, 0]), encryptionOn])
            p.f.ctl.deliver(ltkRequest(ediv: 0xBEEF, rand: 0x0102_0304_0506_0708))
        } else {
            p.f.ctl.expect(negativeReply, reply: [Ev.complete(HCI.LELongTermKeyRequestNegativeReply.opcode, [0, 1, 0]), h4("04 08 04 06 01 00 00")])
            p.f.ctl.deliver(ltkRequest(ediv: 0xBEEF, rand: 0x0102_0304_0506_0709))
        }
        try p.f.drain()
        p.f.verifyScriptDone()
        #expect(p.security.isEncrypted == matching)
        #expect(p.events == [matching ? PeripheralSecurityEvent.encrypted(bond: b) : .encryptionFailed(.pinOrKeyMissing)])
        #expect(p.security.currentKey == (matching ? legacyKey : nil))
    }

    @Test("a Secure Connections bond answers EDIV 0, Rand 0 only; no bond answers negatively", arguments: [
        (true, UInt16(0), UInt64(0), true), (true, 1, 0, false), (true, 0, 5, false), (false, 0, 0, false),
    ])
    func secureConnectionsBond(bonded: Bool, ediv: UInt16, rand: UInt64, answered: Bool) throws {
        let b = Bond(identity: clientAddress, longTermKey: scKey, irk: nil, lastAddress: clientAddress, role: .peripheral)
        let p = Peripheral(store: bonded ? try store(with: b) : try store())
        #expect(p.security.hasBond == bonded)
        p.f.ctl.expect(answered ? reply(scKey) : negativeReply)
        p.f.ctl.deliver(ltkRequest(ediv: ediv, rand: rand))
        try p.f.drain()
        p.f.verifyScriptDone()
    }

    @Test("a central's bond for the same address is not a clientAddress's")
    func rolesApart() throws {
        let central = Bond(identity: clientAddress, longTermKey: scKey, irk: nil, lastAddress: clientAddress)
        let s = try store(with: central)
        #expect(s.bond(for: clientAddress, role: .peripheral) == nil && s.all(role: .peripheral).isEmpty)
        let p = Peripheral(store: s)
        #expect(!p.security.hasBond)
        p.f.ctl.expect(negativeReply)
        p.f.ctl.deliver(ltkRequest(ediv: 0, rand: 0))
        try p.f.drain()
        p.f.verifyScriptDone()
    }

    @Test("pairing not allowed: a Pairing Request gets Pairing Failed, Pairing Not Supported")
    func pairingNotAllowed() throws {
        let p = Peripheral(store: nil, options: PeripheralSecurityOptions(pairing: false))
        p.f.ctl.expect(ACL.out(cid: CID.smp, hex("05 05")))
        p.f.ctl.deliver(ACL.in(cid: CID.smp, hex("01 03 00 09 10 02 03")))
        try p.f.drain()
        p.f.verifyScriptDone()
        #expect(p.events == [.failed(.local(.pairingNotSupported, detail: "pairing is not allowed"))])
    }

    @Test("sendSecurityRequest sends 0b 09 once; a Pairing Request then pairs")
    func securityRequest() throws {
        let p = Peripheral(store: nil)
        p.f.ctl.expect(ACL.out(cid: CID.smp, hex("0b 09")))
        #expect(p.security.sendSecurityRequest())
        #expect(!p.security.sendSecurityRequest() && p.security.isPairing)
        p.f.ctl.expect(ACL.out(cid: CID.smp, hex("02 03 00 09 10 02 01")))
        p.f.ctl.deliver(ACL.in(cid: CID.smp, hex("01 03 00 09 10 02 03")))
        try p.f.drain()
        p.f.verifyScriptDone()
    }

    @Test("SMP's timer: a central that stops answering fails the pairing; then no SMP on the link (3.4)")
    func timeout() throws {
        let p = Peripheral(store: nil)
        p.security.timeoutMs = 50
        p.f.ctl.expect(ACL.out(cid: CID.smp, hex("02 03 00 09 10 02 01")))
        p.f.ctl.deliver(ACL.in(cid: CID.smp, hex("01 03 00 09 10 02 03")))
        _ = try p.f.host.pump(until: Instant.now().adding(ms: 1000)) { !p.events.isEmpty }
        #expect(p.events == [.failed(.timeout)] && !p.security.isPairing)
        p.f.ctl.deliver(ACL.in(cid: CID.smp, hex("01 03 00 09 10 02 03")))
        try p.f.drain()
        #expect(!p.security.sendSecurityRequest())
        p.f.verifyScriptDone()
    }

    @Test("a Security Request answered by a bonded central's encryption: encrypted with the bond, the wait over")
    func securityRequestThenBond() throws {
        let b = Bond(identity: clientAddress, longTermKey: scKey, irk: nil, lastAddress: clientAddress, role: .peripheral)
        let p = Peripheral(store: try store(with: b))
        p.f.ctl.expect(ACL.out(cid: CID.smp, hex("0b 09")))
        #expect(p.security.sendSecurityRequest() && p.security.isPairing)
        p.f.ctl.expect(reply(scKey), reply: [Ev.complete(HCI.LELongTermKeyRequestReply.opcode, [0, 1, 0]), encryptionOn])
        p.f.ctl.deliver(ltkRequest(ediv: 0, rand: 0))
        try p.f.drain()
        p.f.verifyScriptDone()
        #expect(p.events == [.encrypted(bond: b)] && p.security.isEncrypted && !p.security.isPairing)
        #expect(!p.security.sendSecurityRequest(), "already encrypted")
    }

    @Test("a whole pairing against attled's initiator: LTK Request answered with the new key, keys exchanged, the bond stored 0600 and found again",
          arguments: [true, false])
    func pairsAndBonds(sc: Bool) throws {
        let s = try store()
        var options = PeripheralSecurityOptions()
        options.identity = LocalIdentity(irk: SMPSecret((0..<16).map { UInt8(0xE0 + $0) }), address: us)
        let p = Peripheral(store: s, options: options)
        var ic = SMPConfiguration()
        ic.secureConnections = sc
        let identity = DeviceAddress(BDAddress("00:11:22:33:44:55")!, .public)
        ic.localIdentity = LocalIdentity(irk: clientIRK, address: identity)
        let central = CentralPeer(SMPInitiator(configuration: ic, initiator: clientAddress, responder: us))
        p.f.ctl.respond = { central.answer($0) }
        for a in central.start() { p.f.ctl.deliver(a) }
        _ = try p.f.host.pump(until: Instant.now().adding(ms: 2000)) { central.result != nil && p.events.count >= 2 }
        #expect(p.f.ctl.unexpected.isEmpty)
        guard let r = central.result, let key = r.longTermKey else { Issue.record("the central did not complete: \(p.events)"); return }
        #expect(central.keyGiven != nil && central.keyGiven == central.keyUsed?.key.bytes, "the controller got the pairing's key")
        #expect(p.security.isEncrypted)
        guard p.events.count == 2, case let .paired(result, bond?, nil) = p.events[1] else { Issue.record("\(p.events)"); return }
        #expect(p.events[0] == .encrypted(bond: nil))
        #expect(result.secureConnections == sc && result.longTermKey == key && result.peerIdentity?.address == identity)
        #expect(r.peerIdentity?.address == us)
        #expect(bond == Bond(identity: identity, longTermKey: key, irk: clientIRK, lastAddress: clientAddress, role: .peripheral))
        #expect(p.security.bond == bond)

        // Stored 0600 as a clientAddress's bond, found by identity and by a resolvable private address.
        var st = stat()
        #expect(stat(s.path(identity, role: .peripheral), &st) == 0 && st.st_mode & 0o777 == 0o600)
        #expect(s.bond(for: identity, role: .peripheral) == bond && s.bond(for: identity) == nil)
        let prand: [UInt8] = [0x01, 0x02, 0x43]
        let rpa = DeviceAddress(BDAddress(wire: try SMPCrypto.ah(irk: clientIRK.bytes, prand: prand) + prand), .random)
        #expect(s.bond(for: rpa, role: .peripheral) == bond)

        // The clientAddress comes back from its private address: its bond answers.
        let again = Peripheral(store: s, central: rpa)
        #expect(again.security.hasBond)
        again.f.ctl.expect(reply(key), reply: [Ev.complete(HCI.LELongTermKeyRequestReply.opcode, [0, 1, 0]), encryptionOn])
        again.f.ctl.deliver(ltkRequest(ediv: key.ediv, rand: key.rand))
        try again.f.drain()
        again.f.verifyScriptDone()
        #expect(again.events == [.encrypted(bond: bond)] && again.security.isEncrypted)
    }
}

/// The central side for the whole-pairing test: attled's own initiator
/// behind the scripted controller (its LE Enable Encryption becomes the
/// peripheral's LE Long Term Key Request).
private final class CentralPeer {
    var smp: SMPInitiator
    var result: PairingResult?
    var keyUsed: LongTermKey?
    var keyGiven: [UInt8]?
    init(_ smp: SMPInitiator) { self.smp = smp }

    func start() -> [HCIPacket] { packets(smp.start()) }

    func packets(_ actions: [SMPAction]) -> [HCIPacket] {
        var out: [HCIPacket] = []
        for a in actions {
            switch a {
            case let .send(b): out.append(ACL.in(cid: CID.smp, b))
            case let .startEncryption(k):
                keyUsed = k
                out.append(ltkRequest(ediv: k.ediv, rand: k.rand))
            case let .complete(r): result = r
            case let .failed(f): Issue.record("the central failed: \(f)")
            }
        }
        return out
    }

    func answer(_ p: HCIPacket) -> [HCIPacket]? {
        if p.type == .command, let c = try? HCICommand.decode(p.bytes), c.opcode == HCI.LELongTermKeyRequestReply.opcode {
            keyGiven = Array(c.parameters.dropFirst(2))
            return [Ev.complete(HCI.LELongTermKeyRequestReply.opcode, [0, 1, 0]), encryptionOn] + packets(smp.encryptionChanged(status: 0))
        }
        guard p.type == .acl, let acl = try? ACLPacket.decode(p.bytes), acl.data.count >= 5,
              acl.data[2] == 0x06, acl.data[3] == 0x00 else { return nil }
        return packets(smp.receive(Array(acl.data[4...])))
    }
}
