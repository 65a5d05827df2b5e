// smp: the Security Manager, decoder and central-side pairing state machine.
// The input:
//   byte 0: mode. Bit 0 clear, "raw": an SMPInitiator that has sent its
//           Pairing Request runs the rest as records `op, len, bytes`:
//           op % 4 = 0 receive the bytes as an SMP PDU, 1 Encryption Change
//           with status bytes[0], 2 SMP timeout, 3 cancel.
//           Bit 0 set, "peer": an honest responder (legacy when bit 1 is set,
//           else LE Secure Connections) answers the initiator. Six bytes
//           follow: the Pairing Response parameters it answers with. Then
//           one record `op, len, bytes` per PDU the responder would send:
//           op % 4 = 0 deliver it, 1 deliver the record's bytes instead, 2
//           deliver it with byte (len % size) XOR bytes[0], 3 deliver the
//           record's bytes and then it. Once the records run out every PDU
//           is delivered as is.
// Every PDU either side produces is decoded on its own first: what decodes
// must encode back to its bytes, and the tracer line must not show a key.
// The initiator must: send only PDUs that decode; follow a Pairing Failed it
// sends with .failed(.local) of that reason; never answer a Pairing Failed;
// end at most once and say nothing after; and, in peer mode, encrypt with
// the key the responder computed.
import BLEWire
import BLESMP

/// Decodes one SMP PDU and holds it to its encoding and its tracer line.
func checkSMPPDU(_ b: [UInt8]) {
    let line = SMPPDU.describe(bytes: b, showKeys: false)
    _ = SMPPDU.describe(bytes: b, showKeys: true)
    guard let pdu = try? SMPPDU.decode(b) else { return }
    require(pdu.encoded == b, "SMP \(pdu.code) does not encode back to its bytes: \(Hex.string(b)) -> \(Hex.string(pdu.encoded))")
    let secret: Set<UInt8> = [0x04, 0x06, 0x08, 0x0A]
    if secret.contains(b[0]), b.count == 17, Set(b.dropFirst()).count > 4 {
        require(!line.contains(Hex.string(b.dropFirst().reversed(), separator: "")), "the tracer shows a key: \(line)")
    }
}

/// Checks the initiator's actions and keeps track of its end.
struct SMPWatch {
    var ended = false
    var sent: [[UInt8]] = []
    var encryptedWith: [UInt8]?

    mutating func check(_ actions: [SMPAction], after input: [UInt8]? = nil) {
        if ended { require(actions.isEmpty, "actions after pairing ended: \(actions)") }
        if let b = input, b.first == 0x05 {
            require(!actions.contains { if case .send = $0 { return true } else { return false } }, "answered a Pairing Failed")
        }
        for (i, a) in actions.enumerated() {
            require(!ended, "an action after the end: \(a)")
            switch a {
            case let .send(b):
                checkSMPPDU(b)
                require((try? SMPPDU.decode(b)) != nil, "the initiator sent a PDU that does not decode: \(Hex.string(b))")
                if b.first == 0x05, b.count == 2 {
                    let next = i + 1 < actions.count ? actions[i + 1] : nil
                    guard case let .failed(.local(r, _))? = next else {
                        require(false, "Pairing Failed sent without failing: \(actions)")
                        return
                    }
                    require(r.rawValue == b[1], "sent reason \(b[1]) but failed with \(r)")
                }
                sent.append(b)
            case let .startEncryption(k): encryptedWith = k.key.bytes
            case .complete, .failed: ended = true
            }
        }
    }
}

func fuzzSMP(_ data: [UInt8]) {
    var input = FuzzInput(data)
    let mode = input.u8()
    let central = DeviceAddress(BDAddress(wire: [0x01, 0x02, 0x03, 0x04, 0x05, 0xC6]), .random)
    let peripheral = DeviceAddress(BDAddress(wire: [0xA1, 0xA2, 0xA3, 0xA4, 0xA5, 0xA6]), mode & 4 == 0 ? .public : .random)
    var config = SMPConfiguration()
    if mode & 8 != 0 { config.localIdentity = LocalIdentity(irk: SMPSecret([UInt8](repeating: 0x5A, count: 16)), address: central) }
    if mode & 16 != 0 { config.peerKeys = [.encKey, .idKey, .signKey] }
    if mode & 32 != 0 { config.allowLegacy = false }
    var initiator = SMPInitiator(configuration: config, initiator: central, responder: peripheral)
    var watch = SMPWatch()

    // The Security Request path starts it.
    let first = initiator.receive([0x0B, 0x09])
    watch.check(first)
    require(first.count == 1, "a Security Request did not start pairing")

    if mode & 1 == 0 {
        while !input.isAtEnd {
            let op = input.u8()
            let bytes = input.chunk()
            let actions: [SMPAction]
            switch op % 4 {
            case 0: checkSMPPDU(bytes); actions = initiator.receive(bytes); watch.check(actions, after: bytes); continue
            case 1: actions = initiator.encryptionChanged(status: bytes.first ?? 0)
            case 2: actions = initiator.timeout()
            default: actions = initiator.cancel(reason: PairingFailedReason(rawValue: bytes.first ?? 8))
            }
            watch.check(actions)
        }
        return
    }

    // Peer mode.
    let p = input.take(6)
    guard p.count == 6 else { return }
    let responder = FuzzResponder(legacy: mode & 2 != 0, response: p, central: central, peripheral: peripheral)
    var queue: [SMPAction] = first
    var steps = 0
    while !queue.isEmpty, steps < 64 {
        steps += 1
        let action = queue.removeFirst()
        var replies: [[UInt8]] = []
        switch action {
        case let .send(b):
            replies = responder.receive(b)
        case let .startEncryption(k):
            if responder.tampered == false, let key = responder.key {
                require(k.key.bytes == key, "the initiator encrypts with a key the responder did not compute")
            }
            let a = initiator.encryptionChanged(status: 0)
            watch.check(a)
            queue += a
            replies = responder.distribution()
        case .complete, .failed:
            continue
        }
        for honest in replies {
            var deliver: [[UInt8]] = [honest]
            if !input.isAtEnd {
                let op = input.u8()
                let bytes = input.chunk()
                switch op % 4 {
                case 0: break
                case 1: deliver = [bytes]
                case 2:
                    var m = honest
                    if !m.isEmpty, let x = bytes.first, x != 0 { m[bytes.count % m.count] ^= x }
                    deliver = [m]
                default: deliver = [bytes, honest]
                }
                if deliver != [honest] { responder.tampered = true }
            }
            for b in deliver {
                checkSMPPDU(b)
                let a = initiator.receive(b)
                watch.check(a, after: b)
                queue += a
            }
        }
    }
}

