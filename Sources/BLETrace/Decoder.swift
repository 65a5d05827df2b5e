import BLEWire
import BLETransport
import BLEHCI
import BLEGAP
import BLEL2CAP
import BLEATT
import BLEGATT

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

    static func ms(_ units: UInt16, _ unitUs: UInt64) -> String { formatMs(us: UInt64(units) * unitUs, decimals: 3) + " msec" }
    static func h16(_ v: UInt16) -> String { "0x" + Hex.int(v, width: 4) }
    static func h8(_ v: UInt8) -> String { "0x" + Hex.int(v, width: 2) }
    static func hexLines(_ b: [UInt8], indent: String) -> [String] {
        stride(from: 0, to: b.count, by: 16).map { indent + Hex.string(b[$0..<min($0 + 16, b.count)]) }
    }

    // MARK: commands

    func decodeCommand(_ bytes: [UInt8], _ arrow: String) -> Decoded {
        guard let cmd = try? HCICommand.decode(bytes) else {
            return Decoded(header: "\(arrow) HCI Command (malformed) plen \(bytes.count)", fields: ["        truncated or length mismatch: " + Hex.string(bytes)], layer: .hci)
        }
        let header = "\(arrow) HCI Command: \(cmd.opcode.name) (\(Self.h16(cmd.opcode.rawValue))) plen \(cmd.parameters.count)"
        var f: [String] = []
        let i = "        "
        do {
            switch cmd.opcode {
            case .leSetScanParameters:
                let p = try LEScanParameters.decode(cmd.parameters)
                f += ["\(i)Type: \(p.active ? "Active" : "Passive") (\(Self.h8(p.active ? 1 : 0)))",
                      "\(i)Interval: \(Self.ms(p.interval, 625)) (\(Self.h16(p.interval)))",
                      "\(i)Window: \(Self.ms(p.window, 625)) (\(Self.h16(p.window)))",
                      "\(i)Own address type: \(p.ownAddressType)", "\(i)Filter policy: \(Self.h8(p.filterPolicy))"]
            case .leSetExtendedScanParameters:
                let (p, phys) = try LEScanParameters.decodeExtended(cmd.parameters)
                f += ["\(i)Own address type: \(p.ownAddressType)", "\(i)Filter policy: \(Self.h8(p.filterPolicy))",
                      "\(i)PHYs: \(Self.h8(phys))", "\(i)Type: \(p.active ? "Active" : "Passive")",
                      "\(i)Interval: \(Self.ms(p.interval, 625))", "\(i)Window: \(Self.ms(p.window, 625))"]
            case .leSetScanEnable, .leSetExtendedScanEnable:
                var r = ByteReader(cmd.parameters)
                f.append("\(i)Scanning: \(try r.u8("Enable") == 1 ? "Enabled" : "Disabled")")
                f.append("\(i)Filter duplicates: \(try r.u8("Filter_Duplicates") != 0 ? "Enabled" : "Disabled")")
                if cmd.opcode == .leSetExtendedScanEnable {
                    f.append("\(i)Duration: \(Self.ms(try r.u16("Duration"), 10_000))")
                    f.append("\(i)Period: \(formatMs(us: UInt64(try r.u16("Period")) * 1_280_000, decimals: 0)) msec")
                }
            case .leCreateConnection, .leExtendedCreateConnection:
                let c = cmd.opcode == .leCreateConnection ? try LECreateConnection.decode(cmd.parameters) : try LECreateConnection.decodeExtended(cmd.parameters)
                f += ["\(i)Scan interval: \(Self.ms(c.scanInterval, 625))", "\(i)Scan window: \(Self.ms(c.scanWindow, 625))",
                      "\(i)Filter policy: \(Self.h8(c.filterPolicy))",
                      "\(i)Peer address: \(c.peer.address) (\(c.peer.type))", "\(i)Own address type: \(c.ownAddressType)"]
                f += connParams(c.connection, i)
            case .leConnectionUpdate:
                let u = try LEConnectionUpdate.decode(cmd.parameters)
                f.append("\(i)Handle: \(u.handle)")
                f += connParams(u.parameters, i)
            case .disconnect:
                var r = ByteReader(cmd.parameters)
                f.append("\(i)Handle: \(try r.u16("Connection_Handle"))")
                f.append("\(i)Reason: \(HCIStatus(rawValue: try r.u8("Reason")))")
            case .leSetRandomAddress:
                var r = ByteReader(cmd.parameters)
                let a = try BDAddress.read(&r)
                f.append("\(i)Address: \(a) (\(a.randomKind))")
            case .setEventMask, .leSetEventMask:
                var r = ByteReader(cmd.parameters)
                f.append("\(i)Mask: 0x\(Hex.int(try r.u64("Event_Mask"), width: 16))")
            default:
                if !cmd.parameters.isEmpty { f += Self.hexLines(cmd.parameters, indent: i) }
            }
        } catch {
            f.append("\(i)malformed parameters: \(error)")
            f += Self.hexLines(cmd.parameters, indent: i)
        }
        return Decoded(header: header, fields: f, layer: .hci)
    }

    func connParams(_ c: ConnectionParameters, _ i: String) -> [String] {
        ["\(i)Min connection interval: \(Self.ms(c.intervalMin, 1250))", "\(i)Max connection interval: \(Self.ms(c.intervalMax, 1250))",
         "\(i)Connection latency: \(c.latency)", "\(i)Supervision timeout: \(formatMs(us: UInt64(c.supervisionTimeout) * 10_000, decimals: 0)) msec",
         "\(i)Min CE length: \(Self.ms(c.minCELength, 625))", "\(i)Max CE length: \(Self.ms(c.maxCELength, 625))"]
    }

    // MARK: events

    func decodeEvent(_ bytes: [UInt8], _ arrow: String) -> Decoded {
        let code = bytes.first.map { HCIEventCode(rawValue: $0) }
        let ev: HCIEvent
        do { ev = try HCIEvent.decode(bytes) } catch {
            let name = code.map { "\($0.name) (\(Self.h8($0.rawValue)))" } ?? "?"
            return Decoded(header: "\(arrow) HCI Event: \(name) plen \(max(0, bytes.count - 2))",
                           fields: ["        malformed: \(error)"] + Self.hexLines(bytes, indent: "        "), layer: .hci)
        }
        let plen = max(0, bytes.count - 2)
        let i = "        "
        var layer = PacketLayer.hci
        var f: [String] = []
        var header = "\(arrow) HCI Event: \(code!.name) (\(Self.h8(code!.rawValue))) plen \(plen)"
        switch ev {
        case .commandComplete(let cc):
            header = "\(arrow) HCI Event: Command Complete (0x0e) plen \(plen)"
            f.append("      \(cc.opcode.name) (\(Self.h16(cc.opcode.rawValue))) ncmd \(cc.numCommandPackets)")
            if let s = cc.status { f.append("\(i)Status: \(s)") }
            f += returnParameters(cc, i)
        case .commandStatus(let cs):
            f.append("      \(cs.opcode.name) (\(Self.h16(cs.opcode.rawValue))) ncmd \(cs.numCommandPackets)")
            f.append("\(i)Status: \(cs.status)")
        case .disconnectionComplete(let d):
            if d.status == .success { forget(handle: d.handle) }
            f += ["\(i)Status: \(d.status)", "\(i)Handle: \(d.handle)", "\(i)Reason: \(d.reason)"]
        case .numberOfCompletedPackets(let l):
            f.append("\(i)Num handles: \(l.count)")
            for hc in l { f += ["\(i)Handle: \(hc.handle)", "\(i)Count: \(hc.count)"] }
        case .hardwareError(let c):
            f.append("\(i)Code: \(Self.h8(c))")
        case .dataBufferOverflow(let t):
            f.append("\(i)Link type: \(Self.h8(t))")
        case .leConnectionComplete(let c):
            let sub = c.enhanced ? LESubevent.enhancedConnectionComplete : .connectionComplete
            header = "\(arrow) HCI Event: LE Meta Event (0x3e) plen \(plen)"
            f.append("      \(sub.name) (\(Self.h8(sub.rawValue)))")
            f += ["\(i)Status: \(c.status)", "\(i)Handle: \(c.handle)", "\(i)Role: \(c.role == 0 ? "Central" : "Peripheral") (\(Self.h8(c.role)))",
                  "\(i)Peer address: \(c.peer.address) (\(c.peer.type))",
                  "\(i)Connection interval: \(Self.ms(c.interval, 1250))", "\(i)Connection latency: \(c.latency)",
                  "\(i)Supervision timeout: \(formatMs(us: UInt64(c.supervisionTimeout) * 10_000, decimals: 0)) msec",
                  "\(i)Central clock accuracy: \(Self.h8(c.centralClockAccuracy))"]
        case let .leAdvertisingReport(reports, extended):
            layer = .adv
            header = "\(arrow) HCI Event: LE Meta Event (0x3e) plen \(plen)"
            let sub = extended ? LESubevent.extendedAdvertisingReport : .advertisingReport
            f.append("      \(sub.name) (\(Self.h8(sub.rawValue)))")
            f.append("\(i)Num reports: \(reports.count)")
            for r in reports { f += advReport(r, i) }
        case .leConnectionUpdateComplete(let u):
            header = "\(arrow) HCI Event: LE Meta Event (0x3e) plen \(plen)"
            f.append("      LE Connection Update Complete (0x03)")
            f += ["\(i)Status: \(u.status)", "\(i)Handle: \(u.handle)", "\(i)Connection interval: \(Self.ms(u.interval, 1250))",
                  "\(i)Connection latency: \(u.latency)", "\(i)Supervision timeout: \(formatMs(us: UInt64(u.supervisionTimeout) * 10_000, decimals: 0)) msec"]
        case .leDataLengthChange(let d):
            header = "\(arrow) HCI Event: LE Meta Event (0x3e) plen \(plen)"
            f.append("      LE Data Length Change (0x07)")
            f += ["\(i)Handle: \(d.handle)", "\(i)Max TX octets: \(d.maxTxOctets)", "\(i)Max TX time: \(d.maxTxTime) usec",
                  "\(i)Max RX octets: \(d.maxRxOctets)", "\(i)Max RX time: \(d.maxRxTime) usec"]
        case let .leMeta(sub, rest):
            header = "\(arrow) HCI Event: LE Meta Event (0x3e) plen \(plen)"
            f.append("      \(sub.name) (\(Self.h8(sub.rawValue)))")
            f += Self.hexLines(rest, indent: i)
        case let .other(_, rest):
            f += Self.hexLines(rest, indent: i)
        }
        return Decoded(header: header, fields: f, layer: layer)
    }

    func returnParameters(_ cc: CommandComplete, _ i: String) -> [String] {
        guard cc.status == .success else { return [] }
        let rp = cc.returnParameters
        switch cc.opcode {
        case .readBDADDR where rp.count >= 7:
            return ["\(i)Address: \(BDAddress(wire: Array(rp[1..<7])))"]
        case .leReadBufferSize:
            guard let b = try? BufferSize.decodeLE(rp) else { return ["\(i)malformed: " + Hex.string(rp)] }
            return ["\(i)Data packet length: \(b.aclLength)", "\(i)Num data packets: \(b.aclPackets)"]
        case .readBufferSize:
            guard let b = try? BufferSize.decodeBREDR(rp) else { return ["\(i)malformed: " + Hex.string(rp)] }
            return ["\(i)ACL MTU: \(b.aclLength) ACL max packet: \(b.aclPackets)"]
        case .readLocalVersion:
            guard let v = try? LocalVersion.decode(rp) else { return ["\(i)malformed: " + Hex.string(rp)] }
            return ["\(i)HCI version: \(LocalVersion.coreVersionName(v.hciVersion)) (\(Self.h8(v.hciVersion))) - revision \(Self.h16(v.hciRevision))",
                    "\(i)LMP version: \(LocalVersion.coreVersionName(v.lmpVersion)) (\(Self.h8(v.lmpVersion))) - subversion \(Self.h16(v.lmpSubversion))",
                    "\(i)Manufacturer: \(Self.h16(v.manufacturer))"]
        default:
            return rp.count > 1 ? Self.hexLines(Array(rp.dropFirst()), indent: i) : []
        }
    }

    func advReport(_ r: AdvertisingReport, _ i: String) -> [String] {
        var f: [String] = []
        if let lt = r.legacyType {
            f.append("\(i)Event type: \(AdvertisingReport.legacyTypeName(lt)) (\(Self.h8(lt)))")
        } else {
            var bits: [String] = []
            if r.isConnectable { bits.append("connectable") }
            if r.isScannable { bits.append("scannable") }
            if r.isDirected { bits.append("directed") }
            if r.isScanResponse { bits.append("scan response") }
            if r.isLegacyPDU { bits.append("legacy") }
            bits.append(["complete", "incomplete, more to come", "incomplete, truncated", "reserved"][Int(r.dataStatus)])
            f.append("\(i)Event type: \(Self.h16(r.eventType)) (\(bits.joined(separator: ", ")))")
        }
        f.append("\(i)Address: \(r.address.address) (\(r.address.type))")
        if r.legacyType == nil {
            f.append("\(i)Primary PHY: \(r.primaryPHY), secondary PHY: \(r.secondaryPHY), SID: \(Self.h8(r.sid))")
            f.append("\(i)TX power: \(r.txPower == 127 ? "not available" : "\(r.txPower) dBm")")
        }
        f.append("\(i)Data length: \(r.data.count)")
        f += Self.adLines(AdvertisingData(r.data), indent: i)
        f.append("\(i)RSSI: \(r.rssi == 127 ? "not available" : "\(r.rssi) dBm") (\(Self.h8(UInt8(bitPattern: r.rssi))))")
        return f
    }

    /// Each AD structure on its own line(s).
    public static func adLines(_ ad: AdvertisingData, indent i: String) -> [String] {
        var f: [String] = []
        for s in ad.structures {
            switch s.field {
            case .flags(let v):
                f.append("\(i)Flags: \(h8(v))")
                for n in AdvertisingData.flagNames(v) { f.append("\(i)  \(n)") }
            case let .serviceUUIDs(l, complete):
                let w = s.type.rawValue <= 3 ? 16 : s.type.rawValue <= 5 ? 32 : 128
                f.append("\(i)\(w)-bit Service UUIDs (\(complete ? "complete" : "partial")): \(l.count) entr\(l.count == 1 ? "y" : "ies")")
                for u in l { f.append("\(i)  \(u)") }
            case .solicitationUUIDs(let l):
                f.append("\(i)\(s.type.name): " + l.map(\.description).joined(separator: ", "))
            case let .localName(n, complete):
                f.append("\(i)Name (\(complete ? "complete" : "short")): \(n)")
            case .txPower(let t): f.append("\(i)TX power: \(t) dBm")
            case .appearance(let a): f.append("\(i)Appearance: \(h16(a))")
            case let .manufacturerData(c, d):
                f.append("\(i)Company: \(h16(c))")
                f.append("\(i)  Data: \(Hex.string(d, separator: ""))")
            case let .serviceData(u, d):
                f.append("\(i)Service Data (UUID \(u)): \(Hex.string(d, separator: ""))")
            case .uri(let u): f.append("\(i)URI: \(u)")
            case .advertisingInterval(let v): f.append("\(i)Advertising interval: \(formatMs(us: UInt64(v) * 625, decimals: 3)) msec")
            case let .connectionIntervalRange(a, b):
                f.append("\(i)Peripheral connection interval: \(ms(a, 1250)) - \(ms(b, 1250))")
            case let .targetAddresses(l, random):
                f.append("\(i)\(random ? "Random" : "Public") target address: " + l.map(\.description).joined(separator: ", "))
            case .leRole(let r): f.append("\(i)LE role: \(h8(r))")
            case .classOfDevice(let c): f.append("\(i)Class of device: 0x\(Hex.int(c, width: 6))")
            case let .leAddress(a, random): f.append("\(i)LE address: \(a) (\(random ? "random" : "public"))")
            case .raw(let d):
                f.append("\(i)\(s.type.name) (\(h8(s.type.rawValue))): \(Hex.string(d, separator: ""))" + (s.problem.map { " [malformed: \($0)]" } ?? ""))
            }
        }
        for p in ad.problems where !ad.structures.contains(where: { $0.problem != nil && p.contains($0.problem!) }) {
            f.append("\(i)malformed advertising data: \(p)")
        }
        return f
    }

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
        let frame: BasicFrame
        do throws(ReassemblyError) {
            let step = try reassembly[reassemblyKey(acl.handle, dir), default: L2CAPReassembler()].receive(acl)
            if case let .interrupted(missing)? = step.interrupted {
                f.append("      L2CAP: start fragment while the previous PDU lacked \(missing.map { "\($0) byte(s)" } ?? "bytes"): previous PDU dropped by the stack")
            }
            switch step.progress {
            case .complete(let fr): frame = fr
            case let .partial(received, expected):
                let what = acl.isStart ? "start fragment" : "continuation"
                f.append("      L2CAP: \(what), " + (expected.map { "\(received) of \($0) bytes" } ?? "\(received) byte(s), length field incomplete"))
                return Decoded(header: header, fields: f, layer: .l2cap)
            }
        } catch {
            switch error {
            case .continuationWithoutStart, .interrupted:
                f.append("      L2CAP: continuation without a start fragment (dropped by the stack)")
            case let .overlong(received, announced, pdu):
                let cid = (try? BasicFrame.decode(pdu))?.cid ?? 0
                f.append("      L2CAP: \(CID.name(cid)) (cid \(Self.h16(cid))) len \(announced) (but \(received) present)")
                f.append("        longer than its basic header says: dropped by the stack")
                f += Self.hexLines(Array(pdu.dropFirst(4)), indent: "        ")
            }
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
    /// described by `ATTPDU.traceFields` and, for GATT declarations, by the
    /// connection's `GATTTraceContext`; a PDU that fails to decode gives its
    /// opcode, the error and a hex dump.
    /// - Parameters:
    ///   - handle: the connection the PDU travelled on (whose requests it may answer).
    ///   - sentByUs: true for a PDU this host sent.
    public func attLines(_ b: [UInt8], handle: UInt16 = 0, sentByUs: Bool = true) -> [String] {
        let i = "          "
        let summary = "        ATT: " + ATTPDU.traceSummary(b)
        guard !b.isEmpty else { return [summary] }
        let pdu: ATTPDU
        do { pdu = try ATTPDU.decode(b) } catch {
            return [summary, "\(i)malformed: \(error)"] + Self.hexLines(b, indent: i)
        }
        return [summary] + gatt[handle, default: GATTTraceContext()].traceFields(pdu, sentByUs: sentByUs).map { i + $0 }
    }

    func signallingLines(_ b: [UInt8]) -> [String] {
        guard let cmd = try? SignallingCommand.decode(b) else { return ["        LE Signalling: malformed: " + Hex.string(b)] }
        return ["        LE Signalling: " + cmd.traceSummary] + cmd.traceFields.map { "          " + $0 }
    }

    func smpLines(_ b: [UInt8]) -> [String] {
        ["        SMP: " + SMP.traceSummary(b)] + SMP.traceFields(b).map { "          " + $0 }
    }
}

/// The --trace observer: decodes every packet as it crosses the tap and prints it.
public final class Tracer: PacketObserver {
    let decoder = PacketDecoder()
    let hex: Bool
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
        output(Tracer.format(d, packet: packet, number: count, seconds: time.usSince(start), hex: hex))
    }

    /// The shared layout of --trace and `attled decode`.
    public static func format(_ d: PacketDecoder.Decoded, packet: HCIPacket, number: Int, seconds us: UInt64, hex: Bool) -> String {
        let secs = "\(us / 1_000_000).\(String(repeating: "0", count: 6 - String(us % 1_000_000).count))\(us % 1_000_000)"
        var lines = [d.header + "  #\(number) \(secs)"]
        lines += d.fields
        if hex { lines += PacketDecoder.hexLines(packet.h4, indent: "        | ") }
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
