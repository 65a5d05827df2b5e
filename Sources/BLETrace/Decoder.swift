import BLEWire
import BLETransport
import BLEHCI
import BLEGAP
import BLEL2CAP
import BLEATT
import BLEGATT
import BLESMP

/// Turns packets into human-readable lines, in the manner of btmon, using
/// the stack's own parsers. It never throws: a packet it cannot decode is
/// shown as hex with the reason. It keeps per-handle L2CAP reassembly state
/// (the stack's own `L2CAPReassembler`) so fragmented PDUs decode once
/// complete, and per-handle GATT state so a response is described by the
/// request it answers.
public final class PacketDecoder {
    /// One decoded packet: a header line and indented field lines.
    public struct Decoded: Sendable {
        public var header: String
        public var fields: [String]
        /// Which layer the packet belongs to, for filtering.
        public var layer: PacketLayer
    }

    /// Show key material (LE Enable Encryption's LTK, the SMP key PDUs and
    /// pairing random values); masked by default (`--trace=keys` sets it).
    public var showKeys = false
    private var reassembly: [Int: L2CAPReassembler] = [:]
    private var gatt: [UInt16: GATTTraceContext] = [:]

    /// A decoder with no reassembly in progress.
    public init() {}

    /// Decodes one packet travelling in `dir` (header marked "<" sent, ">"
    /// received): commands, events and ACL data are parsed, other packet types
    /// shown as hex. ACL data goes through the per-handle L2CAP reassembly.
    public func decode(_ p: HCIPacket, _ dir: Direction) -> Decoded {
        let arrow = dir == .sent ? "<" : ">"
        switch p.type {
        case .command: return decodeCommand(p.bytes, arrow)
        case .event: return decodeEvent(p.bytes, arrow)
        case .acl: return decodeACL(p.bytes, arrow, dir)
        default:
            return Decoded(header: "\(arrow) \(p.type) plen \(p.bytes.count)", fields: ["        " + Hex.string(p.bytes)], layer: .hci)
        }
    }

    // MARK: helpers

    static func h16(_ v: UInt16) -> String { "0x" + Hex.int(v, width: 4) }
    static func h8(_ v: UInt8) -> String { "0x" + Hex.int(v, width: 2) }
    static func hexLines(_ b: [UInt8], indent: String) -> [String] { Hex.lines(b).map { indent + $0 } }

    // MARK: commands and events (described in BLEHCI and BLEGAP)

    func decodeCommand(_ bytes: [UInt8], _ arrow: String) -> Decoded {
        guard let cmd = try? HCICommand.decode(bytes) else {
            return Decoded(header: "\(arrow) HCI Command (malformed) plen \(bytes.count)", fields: ["        truncated or length mismatch: " + Hex.string(bytes)], layer: .hci)
        }
        let header = "\(arrow) HCI Command: \(cmd.opcode.name) (\(Self.h16(cmd.opcode.rawValue))) plen \(cmd.parameters.count)"
        return Decoded(header: header, fields: cmd.traceFields(showKeys: showKeys).map { "        " + $0 }, layer: .hci)
    }

    func decodeEvent(_ bytes: [UInt8], _ arrow: String) -> Decoded {
        let plen = max(0, bytes.count - 2)
        let code = bytes.first.map { HCIEventCode(rawValue: $0) }
        let ev: HCIEvent
        do { ev = try HCIEvent.decode(bytes) } catch {
            let name = code.map { "\($0.name) (\(Self.h8($0.rawValue)))" } ?? "?"
            return Decoded(header: "\(arrow) HCI Event: \(name) plen \(plen)",
                           fields: ["        malformed: \(error)"] + Self.hexLines(bytes, indent: "        "), layer: .hci)
        }
        // A decoded event has its code byte; LE meta events are titled as btmon
        // titles them, with the subevent on the next line.
        let title = code.map { "\($0 == .leMeta ? "LE Meta Event" : $0.name) (\(Self.h8($0.rawValue)))" } ?? "?"
        let header = "\(arrow) HCI Event: \(title) plen \(plen)"
        var layer = PacketLayer.hci
        switch ev {
        case .disconnectionComplete(let d) where d.status == .success: forget(handle: d.handle)
        case .leAdvertisingReport: layer = .adv
        default: break
        }
        return Decoded(header: header, fields: HCIEvent.traceFields(bytes, showKeys: showKeys, advertisingReport: \.traceFields).map { "      " + $0 }, layer: layer)
    }

