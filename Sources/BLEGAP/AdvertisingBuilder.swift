import BLEWire

/// The advertising data and scan response a peripheral sends.
public struct AdvertisingPayload: Hashable, Sendable {
    /// AD structures for LE Set (Extended) Advertising Data.
    public var advertising: [UInt8]
    /// AD structures for LE Set (Extended) Scan Response Data; empty when none.
    public var scanResponse: [UInt8]
    public init(advertising: [UInt8], scanResponse: [UInt8] = []) {
        self.advertising = advertising; self.scanResponse = scanResponse
    }
}

/// Builds a peripheral's advertising data from a local name and service
/// UUIDs (Core Supplement Part A 1.1-1.3; Core Vol 3 Part C 11).
///
/// The structures are, in this order: Flags (LE General Discoverable, BR/EDR
/// not supported: `02 01 06`), Complete Local Name (`09`), the 16-bit
/// Service UUIDs (`03`, or `02` when incomplete), the 128-bit ones (`07` /
/// `06`; a UUID without a 16-bit alias counts as 128-bit). The rule, with a
/// limit of `limit` octets for the advertising data (31 legacy, 251 extended)
/// and `scanLimit` for the scan response (31 legacy, 0 when there is none):
///
/// 1. Everything fits in the advertising data: all there, no scan response.
/// 2. It fits without Flags: Flags are left out (a name plus one 128-bit
///    UUID, "CassarTech" and the pycom service, is 12 + 18 = 30 octets: a
///    scanner that never gets scan responses, as Bumble's controller, still
///    finds the board by name and by service).
/// 3. Otherwise the advertising data is Flags, then the UUIDs, 16-bit before
///    128-bit, each in the order given, while they fit; then the Complete
///    Local Name if it still fits, else a Shortened Local Name filling the
///    space left (at least one character, cut at a character boundary). The
///    scan response is the Complete Local Name (Shortened, cut to fit, when it
///    is longer than the scan response), unless the advertising data has it
///    already, then the UUIDs left over while they fit. A UUID list that does
///    not hold every UUID of its size is marked Incomplete, in either packet;
///    UUIDs that fit in neither are dropped.
public enum AdvertisingBuilder {
    /// Flags: LE General Discoverable Mode, BR/EDR Not Supported.
    public static let generalDiscoverable: UInt8 = 0x06

    /// Legacy advertising: 31 octets of advertising data and 31 of scan response.
    public static func legacy(name: String, services: [BluetoothUUID], flags: UInt8 = generalDiscoverable) -> AdvertisingPayload {
        build(name: name, services: services, flags: flags, limit: 31, scanLimit: 31)
    }

    /// Extended advertising (connectable, so no scan response): up to 251
    /// octets, one LE Set Extended Advertising Data.
    public static func extended(name: String, services: [BluetoothUUID], flags: UInt8 = generalDiscoverable) -> AdvertisingPayload {
        build(name: name, services: services, flags: flags, limit: 251, scanLimit: 0)
    }

    /// The rule above for any limits.
    public static func build(name: String, services: [BluetoothUUID], flags: UInt8, limit: Int, scanLimit: Int) -> AdvertisingPayload {
        let short = services.filter { $0.uint16 != nil }
        let long = services.filter { $0.uint16 == nil }
        let flagsAD: [UInt8] = [0x02, ADType.flags.rawValue, flags]
        let nameAD = name.isEmpty ? [] : structure(.completeName, Array(name.utf8))
        let lists = uuidLists(short, long, in16: short.count, in128: long.count)
        let all = flagsAD + nameAD + lists
        if all.count <= limit { return AdvertisingPayload(advertising: all) }
        if nameAD.count + lists.count <= limit { return AdvertisingPayload(advertising: nameAD + lists) }

        // 3: Flags, the UUIDs that fit, then the name or its start.
        var room = limit - flagsAD.count
        let (ad16, ad128) = fitting(short, long, room: room)
        var ad = flagsAD + uuidLists(Array(short.prefix(ad16)), Array(long.prefix(ad128)),
                                     in16: short.count, in128: long.count)
        room = limit - ad.count
        var nameInAD = false
        if !nameAD.isEmpty {
            if nameAD.count <= room { ad += nameAD; nameInAD = true }
            else if room >= 3, case let start = cut(name, to: room - 2), !start.isEmpty { ad += structure(.shortenedName, start) }
        }
        var sr: [UInt8] = []
        if scanLimit > 0 {
            if !nameAD.isEmpty && !nameInAD {
                sr = nameAD.count <= scanLimit ? nameAD : structure(.shortenedName, cut(name, to: scanLimit - 2))
            }
            let rest16 = Array(short.dropFirst(ad16)), rest128 = Array(long.dropFirst(ad128))
            let (sr16, sr128) = fitting(rest16, rest128, room: scanLimit - sr.count)
            sr += uuidLists(Array(rest16.prefix(sr16)), Array(rest128.prefix(sr128)), in16: short.count, in128: long.count)
        }
        return AdvertisingPayload(advertising: ad, scanResponse: sr)
    }

    /// One AD structure: length, type, data.
    static func structure(_ type: ADType, _ data: [UInt8]) -> [UInt8] {
        [UInt8(truncatingIfNeeded: data.count + 1), type.rawValue] + data
    }

    /// The 16-bit then the 128-bit list (each only when not empty), marked
    /// Incomplete when it holds fewer than `in16` / `in128` UUIDs.
    static func uuidLists(_ s: [BluetoothUUID], _ l: [BluetoothUUID], in16: Int, in128: Int) -> [UInt8] {
        var out: [UInt8] = []
        if !s.isEmpty { out += structure(s.count < in16 ? .incomplete16 : .complete16, s.flatMap(\.attWire)) }
        if !l.isEmpty { out += structure(l.count < in128 ? .incomplete128 : .complete128, l.flatMap(\.bytes128)) }
        return out
    }

    /// How many of the 16-bit UUIDs, then of the 128-bit ones, fit in `room` octets.
    static func fitting(_ s: [BluetoothUUID], _ l: [BluetoothUUID], room: Int) -> (Int, Int) {
        var left = room
        var n16 = 0
        if !s.isEmpty, left >= 4 { n16 = min(s.count, (left - 2) / 2); left -= 2 + 2 * n16 }
        var n128 = 0
        if !l.isEmpty, left >= 18 { n128 = min(l.count, (left - 2) / 16) }
        return (n16, n128)
    }

    /// The longest start of `name` of at most `octets` UTF-8 octets that ends on a character boundary.
    static func cut(_ name: String, to octets: Int) -> [UInt8] {
        var out: [UInt8] = []
        for ch in name {
            let b = Array(String(ch).utf8)
            if out.count + b.count > octets { break }
            out += b
        }
        return out
    }
}
