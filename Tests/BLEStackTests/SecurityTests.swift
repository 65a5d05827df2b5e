#if canImport(Glibc)
import Glibc
#endif
import Testing
@testable import BLEWire
@testable import BLETransport
@testable import BLEHCI
@testable import BLEL2CAP
@testable import BLEATT
@testable import BLESMP
@testable import Attled
@testable import BLETrace

@Suite("HCI encryption commands and events")
struct EncryptionHCITests {
    @Test("LE Enable Encryption: handle, Rand, EDIV and the LTK, least significant octet first (7.8.24)")
    func enableEncryption() {
        let ltk = (1...16).map { UInt8($0) }
        let c = HCI.LEEnableEncryption(handle: 0x0040, rand: 0x0102030405060708, ediv: 0xBEEF, ltk: ltk).command
        #expect(Hex.string(c.packet.h4) == "01 19 20 1c 40 00 08 07 06 05 04 03 02 01 ef be 01 02 03 04 05 06 07 08 09 0a 0b 0c 0d 0e 0f 10")
        // A wrong-length key is padded/cut, never a trap.
        #expect(HCI.LEEnableEncryption(handle: 1, rand: 0, ediv: 0, ltk: [1]).command.parameters.count == 28)
        #expect(HCI.LEEnableEncryption(handle: 1, rand: 0, ediv: 0, ltk: [UInt8](repeating: 9, count: 40)).command.parameters.count == 28)
    }

    @Test("Encryption Change and Encryption Key Refresh Complete decode; malformed ones are not encryption changes")
    func events() throws {
        let on = try HCIEvent.decode(hex("08 04 00 01 00 01"))
        #expect(on.encryptionChange == EncryptionChange(status: .success, handle: 1, enabled: true, isRefresh: false))
        let missing = try HCIEvent.decode(hex("08 04 06 01 00 00"))
        #expect(missing.encryptionChange?.status == .pinOrKeyMissing && missing.encryptionChange?.enabled == false)
        let refresh = try HCIEvent.decode(hex("30 03 00 02 00"))
        #expect(refresh.encryptionChange == EncryptionChange(status: .success, handle: 2, enabled: true, isRefresh: true))
        #expect(try HCIEvent.decode(hex("08 03 00 01 00")).encryptionChange == nil)
        #expect(try HCIEvent.decode(hex("08 05 00 01 00 01 07")).encryptionChange == nil)
        #expect(try HCIEvent.decode(hex("05 04 00 01 00 13")).encryptionChange == nil)
    }
}

@Suite("LinkSecurity: LE Enable Encryption and SMP on a scripted link")
struct LinkSecurityTests {
    static let key = LongTermKey(key: SMPSecret((1...16).map { UInt8($0) }), ediv: 0x1234, rand: 7, secureConnections: false)
    static let central = DeviceAddress(BDAddress("F0:F1:F2:F3:F4:01")!, .public)
    static let peer = DeviceAddress(BDAddress("C0:11:22:33:44:55")!, .random)

    func fixture() -> (BearerFixture, LinkSecurity) {
        let f = BearerFixture()
        return (f, LinkSecurity(host: f.host, l2cap: f.link, initiator: Self.central, responder: Self.peer))
    }

    static var enableCommand: HCIPacket {
        HCI.LEEnableEncryption(handle: ACL.handle, rand: key.rand, ediv: key.ediv, ltk: key.key.bytes).command.packet
    }

    @Test("a stored key: Command Status, then Encryption Change on: encrypted")
    func encrypts() throws {
        let (f, sec) = fixture()
        f.ctl.expect(Self.enableCommand, reply: [Ev.status(HCI.LEEnableEncryption.opcode), h4("04 08 04 00 01 00 01")])
        try f.host.wait(sec.startEncryption(Self.key), until: Instant.now().adding(ms: 1000))
        #expect(sec.isEncrypted && sec.currentKey == Self.key)
        f.verifyScriptDone()
    }