/// An honest peripheral: answers the central with the crypto the
/// specification gives (its own reading, independent of the initiator's code
/// paths apart from the SMPCrypto functions).
final class FuzzResponder {
    let legacy: Bool
    let response: [UInt8]
    let central: DeviceAddress, peripheral: DeviceAddress
    var tampered = false
    private(set) var key: [UInt8]?
    private var preq: [UInt8] = []
    private var keyPair: P256KeyPair?
    private var peerKey: [UInt8] = []
    private var na: [UInt8] = []
    private var nb: [UInt8] = [UInt8](repeating: 0x3C, count: 16)
    private var mconfirm: [UInt8] = []
    private let zero = [UInt8](repeating: 0, count: 16)

    init(legacy: Bool, response: [UInt8], central: DeviceAddress, peripheral: DeviceAddress) {
        self.legacy = legacy
        var r = response
        // Its SC bit follows the mode; the rest is the fuzzer's.
        r[2] = legacy ? r[2] & ~0x08 : r[2] | 0x08
        self.response = r
        self.central = central
        self.peripheral = peripheral
    }

    private var pres: [UInt8] { [0x02] + response }
    private var keySize: Int { Int(min(preq.count == 7 ? preq[4] : 16, response[3])) }

    func receive(_ b: [UInt8]) -> [[UInt8]] {
        guard let pdu = try? SMPPDU.decode(b) else { return [] }
        do {
            switch pdu {
            case .pairingRequest:
                preq = b
                return [pres]
            case let .pairingPublicKey(x, y):
                peerKey = x + y
                let kp = try P256KeyPair()
                keyPair = kp
                let cb = try SMPCrypto.f4(u: kp.x, v: x, x: nb, z: 0)
                return [SMPPDU.pairingPublicKey(x: Array(kp.publicKey.prefix(32)), y: Array(kp.publicKey.suffix(32))).encoded,
                        SMPPDU.pairingConfirm(cb).encoded]
            case let .pairingConfirm(c):
                mconfirm = c
                return [SMPPDU.pairingConfirm(try SMPCrypto.c1(k: zero, r: nb, preq: preq, pres: pres, initiator: central, responder: peripheral)).encoded]
            case let .pairingRandom(r):
                na = r
                if legacy {
                    key = SMPCrypto.masked(try SMPCrypto.s1(k: zero, r1: nb, r2: r), size: keySize)
                }
                return [SMPPDU.pairingRandom(nb).encoded]
            case .pairingDHKeyCheck:
                guard let kp = keyPair else { return [] }
                let dh = try kp.dhKey(peerPublicKey: peerKey)
                let keys = try SMPCrypto.f5(w: dh, n1: na, n2: nb, a1: central, a2: peripheral)
                key = SMPCrypto.masked(keys.ltk, size: keySize)
                let eb = try SMPCrypto.f6(w: keys.macKey, n1: nb, n2: na, r: zero, ioCap: Array(response.prefix(3)), a1: peripheral, a2: central)
                return [SMPPDU.pairingDHKeyCheck(eb).encoded]
            default:
                return []
            }
        } catch {
            return []
        }
    }

    /// Its keys in the order of Core Vol 3 Part H 3.6.1.
    func distribution() -> [[UInt8]] {
        let keys = KeyDistribution(rawValue: response[5])
        var out: [[UInt8]] = []
        if keys.contains(.encKey) && legacy {
            out.append(SMPPDU.encryptionInformation(ltk: SMPSecret([UInt8](repeating: 0x11, count: 16))).encoded)
            out.append(SMPPDU.centralIdentification(ediv: 0x2222, rand: 0x3333).encoded)
        }
        if keys.contains(.idKey) {
            out.append(SMPPDU.identityInformation(irk: SMPSecret([UInt8](repeating: 0x44, count: 16))).encoded)
            out.append(SMPPDU.identityAddressInformation(type: 1, address: BDAddress(wire: [1, 2, 3, 4, 5, 0xC5])).encoded)
        }
        if keys.contains(.signKey) { out.append(SMPPDU.signingInformation(csrk: SMPSecret([UInt8](repeating: 0x55, count: 16))).encoded) }
        return out
    }
}
