import BLEWire

// The trace's account of HCI commands and events, next to their decoders
// (Commands.swift, Events.swift): one line per parameter, not indented (the
// tracer indents).

private func ms(_ units: UInt16, _ unitUs: UInt64) -> String { formatMs(us: UInt64(units) * unitUs, decimals: 3) + " msec" }
private func h16(_ v: UInt16) -> String { "0x" + Hex.int(v, width: 4) }
private func h8(_ v: UInt8) -> String { "0x" + Hex.int(v, width: 2) }
private func timeout(_ v: UInt16) -> String { formatMs(us: UInt64(v) * 10_000, decimals: 0) + " msec" }

extension HCICommand {
    /// One line per parameter of the commands attled sends (scanning,
    /// connecting, connection update, disconnect, random address, event
    /// masks); other commands' parameters as hex. Parameters that do not
    /// decode end the lines with the reason and their hex.
    public var traceFields: [String] {
        var f: [String] = []
        do { try parameterFields(into: &f) } catch {
            f.append("malformed parameters: \(error)")
            f += Hex.lines(parameters)
        }
        return f
    }

    private func parameterFields(into f: inout [String]) throws {
        switch opcode {
        case .leSetScanParameters:
            let p = try LEScanParameters.decode(parameters)
            f += ["Type: \(p.active ? "Active" : "Passive") (\(h8(p.active ? 1 : 0)))",
                  "Interval: \(ms(p.interval, 625)) (\(h16(p.interval)))",
                  "Window: \(ms(p.window, 625)) (\(h16(p.window)))",
                  "Own address type: \(p.ownAddressType)", "Filter policy: \(h8(p.filterPolicy))"]
        case .leSetExtendedScanParameters:
            let (p, phys) = try LEScanParameters.decodeExtended(parameters)
            f += ["Own address type: \(p.ownAddressType)", "Filter policy: \(h8(p.filterPolicy))",
                  "PHYs: \(h8(phys))", "Type: \(p.active ? "Active" : "Passive")",
                  "Interval: \(ms(p.interval, 625))", "Window: \(ms(p.window, 625))"]
        case .leSetScanEnable, .leSetExtendedScanEnable:
            var r = ByteReader(parameters)
            f.append("Scanning: \(try r.u8("Enable") == 1 ? "Enabled" : "Disabled")")
            f.append("Filter duplicates: \(try r.u8("Filter_Duplicates") != 0 ? "Enabled" : "Disabled")")
            if opcode == .leSetExtendedScanEnable {
                f.append("Duration: \(ms(try r.u16("Duration"), 10_000))")
                f.append("Period: \(formatMs(us: UInt64(try r.u16("Period")) * 1_280_000, decimals: 0)) msec")
            }
        case .leCreateConnection, .leExtendedCreateConnection:
            let c = opcode == .leCreateConnection ? try LECreateConnection.decode(parameters) : try LECreateConnection.decodeExtended(parameters)
            f += ["Scan interval: \(ms(c.scanInterval, 625))", "Scan window: \(ms(c.scanWindow, 625))",
                  "Filter policy: \(h8(c.filterPolicy))",
                  "Peer address: \(c.peer.address) (\(c.peer.type))", "Own address type: \(c.ownAddressType)"]
            f += c.connection.traceFields
        case .leConnectionUpdate:
            let u = try LEConnectionUpdate.decode(parameters)
            f.append("Handle: \(u.handle)")
            f += u.parameters.traceFields
        case .disconnect:
            var r = ByteReader(parameters)
            f.append("Handle: \(try r.u16("Connection_Handle"))")
            f.append("Reason: \(HCIStatus(rawValue: try r.u8("Reason")))")
        case .leSetRandomAddress:
            var r = ByteReader(parameters)
            let a = try BDAddress.read(&r)
            f.append("Address: \(a) (\(a.randomKind))")
        case .setEventMask, .leSetEventMask:
            var r = ByteReader(parameters)
            f.append("Mask: 0x\(Hex.int(try r.u64("Event_Mask"), width: 16))")
        case .leEnableEncryption:
            f += try encryptionFields(showKeys: false)
        case .leLongTermKeyRequestReply:
            // A peripheral's answer (7.8.25): the handle and the LTK, masked.
            var r = ByteReader(parameters)
            f.append("Handle: \(try r.u16("Connection_Handle"))")
            _ = try r.bytes(16, "Long_Term_Key")
            try r.expectEnd("LE Long Term Key Request Reply")
            f.append("LTK: <16-byte key hidden>")
        case .leLongTermKeyRequestNegativeReply:
            var r = ByteReader(parameters)
            f.append("Handle: \(try r.u16("Connection_Handle"))")
        case .leAddDeviceToFilterAcceptList, .leRemoveDeviceFromFilterAcceptList:
            var r = ByteReader(parameters)
            let t = try r.u8("Address_Type")
            let a = try BDAddress.read(&r)
            try r.expectEnd("Filter Accept List entry")
            f.append("Address: \(a) (\(t == 0 ? "public" : t == 1 ? "random" : t == 0xFF ? "anonymous" : h8(t)))")
        case .leSetDataLength:
            var r = ByteReader(parameters)
            f += ["Handle: \(try r.u16("Connection_Handle"))", "TX octets: \(try r.u16("TX_Octets"))",
                  "TX time: \(try r.u16("TX_Time")) usec"]
            try r.expectEnd("LE Set Data Length")
        case .leSetPHY:
            var r = ByteReader(parameters)
            f += ["Handle: \(try r.u16("Connection_Handle"))", "All PHYs: \(h8(try r.u8("All_PHYs")))",
                  "TX PHYs: \(h8(try r.u8("TX_PHYs")))", "RX PHYs: \(h8(try r.u8("RX_PHYs")))",
                  "PHY options: \(h16(try r.u16("PHY_Options")))"]
            try r.expectEnd("LE Set PHY")
        default:
            f += Hex.lines(parameters)
        }
    }
}

