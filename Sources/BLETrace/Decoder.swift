import BLEWire
import BLETransport
import BLEHCI
import BLEGAP
import BLEL2CAP
import BLEATT

/// Turns packets into human-readable lines, in the manner of btmon, using
/// the stack's own parsers. It never throws: a packet it cannot decode is
/// shown as hex with the reason. It keeps per-handle L2CAP reassembly state
/// so fragmented PDUs decode once complete.
public final class PacketDecoder {
    /// One decoded packet: a header line and indented field lines.
    public struct Decoded: Sendable {
        public var header: String
        public var fields: [String]
        /// Which layer the packet belongs to, for filtering.
        public var layer: PacketLayer
    }

    private var reassembly: [Int: (expected: Int, data: [UInt8])] = [:]

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
    static func printable(_ b: [UInt8]) -> String {
        guard !b.isEmpty, b.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) else { return "" }
        return " \"" + String(decoding: b, as: UTF8.self) + "\""
    }
    static func value(_ b: [UInt8]) -> String {
        b.isEmpty ? "(empty)" : Hex.string(b) + printable(b)
    }
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

    func decodeACL(_ bytes: [UInt8], _ arrow: String, _ dir: Direction) -> Decoded {
        guard let acl = try? ACLPacket.decode(bytes) else {
            return Decoded(header: "\(arrow) ACL Data (malformed) plen \(bytes.count)", fields: ["        length mismatch: " + Hex.string(bytes)], layer: .l2cap)
        }
        let header = "\(arrow) ACL Data: handle \(acl.handle) flags \(Self.h8(acl.boundary.rawValue | acl.broadcast << 2)) dlen \(acl.data.count)"
        let key = Int(acl.handle) * 2 + (dir == .sent ? 0 : 1)
        var pdu: [UInt8]
        if acl.isStart {
            if acl.data.count >= 2 {
                let len = Int(UInt16(acl.data[0]) | UInt16(acl.data[1]) << 8) + 4
                if acl.data.count < len {
                    reassembly[key] = (len, acl.data)
                    return Decoded(header: header, fields: ["      L2CAP: start fragment, \(acl.data.count) of \(len) bytes"], layer: .l2cap)
                }
            }
            reassembly[key] = nil
            pdu = acl.data
        } else {
            guard var st = reassembly[key] else {
                return Decoded(header: header, fields: ["      L2CAP: continuation without a start fragment (dropped by the stack)"], layer: .l2cap)
            }
            st.data += acl.data
            if st.data.count < st.expected {
                reassembly[key] = st
                return Decoded(header: header, fields: ["      L2CAP: continuation, \(st.data.count) of \(st.expected) bytes"], layer: .l2cap)
            }
            reassembly[key] = nil
            pdu = st.data
        }
        var r = ByteReader(pdu)
        guard let len = try? r.u16(), let cid = try? r.u16() else {
            return Decoded(header: header, fields: ["      L2CAP: truncated basic header: " + Hex.string(pdu)], layer: .l2cap)
        }
        let payload = r.rest()
        var f = ["      L2CAP: \(CID.name(cid)) (cid \(Self.h16(cid))) len \(len)" + (Int(len) != payload.count ? " (but \(payload.count) present)" : "")]
        var layer = PacketLayer.l2cap
        switch cid {
        case CID.att: f += attLines(payload); layer = .att
        case CID.leSignalling: f += signallingLines(payload)
        case CID.smp: f += smpLines(payload)
        default: f += Self.hexLines(payload, indent: "        ")
        }
        return Decoded(header: header, fields: f, layer: layer)
    }

    /// The indented lines for one ATT PDU (an L2CAP payload on CID 0x0004); a PDU
    /// that fails to decode gives its opcode, the error and a hex dump.
    public func attLines(_ b: [UInt8]) -> [String] {
        let i = "          "
        guard let op = b.first.map({ ATTOpcode(rawValue: $0) }) else { return ["        ATT: empty PDU"] }
        let pdu: ATTPDU
        do { pdu = try ATTPDU.decode(b) } catch {
            return ["        ATT: \(op.name) (\(Self.h8(op.rawValue))) len \(b.count - 1)", "\(i)malformed: \(error)"] + Self.hexLines(b, indent: i)
        }
        var f = ["        ATT: \(op.name) (\(Self.h8(op.rawValue))) len \(b.count - 1)"]
        func range(_ s: UInt16, _ e: UInt16) -> String { "\(Self.h16(s))-\(Self.h16(e))" }
        switch pdu {
        case let .errorResponse(req, h, e):
            f += ["\(i)\(req.name) (\(Self.h8(req.rawValue)))", "\(i)Handle: \(Self.h16(h))", "\(i)Error: \(e)"]
        case .exchangeMTURequest(let m): f.append("\(i)Client RX MTU: \(m)")
        case .exchangeMTUResponse(let m): f.append("\(i)Server RX MTU: \(m)")
        case let .findInformationRequest(s, e): f.append("\(i)Handle range: \(range(s, e))")
        case .findInformationResponse(let l):
            f.append("\(i)Format: \(l.first?.uuid.uint16 != nil ? "UUID-16 (0x01)" : "UUID-128 (0x02)")")
            for hu in l { f.append("\(i)Handle: \(Self.h16(hu.handle))  UUID: \(Self.uuidName(hu.uuid))") }
        case let .findByTypeValueRequest(s, e, t, v):
            f += ["\(i)Handle range: \(range(s, e))", "\(i)Attribute type: \(Self.uuidName(BluetoothUUID(uint16: t)))"]
            f.append("\(i)UUID: " + (BluetoothUUID(wire: v).map { Self.uuidName($0) } ?? Hex.string(v)))
        case .findByTypeValueResponse(let l):
            for h in l { f.append("\(i)Handle range: \(range(h.found, h.groupEnd))") }
        case let .readByTypeRequest(s, e, t), let .readByGroupTypeRequest(s, e, t):
            f += ["\(i)Handle range: \(range(s, e))", "\(i)Attribute type: \(Self.uuidName(t))"]
        case .readByTypeResponse(let l):
            f.append("\(i)Attribute data length: \((l.first?.value.count ?? 0) + 2)")
            for hv in l {
                f.append("\(i)Handle: \(Self.h16(hv.handle))")
                if let c = Self.characteristicDeclaration(hv.handle, hv.value) { f += c.map { "\(i)  " + $0 } }
                else { f.append("\(i)  Value: \(Self.value(hv.value))") }
            }
        case .readByGroupTypeResponse(let l):
            f.append("\(i)Attribute data length: \((l.first?.value.count ?? 0) + 4)")
            for g in l {
                let u = BluetoothUUID(wire: g.value).map { Self.uuidName($0) } ?? Hex.string(g.value)
                f.append("\(i)Attribute group list: \(range(g.handle, g.endGroup))  UUID: \(u)")
            }
        case .readRequest(let h): f.append("\(i)Handle: \(Self.h16(h))")
        case let .readBlobRequest(h, o): f += ["\(i)Handle: \(Self.h16(h))", "\(i)Offset: \(o)"]
        case .readResponse(let v), .readBlobResponse(let v), .readMultipleResponse(let v): f.append("\(i)Value: \(Self.value(v))")
        case .readMultipleRequest(let hs): f.append("\(i)Handles: " + hs.map { Self.h16($0) }.joined(separator: " "))
        case let .writeRequest(h, v), let .writeCommand(h, v), let .handleValueNotification(h, v), let .handleValueIndication(h, v):
            f += ["\(i)Handle: \(Self.h16(h))", "\(i)Data: \(Self.value(v))"]
        case let .signedWriteCommand(h, v, s): f += ["\(i)Handle: \(Self.h16(h))", "\(i)Data: \(Self.value(v))", "\(i)Signature: \(Hex.string(s))"]
        case let .prepareWriteRequest(h, o, v), let .prepareWriteResponse(h, o, v):
            f += ["\(i)Handle: \(Self.h16(h))", "\(i)Offset: \(o)", "\(i)Data: \(Self.value(v))"]
        case .executeWriteRequest(let fl): f.append("\(i)Flags: \(fl == 1 ? "Immediately write all pending values" : "Cancel all prepared writes") (\(Self.h8(fl)))")
        case .writeResponse, .executeWriteResponse, .handleValueConfirmation: break
        case .unknown(_, let p): f += Self.hexLines(p, indent: i)
        }
        return f
    }

    static func uuidName(_ u: BluetoothUUID) -> String {
        if let v = u.uint16, let n = uuidNames[v] { return "\(n) (\(Hex.int(v, width: 4)))" }
        return u.description
    }

    static let uuidNames: [UInt16: String] = [
            0x1800: "Generic Access", 0x1801: "Generic Attribute", 0x2800: "Primary Service", 0x2801: "Secondary Service",
            0x2802: "Include", 0x2803: "Characteristic", 0x2900: "Characteristic Extended Properties",
            0x2901: "Characteristic User Description", 0x2902: "Client Characteristic Configuration",
            0x2A00: "Device Name", 0x2A01: "Appearance", 0x2A05: "Service Changed", 0x2B29: "Client Supported Features",
            0x2B2A: "Database Hash", 0x2B3A: "Server Supported Features",
        ]

    static func characteristicDeclaration(_ handle: UInt16, _ v: [UInt8]) -> [String]? {
        guard v.count == 5 || v.count == 19 else { return nil }
        var r = ByteReader(v)
        guard let p = try? r.u8(), let vh = try? r.u16(), let u = BluetoothUUID(wire: r.rest()) else { return nil }
        let props = ["broadcast", "read", "write-without-response", "write", "notify", "indicate", "signed-write", "extended"]
        let names = (0..<8).compactMap { p & (1 << UInt8($0)) != 0 ? props[$0] : nil }.joined(separator: ", ")
        return ["Properties: \(h8(p)) (\(names))", "Value handle: \(h16(vh))", "Value UUID: \(uuidName(u))"]
    }

    func signallingLines(_ b: [UInt8]) -> [String] {
        let i = "          "
        guard let cmd = try? SignallingCommand.decode(b) else { return ["        LE Signalling: malformed: " + Hex.string(b)] }
        var f = ["        LE Signalling: \(SignallingCommand.name(cmd.code)) (\(Self.h8(cmd.code))) ident \(cmd.identifier) len \(cmd.data.count)"]
        var r = ByteReader(cmd.data)
        switch cmd.code {
        case SignallingCommand.connectionParameterUpdateRequest:
            if let p = try? cmd.connectionParameters() {
                f += ["\(i)Min interval: \(p.intervalMin) (\(Self.ms(p.intervalMin, 1250)))", "\(i)Max interval: \(p.intervalMax) (\(Self.ms(p.intervalMax, 1250)))",
                      "\(i)Peripheral latency: \(p.latency)", "\(i)Timeout multiplier: \(p.supervisionTimeout) (\(formatMs(us: UInt64(p.supervisionTimeout) * 10_000, decimals: 0)) msec)"]
            } else { f.append("\(i)malformed: " + Hex.string(cmd.data)) }
        case SignallingCommand.connectionParameterUpdateResponse:
            if let res = try? r.u16() { f.append("\(i)Result: \(res == 0 ? "Connection Parameters accepted" : res == 1 ? "Connection Parameters rejected" : "reserved") (\(Self.h16(res)))") }
        case SignallingCommand.commandReject:
            if let reason = try? r.u16() {
                let n = ["Command not understood", "Signaling MTU exceeded", "Invalid CID in request"]
                f.append("\(i)Reason: \(reason < 3 ? n[Int(reason)] : "reserved") (\(Self.h16(reason)))")
            }
        default: f += Self.hexLines(cmd.data, indent: i)
        }
        return f
    }

    func smpLines(_ b: [UInt8]) -> [String] {
        let i = "          "
        guard let code = b.first else { return ["        SMP: empty PDU"] }
        var f = ["        SMP: \(SMP.name(code)) (\(Self.h8(code))) len \(b.count - 1)"]
        switch code {
        case SMP.pairingFailed where b.count >= 2: f.append("\(i)Reason: \(SMP.reasonName(b[1])) (\(Self.h8(b[1])))")
        case SMP.securityRequest where b.count >= 2: f.append("\(i)Authentication requirement: \(Self.h8(b[1]))")
        case 0x01, 0x02:
            if b.count == 7 {
                f += ["\(i)IO capability: \(Self.h8(b[1]))", "\(i)OOB data: \(Self.h8(b[2]))", "\(i)Authentication requirement: \(Self.h8(b[3]))",
                      "\(i)Max encryption key size: \(b[4])", "\(i)Initiator key distribution: \(Self.h8(b[5]))", "\(i)Responder key distribution: \(Self.h8(b[6]))"]
            } else { f.append("\(i)malformed: \(b.count - 1) bytes, expected 6") }
        default: f += Self.hexLines(Array(b.dropFirst()), indent: i)
        }
        return f
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