    @Test("the peer refuses the key: 0x06 (as the spec says) and 0x05 (as Root Canal says) are keyMissing; 0x3D is not",
          arguments: [(UInt8(0x06), true), (0x05, true), (0x3D, false)])
    func keyMissing(status: UInt8, refused: Bool) {
        let (f, sec) = fixture()
        f.ctl.expect(Self.enableCommand, reply: [Ev.status(HCI.LEEnableEncryption.opcode), h4("04 08 04 \(Hex.int(status, width: 2)) 01 00 00")])
        let want = refused ? SecurityError.keyMissing(HCIStatus(rawValue: status)) : .encryption(HCIStatus(rawValue: status))
        #expect(throws: want) { try f.host.wait(sec.startEncryption(Self.key), until: Instant.now().adding(ms: 1000)) }
        #expect(!sec.isEncrypted)
    }

    @Test("a rejected command fails with its status; a missing Encryption Change times out")
    func rejectedAndSilent() {
        let (f, sec) = fixture()
        f.ctl.expect(Self.enableCommand, reply: [Ev.status(HCI.LEEnableEncryption.opcode, 0x0C)])
        #expect(throws: SecurityError.encryption(.commandDisallowed)) {
            try f.host.wait(sec.startEncryption(Self.key), until: Instant.now().adding(ms: 1000))
        }
        let (g, sec2) = fixture()
        sec2.encryptionTimeoutMs = 50
        g.ctl.expect(Self.enableCommand, reply: [Ev.status(HCI.LEEnableEncryption.opcode)])
        #expect(throws: SecurityError.encryption(.connectionTimeout)) {
            try g.host.wait(sec2.startEncryption(Self.key), until: Instant.now().adding(ms: 2000))
        }
    }

    @Test("the link going down fails a pending encryption")
    func disconnect() {
        let (f, sec) = fixture()
        f.ctl.expect(Self.enableCommand, reply: [Ev.status(HCI.LEEnableEncryption.opcode), Ev.disconnected(handle: ACL.handle, reason: 0x3D)])
        f.link.onClose = { _ in sec.linkClosed() }
        #expect(throws: SecurityError.disconnected) { try f.host.wait(sec.startEncryption(Self.key), until: Instant.now().adding(ms: 1000)) }
    }

    @Test("a Security Request with no handler is answered Pairing Failed, Pairing Not Supported; with one, handed over")
    func securityRequest() throws {
        let (f, sec) = fixture()
        f.ctl.expect(ACL.out(cid: CID.smp, [0x05, 0x05]))
        f.ctl.deliver(ACL.in(cid: CID.smp, [0x0B, 0x09]))
        try f.drain()
        f.verifyScriptDone()
        var asked: [AuthReq] = []
        sec.onSecurityRequest = { asked.append($0) }
        f.ctl.deliver(ACL.in(cid: CID.smp, [0x0B, 0x09]))
        try f.drain()
        #expect(asked == [[.bonding, .secureConnections]])
        f.verifyScriptDone()
    }

    @Test("pairing sends the Pairing Request on CID 6; the peer's Pairing Failed fails it with the reason")
    func pairingFailed() {
        let (f, sec) = fixture()
        // NoInputNoOutput, no OOB, Bonding|SC, 16 bytes, we offer no keys, we ask EncKey|IdKey.
        f.ctl.expect(ACL.out(cid: CID.smp, hex("01 03 00 09 10 00 03")), reply: [ACL.in(cid: CID.smp, [0x05, 0x05])])
        #expect(throws: SecurityError.pairing(.peer(.pairingNotSupported))) {
            try f.host.wait(sec.startPairing(), until: Instant.now().adding(ms: 1000))
        }
        #expect(!sec.isPairing && !sec.isEncrypted)
        f.verifyScriptDone()
    }
}

@Suite("Bond store")
struct BondStoreTests {
    func tempDir() -> String {
        var t = Array("/tmp/attled-bonds-XXXXXX".utf8CString)
        let p = t.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        return p.map { String(cString: $0) } ?? "/tmp/attled-bonds-fallback"
    }

    static let ltk = LongTermKey(key: SMPSecret((0..<16).map { UInt8($0 * 7) }), ediv: 0xBEEF, rand: 0x0102030405060708,
                                 secureConnections: false, authenticated: false, keySize: 16)
    static let irk = SMPSecret((0..<16).map { UInt8(0xA0 + $0) })

