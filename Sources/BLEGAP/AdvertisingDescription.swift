import BLEWire
import BLEHCI

// The trace's account of advertising reports and advertising data, next to
// their decoders (AdvertisingData.swift, BLEHCI's Events.swift): one line per
// field, not indented (the tracer indents).

private func h8(_ v: UInt8) -> String { "0x" + Hex.int(v, width: 2) }
private func h16(_ v: UInt16) -> String { "0x" + Hex.int(v, width: 4) }
private func ms(_ units: UInt16, _ unitUs: UInt64) -> String { formatMs(us: UInt64(units) * unitUs, decimals: 3) + " msec" }

extension AdvertisingReport {
    /// Event type, address, extended fields (PHYs, SID, TX power), the
    /// advertising data structure by structure, and RSSI.
    public var traceFields: [String] {
        var f: [String] = []
        if let lt = legacyType {
            f.append("Event type: \(AdvertisingReport.legacyTypeName(lt)) (\(h8(lt)))")
        } else {
            var bits: [String] = []
            if isConnectable { bits.append("connectable") }
            if isScannable { bits.append("scannable") }
            if isDirected { bits.append("directed") }
            if isScanResponse { bits.append("scan response") }
            if isLegacyPDU { bits.append("legacy") }
            let status = ["complete", "incomplete, more to come", "incomplete, truncated", "reserved"]
            bits.append(Int(dataStatus) < status.count ? status[Int(dataStatus)] : "reserved")
            f.append("Event type: \(h16(eventType)) (\(bits.joined(separator: ", ")))")
        }
        f.append("Address: \(address.address) (\(address.type))")
        if legacyType == nil {
            f.append("Primary PHY: \(primaryPHY), secondary PHY: \(secondaryPHY), SID: \(h8(sid))")
            f.append("TX power: \(txPower == 127 ? "not available" : "\(txPower) dBm")")
        }
        f.append("Data length: \(data.count)")
        f += AdvertisingData(data).traceFields
        f.append("RSSI: \(rssi == 127 ? "not available" : "\(rssi) dBm") (\(h8(UInt8(bitPattern: rssi))))")
        return f
    }
}

extension AdvertisingData {
    /// Each AD structure on its own line(s) (Core Supplement Part A), then the
    /// problems not already shown with a structure.
    public var traceFields: [String] {
        var f: [String] = []
        for s in structures {
            switch s.field {
            case .flags(let v):
                f.append("Flags: \(h8(v))")
                for n in AdvertisingData.flagNames(v) { f.append("  \(n)") }
            case let .serviceUUIDs(l, complete):
                let w = s.type.rawValue <= 3 ? 16 : s.type.rawValue <= 5 ? 32 : 128
                f.append("\(w)-bit Service UUIDs (\(complete ? "complete" : "partial")): \(l.count) entr\(l.count == 1 ? "y" : "ies")")
                for u in l { f.append("  \(u)") }
            case .solicitationUUIDs(let l):
                f.append("\(s.type.name): " + l.map(\.description).joined(separator: ", "))
            case let .localName(n, complete):
                f.append("Name (\(complete ? "complete" : "short")): \(n)")
            case .txPower(let t): f.append("TX power: \(t) dBm")
            case .appearance(let a): f.append("Appearance: \(h16(a))")
            case let .manufacturerData(c, d):
                f.append("Company: \(h16(c))")
                f.append("  Data: \(Hex.string(d, separator: ""))")
            case let .serviceData(u, d):
                f.append("Service Data (UUID \(u)): \(Hex.string(d, separator: ""))")
            case .uri(let u): f.append("URI: \(u)")
            case .advertisingInterval(let v): f.append("Advertising interval: \(formatMs(us: UInt64(v) * 625, decimals: 3)) msec")
            case let .connectionIntervalRange(a, b):
                f.append("Peripheral connection interval: \(ms(a, 1250)) - \(ms(b, 1250))")
            case let .targetAddresses(l, random):
                f.append("\(random ? "Random" : "Public") target address: " + l.map(\.description).joined(separator: ", "))
            case .leRole(let r): f.append("LE role: \(h8(r))")
            case .classOfDevice(let c): f.append("Class of device: 0x\(Hex.int(c, width: 6))")
            case let .leAddress(a, random): f.append("LE address: \(a) (\(random ? "random" : "public"))")
            case .raw(let d):
                f.append("\(s.type.name) (\(h8(s.type.rawValue))): \(Hex.string(d, separator: ""))" + (s.problem.map { " [malformed: \($0)]" } ?? ""))
            }
        }
        let shown = structures.compactMap(\.problem)
        for p in problems where !shown.contains(where: { p.includes($0) }) {
            f.append("malformed advertising data: \(p)")
        }
        return f
    }
}
