// Shared pieces of the fuzz harnesses: an input cursor that never fails, a
// fake HCI transport, and the invariant check that turns a violation into a
// crash libFuzzer records.
#if canImport(Glibc)
import Glibc
#endif
import BLEWire
import BLETransport
import BLEHCI

/// Stops the process with `message` when an invariant does not hold; libFuzzer
/// saves the input as a crash artifact.
func require(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition {
        warn("fuzz invariant violated: \(message())")
        abort()
    }
}

/// Writes a line to stderr.
func warn(_ s: String) {
    let line = Array((s + "\n").utf8)
    _ = line.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
}

/// Reads structure out of fuzz bytes. Every read succeeds: past the end it
/// yields zeros or fewer bytes, so any input is a valid program for a harness.
struct FuzzInput {
    let bytes: [UInt8]
    private(set) var offset = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    var isAtEnd: Bool { offset >= bytes.count }

    mutating func u8() -> UInt8 {
        guard offset < bytes.count else { return 0 }
        defer { offset += 1 }
        return bytes[offset]
    }

    /// Up to `n` bytes (fewer at the end of the input).
    mutating func take(_ n: Int) -> [UInt8] {
        let k = min(max(0, n), bytes.count - offset)
        defer { offset += k }
        return Array(bytes[offset..<offset + k])
    }

    /// A length-prefixed chunk: one length byte, then that many bytes.
    mutating func chunk() -> [UInt8] { take(Int(u8())) }
}

/// A deterministic generator seeded from the input, for choices (split
/// points) that should vary with the input without using its bytes up.
struct SplitMix {
    var state: UInt64
    init(seed bytes: [UInt8]) {
        var h: UInt64 = 0xCBF2_9CE4_8422_2325 // FNV-1a
        for b in bytes { h = (h ^ UInt64(b)) &* 0x0000_0100_0000_01B3 }
        state = h ^ UInt64(bytes.count)
    }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
    mutating func below(_ n: Int) -> Int { n <= 1 ? 0 : Int(next() % UInt64(n)) }
}

/// A controller that exists only in memory. What the host sends is recorded;
/// what it receives comes from `inbox`. Commands can be answered at once with
/// success, so procedures that execute commands (scanning) can run. When the
/// inbox is empty, `receive` throws `closedByPeer`, which ends any wait at
/// once instead of letting a deadline pass in real time.
final class FakeController: HCITransport {
    let name = "fuzz"
    private(set) var sent: [HCIPacket] = []
    var inbox: [HCIPacket] = []
    private var inboxIndex = 0
    var answerCommands = true

    func send(_ packet: HCIPacket) throws {
        sent.append(packet)
        guard answerCommands, packet.type == .command, let cmd = try? HCICommand.decode(packet.bytes) else { return }
        var w = ByteWriter()
        // LE Create Connection and Disconnect are answered by Command Status.
        if cmd.opcode == LECreateConnection.opcode || cmd.opcode == HCI.LEExtendedCreateConnection.opcode || cmd.opcode == HCI.Disconnect.opcode {
            w.u8(0x0F); w.u8(4); w.u8(0); w.u8(1); w.u16(cmd.opcode.rawValue)
        } else {
            // Success, and for the initialisation reads a plausible controller.
            var rp: [UInt8] = [0x00]
            switch cmd.opcode {
            case HCI.ReadLocalVersion.opcode: rp += [0x09, 0x00, 0x00, 0x09, 0xFF, 0xFF, 0x00, 0x00]
            case HCI.ReadBDADDR.opcode: rp += [0x01, 0xF4, 0xF3, 0xF2, 0xF1, 0xF0]
            case HCI.LEReadBufferSize.opcode: rp += [0x1B, 0x00, 0x08]
            default: break
            }
            w.u8(0x0E); w.u8(UInt8(3 + rp.count)); w.u8(1); w.u16(cmd.opcode.rawValue); w.append(rp)
        }
        inbox.insert(HCIPacket(.event, w.bytes), at: inboxIndex)
    }

    func receive(timeoutMs: Int, wakeFD: Int32) throws -> ReceiveResult {
        guard inboxIndex < inbox.count else { throw TransportError.closedByPeer(name) }
        defer { inboxIndex += 1 }
        return .packet(inbox[inboxIndex])
    }

    var pendingInbox: Int { inbox.count - inboxIndex }

    func close() {}
}

/// ACL packets the host sent on `handle`, reassembled into L2CAP PDUs
/// (basic header included). Checks each fragment is well formed on the way.
func sentL2CAPPDUs(_ packets: [HCIPacket], handle: UInt16) -> [[UInt8]] {
    var out: [[UInt8]] = []
    var cur: [UInt8]? = nil
    for p in packets where p.type == .acl {
        guard let acl = try? ACLPacket.decode(p.bytes) else {
            require(false, "host sent an ACL packet that does not decode: \(Hex.string(p.bytes))")
            return out
        }
        guard acl.handle == handle else { continue }
        if acl.isStart {
            require(cur == nil, "host started a PDU before finishing the previous one")
            cur = acl.data
        } else {
            require(cur != nil, "host sent a continuation without a start")
            cur! += acl.data
        }
        if let c = cur, c.count >= 2, c.count == Int(UInt16(c[0]) | UInt16(c[1]) << 8) + 4 {
            out.append(c)
            cur = nil
        }
    }
    return out
}

/// An H4 record: the type byte, then the packet.
func packet(_ type: UInt8, _ bytes: [UInt8]) -> HCIPacket { HCIPacket(HCIPacketType(rawValue: type), bytes) }

/// An event packet from its code and parameters (length filled in, capped at 255).
func event(_ code: UInt8, _ params: [UInt8]) -> HCIPacket {
    let p = Array(params.prefix(255))
    return HCIPacket(.event, [code, UInt8(p.count)] + p)
}

/// Disconnection Complete (success) for `handle`.
func disconnection(handle: UInt16, reason: UInt8 = 0x13) -> HCIPacket {
    event(0x05, [0x00, UInt8(handle & 0xFF), UInt8(handle >> 8), reason])
}

/// Number Of Completed Packets for one handle.
func completedPackets(handle: UInt16, count: UInt16) -> HCIPacket {
    event(0x13, [0x01, UInt8(handle & 0xFF), UInt8(handle >> 8), UInt8(count & 0xFF), UInt8(count >> 8)])
}