extension HCICommand {
    /// LE Enable Encryption's fields (7.8.24): the handle, then Rand, EDIV
    /// and the LTK, which are masked unless `showKeys` (`--trace=keys`).
    /// - Throws: `WireError` when the parameters are not 28 bytes.
    public func encryptionFields(showKeys: Bool) throws -> [String] {
        var r = ByteReader(parameters)
        let handle = try r.u16("Connection_Handle")
        let rand = try r.u64("Random_Number")
        let ediv = try r.u16("Encrypted_Diversifier")
        let ltk = try r.bytes(16, "Long_Term_Key")
        try r.expectEnd("LE Enable Encryption")
        guard showKeys else { return ["Handle: \(handle)", "Rand: <hidden>", "EDIV: <hidden>", "LTK: <16-byte key hidden>"] }
        return ["Handle: \(handle)", "Rand: 0x\(Hex.int(rand, width: 16))", "EDIV: 0x\(Hex.int(ediv, width: 4))",
                "LTK: \(Hex.string(ltk.reversed(), separator: ""))"]
    }
}

extension ConnectionParameters {
    /// Intervals, latency, supervision timeout and CE lengths in milliseconds, one per line.
    public var traceFields: [String] {
        ["Min connection interval: \(ms(intervalMin, 1250))", "Max connection interval: \(ms(intervalMax, 1250))",
         "Connection latency: \(latency)", "Supervision timeout: \(timeout(supervisionTimeout))",
         "Min CE length: \(ms(minCELength, 625))", "Max CE length: \(ms(maxCELength, 625))"]
    }
}

extension CommandComplete {
    /// The return parameters after Status, for the commands whose answers
    /// attled reads (address, buffer sizes, version); others as hex. Nothing
    /// when the command failed.
    public var traceFields: [String] {
        guard status == .success else { return [] }
        let rp = returnParameters
        switch opcode {
        case .readBDADDR where rp.count >= 7:
            return ["Address: \(BDAddress(wire: Array(rp[1..<7])))"]
        case .leReadBufferSize:
            guard let b = try? BufferSize.decodeLE(rp) else { return ["malformed: " + Hex.string(rp)] }
            return ["Data packet length: \(b.aclLength)", "Num data packets: \(b.aclPackets)"]
        case .readBufferSize:
            guard let b = try? BufferSize.decodeBREDR(rp) else { return ["malformed: " + Hex.string(rp)] }
            return ["ACL MTU: \(b.aclLength) ACL max packet: \(b.aclPackets)"]
        case .readLocalVersion:
            guard let v = try? LocalVersion.decode(rp) else { return ["malformed: " + Hex.string(rp)] }
            return ["HCI version: \(LocalVersion.coreVersionName(v.hciVersion)) (\(h8(v.hciVersion))) - revision \(h16(v.hciRevision))",
                    "LMP version: \(LocalVersion.coreVersionName(v.lmpVersion)) (\(h8(v.lmpVersion))) - subversion \(h16(v.lmpSubversion))",
                    "Manufacturer: \(h16(v.manufacturer))"]
        default:
            return rp.count > 1 ? Hex.lines(Array(rp.dropFirst())) : []
        }
    }
}

