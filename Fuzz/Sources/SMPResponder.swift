// smp-responder: the peripheral-side pairing state machine (SMPResponder).
// The input:
//   byte 0: mode. Bit 0 clear, "raw": an idle SMPResponder runs the rest
//           as records `op, len, bytes`: op % 5 = 0 receive the bytes as an
//           SMP PDU, 1 Encryption Change with status bytes[0], 2 SMP
//           timeout, 3 cancel, 4 send a Security Request.
//           Bit 0 set, "peer": attled's own SMPInitiator (legacy when bit 1
//           is set, else LE Secure Connections) pairs with it. Then one
//           record `op, len, bytes` per PDU the initiator sends: op % 4 = 0
//           deliver it, 1 deliver the record's bytes instead, 2 deliver it
//           with byte (len % size) XOR bytes[0], 3 deliver the record's
//           bytes and then it. Once the records run out every PDU is
//           delivered as is.
//   Bits 2-5 configure the responder: 4 no Secure Connections, 8 SC Only
//   (no legacy), 16 an identity to distribute, 32 no bonding.
// Every PDU the responder sends must decode (and encode back, its tracer
// line hiding keys); a Pairing Failed it sends is followed by .failed(.local)
// of that reason; it never answers a Pairing Failed, never starts
// encryption, ends at most once and says nothing after; it offers a key for
// the LTK Request only between the checks and the Encryption Change; and,
// untampered, it and the initiator agree on the key.
import BLEWire
import BLESMP

func fuzzSMPResponder(_ data: [UInt8]) {
    var input = FuzzInput(data)
    let mode = input.u8()
    let central = DeviceAddress(BDAddress(wire: [0x01, 0x02, 0x03, 0x04, 0x05, 0xC6]), .random)
    let peripheral = DeviceAddress(BDAddress(wire: [0xA1, 0xA2, 0xA3, 0xA4, 0xA5, 0xA6]), .public)
    var config = SMPConfiguration()
    config.peerKeys = [.idKey, .signKey]
    if mode & 4 != 0 { config.secureConnections = false }
    if mode & 8 != 0 { config.allowLegacy = false }
    if mode & 16 != 0 { config.localIdentity = LocalIdentity(irk: SMPSecret([UInt8](repeating: 0x5A, count: 16)), address: peripheral) }
    if mode & 32 != 0 { config.bonding = false }
    var responder = SMPResponder(configuration: config, initiator: central, responder: peripheral)
    var watch = SMPWatch()

    func check(_ actions: [SMPAction], after input: [UInt8]? = nil) {
        for a in actions { if case .startEncryption = a { require(false, "the responder started encryption") } }
        watch.check(actions, after: input)
        let offers = responder.key(ediv: 0, rand: 0) != nil
        require(!offers || responder.phase == .awaitingEncryption, "a key offered while \(responder.phase)")
    }

    if mode & 1 == 0 {
        while !input.isAtEnd {
            let op = input.u8()
            let bytes = input.chunk()
            let actions: [SMPAction]
            switch op % 5 {
            case 0: checkSMPPDU(bytes); actions = responder.receive(bytes); check(actions, after: bytes); continue
            case 1: actions = responder.encryptionChanged(status: bytes.first ?? 0)
            case 2: actions = responder.timeout()
            case 3: actions = responder.cancel(reason: PairingFailedReason(rawValue: bytes.first ?? 8))
            default: actions = responder.securityRequest()
            }
            check(actions)
        }
        return
    }

    // Peer mode: attled's initiator on the other side.
    var ic = SMPConfiguration()
    ic.secureConnections = mode & 2 == 0
    ic.localIdentity = LocalIdentity(irk: SMPSecret([UInt8](repeating: 0xA5, count: 16)), address: central)
    var initiator = SMPInitiator(configuration: ic, initiator: central, responder: peripheral)
    var tampered = false
    var toResponder = initiator.start()
    var steps = 0
    while !toResponder.isEmpty, steps < 64 {
        steps += 1
        var next: [SMPAction] = []
        var back: [SMPAction] = []
        for action in toResponder {
            switch action {
            case let .send(honest):
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
                    if deliver != [honest] { tampered = true }
                }
                for b in deliver {
                    checkSMPPDU(b)
                    let a = responder.receive(b)
                    check(a, after: b)
                    back += a
                }
            case let .startEncryption(k):
                let offered = responder.key(ediv: k.ediv, rand: k.rand)
                if !tampered { require(offered == k, "the responder offers another key than the initiator encrypts with") }
                let a = responder.encryptionChanged(status: offered == nil ? 0x06 : 0, enabled: offered != nil)
                check(a)
                back += a
                next += initiator.encryptionChanged(status: offered == nil ? 0x06 : 0, enabled: offered != nil)
            case .complete, .failed:
                continue
            }
        }
        for a in back { if case let .send(b) = a { next += initiator.receive(b) } }
        toResponder = next
    }
}