    /// Each AD structure on its own line(s) (`AdvertisingData.traceFields`), indented by `i`.
    public static func adLines(_ ad: AdvertisingData, indent i: String) -> [String] { ad.traceFields.map { i + $0 } }

    // MARK: ACL, L2CAP, ATT, signalling, SMP

    /// Reassembly and GATT state are kept per connection handle and direction
    /// (reassembly) or per handle (GATT), and forgotten on disconnection.
    private func reassemblyKey(_ handle: UInt16, _ dir: Direction) -> Int { Int(handle) * 2 + (dir == .sent ? 0 : 1) }

    func forget(handle: UInt16) {
        reassembly[reassemblyKey(handle, .sent)] = nil
        reassembly[reassemblyKey(handle, .received)] = nil
        gatt[handle] = nil
    }

    func decodeACL(_ bytes: [UInt8], _ arrow: String, _ dir: Direction) -> Decoded {
        guard let acl = try? ACLPacket.decode(bytes) else {
            return Decoded(header: "\(arrow) ACL Data (malformed) plen \(bytes.count)", fields: ["        length mismatch: " + Hex.string(bytes)], layer: .l2cap)
        }
        let header = "\(arrow) ACL Data: handle \(acl.handle) flags \(Self.h8(acl.boundary.rawValue | acl.broadcast << 2)) dlen \(acl.data.count)"
        var f: [String] = []
        let step = reassembly[reassemblyKey(acl.handle, dir), default: L2CAPReassembler()].receive(acl)
        for e in step.dropped {
            switch e {
            case .interrupted(let missing):
                f.append("      L2CAP: start fragment while the previous PDU lacked \(missing.map { "\($0) byte(s)" } ?? "bytes (its length field was incomplete)"): previous PDU dropped by the stack")
            case .continuationWithoutStart:
                f.append("      L2CAP: continuation without a start fragment (dropped by the stack)")
            case let .overlong(received, announced, pdu):
                let cid = (try? BasicFrame.decode(pdu))?.cid ?? 0
                f.append("      L2CAP: \(CID.name(cid)) (cid \(Self.h16(cid))) len \(announced) (but \(received) present)")
                f.append("        longer than its basic header says: dropped by the stack")
                f += Self.hexLines(Array(pdu.dropFirst(4)), indent: "        ")
            }
        }
        let frame: BasicFrame
        switch step.progress {
        case .complete(let fr)?: frame = fr
        case let .partial(received, expected)?:
            let what = acl.isStart ? "start fragment" : "continuation"
            f.append("      L2CAP: \(what), " + (expected.map { "\(received) of \($0) bytes" } ?? "\(received) byte(s), length field incomplete"))
            return Decoded(header: header, fields: f, layer: .l2cap)
        case nil:
            return Decoded(header: header, fields: f, layer: .l2cap)
        }
        f.append("      L2CAP: \(CID.name(frame.cid)) (cid \(Self.h16(frame.cid))) len \(frame.length)")
        var layer = PacketLayer.l2cap
        switch frame.cid {
        case CID.att: f += attLines(frame.payload, handle: acl.handle, sentByUs: dir == .sent); layer = .att
        case CID.leSignalling: f += signallingLines(frame.payload)
        case CID.smp: f += smpLines(frame.payload)
        default: f += Self.hexLines(frame.payload, indent: "        ")
        }
        return Decoded(header: header, fields: f, layer: layer)
    }

    /// The indented lines for one ATT PDU (an L2CAP payload on CID 0x0004),
    /// described by its declaration (`ATTPDU.traceFields`) and, for GATT declarations, by the
    /// connection's `GATTTraceContext`; a PDU that fails to decode gives its
    /// opcode, the error and a hex dump.
    /// - Parameters:
    ///   - handle: the connection the PDU travelled on (whose requests it may answer).
    ///   - sentByUs: true for a PDU this host sent.
    public func attLines(_ b: [UInt8], handle: UInt16 = 0, sentByUs: Bool = true) -> [String] {
        let i = "          "
        let summary = "        ATT: " + ATT.traceSummary(b)
        guard !b.isEmpty else { return [summary] }
        let pdu: any ATTPDU
        do { pdu = try ATT.decode(b) } catch {
            return [summary, "\(i)malformed: \(error)"] + Self.hexLines(b, indent: i)
        }
        return [summary] + gatt[handle, default: GATTTraceContext()].traceFields(pdu, sentByUs: sentByUs).map { i + $0 }
    }