extension HCIEvent {
    /// The lines under the event's header. Command Complete, Command Status
    /// and LE meta events start with a line naming the command or subevent;
    /// parameter lines are indented two spaces under it. Advertising reports
    /// are described by `advertisingReport` (BLEGAP knows their data).
    public func traceFields(advertisingReport: (AdvertisingReport) -> [String]) -> [String] {
        let i = "  "
        switch self {
        case .commandComplete(let cc):
            return ["\(cc.opcode.name) (\(h16(cc.opcode.rawValue))) ncmd \(cc.numCommandPackets)"]
                + (cc.status.map { ["\(i)Status: \($0)"] } ?? []) + cc.traceFields.map { i + $0 }
        case .commandStatus(let cs):
            return ["\(cs.opcode.name) (\(h16(cs.opcode.rawValue))) ncmd \(cs.numCommandPackets)", "\(i)Status: \(cs.status)"]
        case .disconnectionComplete(let d):
            return ["\(i)Status: \(d.status)", "\(i)Handle: \(d.handle)", "\(i)Reason: \(d.reason)"]
        case .numberOfCompletedPackets(let l):
            return ["\(i)Num handles: \(l.count)"] + l.flatMap { ["\(i)Handle: \($0.handle)", "\(i)Count: \($0.count)"] }
        case .hardwareError(let c):
            return ["\(i)Code: \(h8(c))"]
        case .dataBufferOverflow(let t):
            return ["\(i)Link type: \(h8(t))"]
        case .leConnectionComplete(let c):
            let sub = c.enhanced ? LESubevent.enhancedConnectionComplete : .connectionComplete
            return ["\(sub.name) (\(h8(sub.rawValue)))",
                    "\(i)Status: \(c.status)", "\(i)Handle: \(c.handle)", "\(i)Role: \(c.role == 0 ? "Central" : "Peripheral") (\(h8(c.role)))",
                    "\(i)Peer address: \(c.peer.address) (\(c.peer.type))",
                    "\(i)Connection interval: \(ms(c.interval, 1250))", "\(i)Connection latency: \(c.latency)",
                    "\(i)Supervision timeout: \(timeout(c.supervisionTimeout))",
                    "\(i)Central clock accuracy: \(h8(c.centralClockAccuracy))"]
        case let .leAdvertisingReport(reports, extended):
            let sub = extended ? LESubevent.extendedAdvertisingReport : .advertisingReport
            return ["\(sub.name) (\(h8(sub.rawValue)))", "\(i)Num reports: \(reports.count)"]
                + reports.flatMap { advertisingReport($0).map { i + $0 } }
        case .leConnectionUpdateComplete(let u):
            return ["LE Connection Update Complete (0x03)",
                    "\(i)Status: \(u.status)", "\(i)Handle: \(u.handle)", "\(i)Connection interval: \(ms(u.interval, 1250))",
                    "\(i)Connection latency: \(u.latency)", "\(i)Supervision timeout: \(timeout(u.supervisionTimeout))"]
        case .leDataLengthChange(let d):
            return ["LE Data Length Change (0x07)",
                    "\(i)Handle: \(d.handle)", "\(i)Max TX octets: \(d.maxTxOctets)", "\(i)Max TX time: \(d.maxTxTime) usec",
                    "\(i)Max RX octets: \(d.maxRxOctets)", "\(i)Max RX time: \(d.maxRxTime) usec"]
        case let .leMeta(sub, rest) where sub == .phyUpdateComplete && rest.count == 5:
            guard let u = try? LEPHYUpdateComplete.decode(rest) else { return ["\(sub.name) (\(h8(sub.rawValue)))"] + Hex.lines(rest).map { i + $0 } }
            return ["\(sub.name) (\(h8(sub.rawValue)))", "\(i)Status: \(u.status)", "\(i)Handle: \(u.handle)",
                    "\(i)TX PHY: LE \(LEPHYUpdateComplete.name(u.txPHY))", "\(i)RX PHY: LE \(LEPHYUpdateComplete.name(u.rxPHY))"]
        case let .leMeta(sub, rest) where sub.rawValue == 0x05 && rest.count == 12:
            // LE Long Term Key Request (7.7.65.5), on a peripheral: Rand and EDIV name the key; masked.
            return ["\(sub.name) (\(h8(sub.rawValue)))", "\(i)Handle: \(UInt16(rest[0]) | UInt16(rest[1] & 0x0F) << 8)",
                    "\(i)Rand: <hidden>", "\(i)EDIV: <hidden>"]
        case let .leMeta(sub, rest):
            return ["\(sub.name) (\(h8(sub.rawValue)))"] + Hex.lines(rest).map { i + $0 }
        case let .other(_, rest):
            return Hex.lines(rest).map { i + $0 }
        }
    }
}
