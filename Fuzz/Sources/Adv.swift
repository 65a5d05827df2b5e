// adv: the input is a list of advertising reports, each `tag, address,
// length, AD bytes`. Every AD payload (and the whole input, taken as one) is
// parsed by AdvertisingData; then the reports go, as LE (Extended)
// Advertising Report events, to a scanning Central, whose merged view of
// each device must match a simple model (last advertisement, last scan
// response, extended fragments joined).
//   tag bit 7 clear: legacy report, bits 0-2 the legacy event type
//   tag bit 7 set:   extended report, bits 0-6 the event type bits
//                    (connectable, scannable, directed, scan response,
//                    legacy, data status)
//   address: bits 0-1 pick one of four peers (two addresses, two types)
import BLEWire
import BLETransport
import BLEHCI
import BLEGAP
import BLETrace

/// Parses AD bytes and checks the parse accounts for the input.
func checkAdvertisingData(_ bytes: [UInt8]) -> AdvertisingData {
    let ad = AdvertisingData(bytes)
    let encoded = AdvertisingData.encode(ad.structures.map { ($0.type, $0.data) })
    require(encoded.count <= bytes.count && Array(bytes[0..<encoded.count]) == encoded,
            "AD structures do not re-encode to the input prefix")
    if ad.problems.isEmpty {
        require(bytes[encoded.count...].allSatisfy { $0 == 0 }, "unparsed AD bytes without a problem reported")
    }
    _ = (ad.localName, ad.isNameComplete, ad.serviceUUIDs, ad.flags, ad.txPower, ad.appearance)
    _ = (ad.manufacturerData.count, ad.serviceData.count, AdvertisingData.flagNames(ad.flags ?? 0xFF))
    _ = PacketDecoder.adLines(ad, indent: "")
    return ad
}

let advPeers: [DeviceAddress] = [
    DeviceAddress(BDAddress(wire: [0x55, 0x44, 0x33, 0x22, 0x11, 0xC0]), .random),
    DeviceAddress(BDAddress(wire: [0x55, 0x44, 0x33, 0x22, 0x11, 0xC0]), .public),
    DeviceAddress(BDAddress(wire: [0x01, 0x02, 0x03, 0x04, 0x05, 0x06]), .random),
    DeviceAddress(BDAddress(wire: [0x01, 0x02, 0x03, 0x04, 0x05, 0x06]), .public),
]

func fuzzAdvertising(_ data: [UInt8]) {
    _ = checkAdvertisingData(data)

    let transport = FakeController()
    let host = HCIHost(transport: transport)
    let central: Central
    do {
        central = Central(host: host, info: try host.initialise())
        try central.startScan()
    } catch {
        require(false, "scan did not start: \(error)")
        return
    }

    // The model: what each peer's advertisement and scan response should be.
    var fragments: [DeviceAddress: [UInt8]] = [:]
    var lastAdv: [DeviceAddress: [UInt8]] = [:]
    var lastScan: [DeviceAddress: [UInt8]] = [:]
    var reports = 0

    var input = FuzzInput(data)
    while !input.isAtEnd {
        let tag = input.u8()
        let peer = advPeers[Int(input.u8() & 3)]
        let extended = tag & 0x80 != 0
        var d = input.chunk()
        _ = checkAdvertisingData(d)
        var w = ByteWriter()
        if extended {
            d = Array(d.prefix(229)) // what fits in one event
            let type = UInt16(tag & 0x7F)
            w.u8(0x0D); w.u8(1); w.u16(type); w.u8(peer.type.rawValue); peer.address.write(&w)
            w.u8(1); w.u8(0); w.u8(0xFF); w.i8(127); w.i8(-60); w.u16(0); w.u8(0); BDAddress.zero.write(&w)
            w.u8(UInt8(d.count)); w.append(d)
            // Model of Central's reassembly: status 1 means more to come.
            if (type >> 5) & 3 == 1 { fragments[peer, default: []] += d }
            else {
                let whole = (fragments.removeValue(forKey: peer) ?? []) + d
                if type & 0x08 != 0 { lastScan[peer] = whole } else { lastAdv[peer] = whole }
                reports += 1
            }
        } else {
            d = Array(d.prefix(31))
            let t = tag & 0x07
            w.u8(0x02); w.u8(1); w.u8(t); w.u8(peer.type.rawValue); peer.address.write(&w)
            w.u8(UInt8(d.count)); w.append(d); w.i8(-60)
            if t == 0x04 { lastScan[peer] = d } else { lastAdv[peer] = d }
            reports += 1
        }
        host.handle(event(0x3E, w.bytes))
    }

    require(central.order.count == central.devices.count, "device order and table disagree")
    require(central.devices.values.reduce(0) { $0 + $1.reports } == reports, "report count")
    for (peer, dev) in central.devices {
        require(dev.advertisement == AdvertisingData(lastAdv[peer] ?? []), "advertisement of \(peer) differs from the last one sent")
        require(dev.scanResponse == lastScan[peer].map { AdvertisingData($0) }, "scan response of \(peer) differs from the last one sent")
        require(dev.merged.structures == dev.advertisement.structures + (dev.scanResponse?.structures ?? []), "merge")
        _ = (dev.name, dev.serviceUUIDs)
    }
    try? central.stopScan()
}