    func signallingLines(_ b: [UInt8]) -> [String] {
        guard let cmd = try? SignallingCommand.decode(b) else { return ["        LE Signalling: malformed: " + Hex.string(b)] }
        return ["        LE Signalling: " + cmd.traceSummary] + cmd.traceFields.map { "          " + $0 }
    }

    /// The SMP PDU: its name line, then its fields as BLESMP declares them
    /// (key material masked unless `showKeys`).
    func smpLines(_ b: [UInt8]) -> [String] {
        ["        SMP: " + SMPPDU.traceSummary(b)] + SMPPDU.traceFields(bytes: b, showKeys: showKeys).map { "          " + $0 }
    }

    /// Byte ranges of a packet's H4 form that hold key material, for a
    /// masked hex dump: the fields the declarations mark `secret` (HCI
    /// commands and events, `HCICommand.secretRanges` and
    /// `HCIEvent.secretRanges`; SMP PDUs, `SMPPDU.secretRanges`, carried in a
    /// single ACL fragment, as all of them fit the smallest LE buffer).
    public static func secretRanges(_ p: HCIPacket) -> [Range<Int>] {
        let h4 = p.h4
        func shifted(_ rs: [Range<Int>], _ by: Int) -> [Range<Int>] { rs.map { $0.lowerBound + by..<$0.upperBound + by } }
        switch p.type {
        case .command:
            // 01, opcode (2), length, parameters.
            guard h4.count >= 4 else { return [] }
            return shifted(HCICommand(HCIOpcode(rawValue: UInt16(h4[1]) | UInt16(h4[2]) << 8), Array(h4[4...])).secretRanges, 4)
        case .event:
            // 04, then the event: code, length, parameters.
            return shifted(HCIEvent.secretRanges(p.bytes), 1)
        case .acl:
            // 02, handle+flags (2), length (2), L2CAP length (2), CID (2), the SMP PDU;
            // not a continuation fragment.
            guard h4.count >= 10, h4[2] & 0x30 != 0x10, UInt16(h4[7]) | UInt16(h4[8]) << 8 == CID.smp else { return [] }
            return shifted(SMPPDU.secretRanges(Array(h4[9...])), 9)
        default:
            return []
        }
    }
}

/// The --trace observer: decodes every packet as it crosses the tap and prints it.
public final class Tracer: PacketObserver {
    let decoder = PacketDecoder()
    let hex: Bool
    /// Show key material (`--trace=keys`); masked otherwise, also in the hex dump.
    public var showKeys = false { didSet { decoder.showKeys = showKeys } }
    let output: (String) -> Void
    let start = Instant.now()
    var count = 0

    /// A tracer passing each formatted packet to `output`, followed by a hex dump
    /// of its H4 bytes when `hex` is true.
    public init(hex: Bool, output: @escaping (String) -> Void) {
        self.hex = hex
        self.output = output
    }

    /// Numbers the packet, decodes it and outputs it with the seconds since the tracer was created.
    public func observe(_ packet: HCIPacket, direction: Direction, at time: Instant) {
        count += 1
        let d = decoder.decode(packet, direction)
        output(Tracer.format(d, packet: packet, number: count, seconds: time.usSince(start), hex: hex, showKeys: showKeys))
    }

    /// The shared layout of --trace and `attled decode`.
    /// The hex dump masks key material (as `**`) unless `showKeys`.
    public static func format(_ d: PacketDecoder.Decoded, packet: HCIPacket, number: Int, seconds us: UInt64, hex: Bool, showKeys: Bool = false) -> String {
        let secs = "\(us / 1_000_000).\(String(repeating: "0", count: 6 - String(us % 1_000_000).count))\(us % 1_000_000)"
        var lines = [d.header + "  #\(number) \(secs)"]
        lines += d.fields
        if hex {
            let h4 = packet.h4
            let secret = showKeys ? [] : PacketDecoder.secretRanges(packet)
            let cells = h4.indices.map { i in secret.contains { $0.contains(i) } ? "**" : Hex.int(h4[i], width: 2) }
            lines += stride(from: 0, to: cells.count, by: 16).map { "        | " + cells[$0..<min($0 + 16, cells.count)].joined(separator: " ") }
        }
        return lines.joined(separator: "\n")
    }
}

/// The layer a decoded packet belongs to (`attled decode --filter`).
public enum PacketLayer: String, Sendable, CaseIterable {
    /// HCI commands and events other than advertising reports.
    case hci
    /// Advertising reports.
    case adv
    /// L2CAP signalling, SMP and undecodable ACL.
    case l2cap
    /// ATT PDUs.
    case att
}