    @Test("a bond saved is loaded back the same; the store is 0700, the file 0600, nothing left behind")
    func roundTrip() throws {
        let d = tempDir() + "/state/attled"
        let store = BondStore(directory: d)
        let id = DeviceAddress(BDAddress("C0:11:22:33:44:55")!, .random)
        let b = Bond(identity: id, longTermKey: Self.ltk, irk: Self.irk, lastAddress: id)
        try store.save(b)
        #expect(store.bond(for: id) == b)
        #expect(store.all() == [b])
        var st = stat()
        #expect(stat(d, &st) == 0 && st.st_mode & 0o777 == 0o700)
        #expect(stat(store.path(id), &st) == 0 && st.st_mode & 0o777 == 0o600)
        #expect(store.remove(id) == b && store.bond(for: id) == nil)
    }

    @Test("printing a bond, a key or a pairing result never shows key bytes")
    func noKeysInDescriptions() {
        let id = DeviceAddress(BDAddress("C0:11:22:33:44:55")!, .random)
        let b = Bond(identity: id, longTermKey: Self.ltk, irk: Self.irk, lastAddress: id)
        let text = "\(b) \(Self.ltk) \(Self.irk) \(String(reflecting: Self.irk))"
        #expect(!text.lowercased().contains(Self.ltk.key.revealedHex) && !text.lowercased().contains(Self.irk.revealedHex))
        #expect(!text.contains("07 0e 15"))
    }

    @Test("a resolvable private address is recognised through the bond's IRK (ah, Vol 6 Part B 1.3.2.3)")
    func resolvesPrivateAddress() throws {
        let id = DeviceAddress(BDAddress("C0:11:22:33:44:55")!, .random)
        let b = Bond(identity: id, longTermKey: Self.ltk, irk: Self.irk, lastAddress: id)
        let prand: [UInt8] = [0x11, 0x22, 0x40 | 0x33] // top bits 01: resolvable
        let hash = try SMPCrypto.ah(irk: Self.irk.bytes, prand: prand)
        let rpa = DeviceAddress(BDAddress(wire: hash + prand), .random)
        #expect(rpa.address.randomAddressKind == .resolvable)
        #expect(b.matches(rpa))
        let other = DeviceAddress(BDAddress(wire: [hash[0] ^ 1, hash[1], hash[2]] + prand), .random)
        #expect(!b.matches(other))
        let d = tempDir()
        let store = BondStore(directory: d)
        try store.save(b)
        #expect(store.bond(for: rpa) == b && store.bond(for: other) == nil)
    }

    @Test("damaged or foreign bond files are skipped, never trusted", arguments: [
        "", "attled-bond 2\n", "attled-bond 1\nidentity C0:11:22:33:44:55 random\n",
        "attled-bond 1\nidentity C0:11:22:33:44:55 random\nltk 00 1 2 0 0 16\n",
        "attled-bond 1\nidentity C0:11:22:33:44:55 random\nltk 000102030405060708090a0b0c0d0e0f 1 2 0 0 99\n",
        "attled-bond 1\nidentity nonsense random\nltk 000102030405060708090a0b0c0d0e0f 1 2 0 0 16\n",
        "attled-bond 1\nidentity C0:11:22:33:44:55 random\nltk 000102030405060708090a0b0c0d0e0f 1 2 0 0 16\nextra line\n",
    ])
    func damaged(text: String) throws {
        let d = tempDir()
        let p = d + "/bond-C0-11-22-33-44-55-random"
        let fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        #expect(fd >= 0)
        _ = SystemIO.writeAll(fd, Array(text.utf8))
        close(fd)
        let store = BondStore(directory: d)
        #expect(store.bond(for: DeviceAddress(BDAddress("C0:11:22:33:44:55")!, .random)) == nil)
        #expect(store.all().isEmpty)
    }

    @Test("a store that cannot be written says where and why")
    func unwritable() {
        let store = BondStore(directory: "/proc/attled-cannot-exist")
        let id = DeviceAddress(BDAddress("C0:11:22:33:44:55")!, .random)
        #expect(throws: BondStoreError.self) { try store.save(Bond(identity: id, longTermKey: Self.ltk, irk: nil, lastAddress: id)) }
    }
}

@Suite("Keys in the trace")
struct TraceKeyMaskingTests {
    static let ltk = (1...16).map { UInt8(0xA0 + $0) }

    func render(_ p: HCIPacket, _ dir: Direction = .sent, showKeys: Bool = false) -> String {
        let d = PacketDecoder()
        d.showKeys = showKeys
        return Tracer.format(d.decode(p, dir), packet: p, number: 1, seconds: 0, hex: true, showKeys: showKeys)
    }

    func leaks(_ text: String) -> Bool {
        let flat = text.lowercased().filter { $0.isHexDigit }
        return flat.contains(Hex.string(Self.ltk, separator: "")) || flat.contains(Hex.string(Self.ltk.reversed(), separator: ""))
            || text.contains(Hex.string(Array(Self.ltk.prefix(4))))
    }

    @Test("LE Enable Encryption: Rand, EDIV and LTK masked in fields and hex dump; shown with showKeys")
    func enableEncryption() {
        let p = HCI.LEEnableEncryption(handle: 1, rand: 0x1122334455667788, ediv: 0x9988, ltk: Self.ltk).command.packet
        let masked = render(p)
        #expect(masked.contains("LTK: <16-byte key hidden>") && masked.contains("** ** **"))
        #expect(!leaks(masked) && !masked.contains("88 99") && !masked.contains("77 66"))
        #expect(leaks(render(p, showKeys: true)))
    }

    @Test("SMP key distribution PDUs are masked; public values are not")
    func smp() {
        let enc = ACL.out(cid: CID.smp, [0x06] + Self.ltk)
        let masked = render(enc)
        #expect(masked.contains("SMP: Encryption Information (0x06)") && !leaks(masked))
        #expect(leaks(render(enc, showKeys: true)))
        let confirm = ACL.out(cid: CID.smp, [0x03] + Self.ltk) // a confirm value is not secret
        #expect(leaks(render(confirm)))
    }

    @Test("the hex dump masks the fields the declarations mark secret, where the declarations put them")
    func rangesFromDeclarations() {
        let enc = HCI.LEEnableEncryption(handle: 1, rand: 1, ediv: 2, ltk: Self.ltk).command.packet
        #expect(PacketDecoder.secretRanges(enc) == [6..<14, 14..<16, 16..<32])
        let request = HCIPacket(.event, [0x3E, 13, 0x05, 1, 0] + Array(repeating: 7, count: 10))
        #expect(PacketDecoder.secretRanges(request) == [6..<14, 14..<16])
        let central = ACL.out(cid: CID.smp, [0x07, 1, 2] + Array(repeating: 9, count: 8))
        #expect(PacketDecoder.secretRanges(central) == [10..<12, 12..<20])
        #expect(SMPCode.pairingRandom.carriesSecrets && !SMPCode.pairingConfirm.carriesSecrets)
        // Cut short of its declaration: masked from the first secret field to the end.
        #expect(PacketDecoder.secretRanges(HCIPacket(.event, [0x3E, 13, 0x05, 1, 0, 7, 7, 7])) == [6..<9])
    }

    @Test("a peripheral's LTK Request event and Reply are named and masked")
    func peripheralSide() throws {
        var w = ByteWriter(); w.u8(0x3E); w.u8(13); w.u8(0x05); w.u16(1); w.append(Self.ltk.prefix(8)); w.u16(0xBEEF)
        let ev = render(HCIPacket(.event, w.bytes), .received)
        #expect(ev.contains("LE Long Term Key Request") && ev.contains("Rand: <hidden>") && !ev.contains("ef be"))
        let reply = HCICommand(HCI.LELongTermKeyRequestReply.opcode, [1, 0] + Self.ltk).packet
        let r = render(reply)
        #expect(r.contains("LE Long Term Key Request Reply") && r.contains("LTK: <16-byte key hidden>") && !leaks(r))
    }
}
