import Testing
@testable import BLEWire
@testable import BLETransport
@testable import BLEHCI
@testable import BLEL2CAP
@testable import BLEATT
@testable import BLEGATT
@testable import LEDProfile

/// A peer's ATT server behind a `ScriptedController` (its `respond` hook), on
/// connection handle 0x0001: answers Exchange MTU, Find By Type Value, Read
/// By Type, Find Information, Read, Write Request and Write Command from an
/// attribute table, records the writes, and can hold its answers back so a
/// test decides when a request completes.
final class ScriptedGATTServer {
    struct Attribute {
        var handle: UInt16
        var type: BluetoothUUID
        var value: [UInt8]
    }

    private(set) var attributes: [Attribute]
    var mtu = 23
    let serverMTU = 247
    /// Requests (by opcode) whose answers are kept in `held` until `release()`.
    var hold: (UInt8) -> Bool = { _ in false }
    private(set) var held: [HCIPacket] = []
    /// An ATT error code a Read of a handle is refused with (nil: answered).
    var refuseRead: (UInt16) -> UInt8? = { _ in nil }
    /// Writes received, in order: "hhhh=vv" (hex handle and value); Write
    /// Commands are marked "cmd hhhh=vv".
    private(set) var writes: [String] = []
    /// Every ATT PDU received, as hex.
    private(set) var requests: [String] = []
    private var partial: [UInt8] = []
    private var partialNeeded = 0

    init(_ attributes: [Attribute]) { self.attributes = attributes.sorted { $0.handle < $1.handle } }

    func value(_ handle: UInt16) -> [UInt8]? { attributes.first { $0.handle == handle }?.value }

    /// The held answers go out (on the controller's next receives).
    func release(into ctl: ScriptedController) {
        ctl.inbox += held
        held.removeAll()
    }

    /// A Handle Value Notification from the peer.
    static func notification(_ handle: UInt16, _ value: [UInt8]) -> HCIPacket {
        ACL.in([0x1B, UInt8(handle & 0xFF), UInt8(handle >> 8)] + value)
    }

    // MARK: databases

    static let serviceType = BluetoothUUID(uint16: 0x2800)
    static let characteristicType = BluetoothUUID(uint16: 0x2803)
    static let cccdType = BluetoothUUID(uint16: 0x2902)

    static func service(_ h: UInt16, _ uuid: BluetoothUUID) -> Attribute {
        Attribute(handle: h, type: serviceType, value: uuid.attWire)
    }

    /// A characteristic's declaration at `h` and its value at `h + 1`.
    static func characteristic(_ h: UInt16, _ uuid: BluetoothUUID, _ props: UInt8, _ value: [UInt8]) -> [Attribute] {
        [Attribute(handle: h, type: characteristicType, value: [props, UInt8((h + 1) & 0xFF), UInt8((h + 1) >> 8)] + uuid.attWire),
         Attribute(handle: h + 1, type: uuid, value: value)]
    }

    /// Characteristic properties (Core Vol 3 Part G 3.3.1.1).
    static let read: UInt8 = 0x02, writeCommand: UInt8 = 0x04, write: UInt8 = 0x08, notify: UInt8 = 0x10

    /// A pycom lamp showing (r, g, b): service 0x0001-0x0007, red 0x0003, green 0x0005, blue 0x0007 (read, write).
    static func pycom(_ r: UInt8, _ g: UInt8, _ b: UInt8) -> ScriptedGATTServer {
        guard case let .rgb(red, green, blue) = LEDProfile.pycom.shape else { fatalError("pycom is RGB") }
        return ScriptedGATTServer([service(0x0001, LEDProfile.pycom.service)]
            + characteristic(0x0002, red, read | write, [r])
            + characteristic(0x0004, green, read | write, [g])
            + characteristic(0x0006, blue, read | write, [b]))
    }

    /// The harness: service 0x0001-0x0006, command 0x0003 (write), notifier
    /// 0x0005 (read, notify) with its CCCD at 0x0006.
    static func harness() -> ScriptedGATTServer {
        let base = "-E8F2-537E-4F6C-D104768A1214"
        return ScriptedGATTServer([service(0x0001, LEDProfile.harness.service)]
            + characteristic(0x0002, BluetoothUUID("19B10011" + base)!, write, [0x00])
            + characteristic(0x0004, BluetoothUUID("19B10012" + base)!, read | notify, [0x00])
            + [Attribute(handle: 0x0006, type: cccdType, value: [0x00, 0x00])])
    }

    /// A device with only a battery service: no LED service.
    static func noLED() -> ScriptedGATTServer {
        ScriptedGATTServer([service(0x0001, BluetoothUUID(uint16: 0x180F))]
            + characteristic(0x0002, BluetoothUUID(uint16: 0x2A19), read, [0x64]))
    }

    // MARK: answering

    /// The controller's hook: an ACL packet on handle 1 is reassembled and
    /// answered; anything else is not ours (nil).
    func answer(_ p: HCIPacket) -> [HCIPacket]? {
        guard p.type == .acl, let a = try? ACLPacket.decode(p.bytes), a.handle == ACL.handle else { return nil }
        if a.isStart {
            guard a.data.count >= 4 else { return nil }
            partialNeeded = Int(a.data[0]) | Int(a.data[1]) << 8
            partial = a.data
        } else {
            partial += a.data
        }
        guard partial.count >= partialNeeded + 4 else { return [] }
        let cid = UInt16(partial[2]) | UInt16(partial[3]) << 8
        let pdu = Array(partial[4...])
        partial = []
        guard cid == CID.att, let op = pdu.first else { return nil }
        requests.append(Hex.string(pdu))
        let out = respond(op, pdu).map { ACL.in($0) }
        if hold(op) { held += out; return [] }
        return out
    }

    private func u16(_ b: [UInt8], _ at: Int) -> UInt16 { UInt16(b[at]) | UInt16(b[at + 1]) << 8 }
    private func le(_ v: UInt16) -> [UInt8] { [UInt8(v & 0xFF), UInt8(v >> 8)] }
    private func error(_ op: UInt8, _ handle: UInt16, _ code: UInt8) -> [[UInt8]] { [[0x01, op] + le(handle) + [code]] }

    /// The answers to one request (none to a command).
    private func respond(_ op: UInt8, _ pdu: [UInt8]) -> [[UInt8]] {
        switch op {
        case 0x02: // Exchange MTU
            mtu = min(Int(u16(pdu, 1)), serverMTU)
            return [[0x03] + le(UInt16(serverMTU))]
        case 0x06: // Find By Type Value
            let (start, end, type) = (u16(pdu, 1), u16(pdu, 3), Array(pdu[5..<7]))
            let want = Array(pdu[7...])
            var found: [UInt8] = []
            for a in attributes where a.handle >= start && a.handle <= end && a.type.attWire == type && a.value == want {
                found += le(a.handle) + le(groupEnd(a.handle))
            }
            return found.isEmpty ? error(op, start, 0x0A) : [[0x07] + found]
        case 0x08: // Read By Type
            let (start, end, type) = (u16(pdu, 1), u16(pdu, 3), Array(pdu[5...]))
            var entries: [[UInt8]] = []
            for a in attributes where a.handle >= start && a.handle <= end && a.type.attWire == type {
                let e = le(a.handle) + a.value.prefix(min(253, mtu - 4))
                guard entries.first.map({ $0.count == e.count }) ?? true, 2 + (entries.count + 1) * e.count <= mtu else { break }
                entries.append(e)
            }
            guard let n = entries.first?.count else { return error(op, start, 0x0A) }
            return [[0x09, UInt8(n)] + entries.flatMap { $0 }]
        case 0x04: // Find Information
            let (start, end) = (u16(pdu, 1), u16(pdu, 3))
            var format: UInt8 = 0
            var body: [UInt8] = []
            for a in attributes where a.handle >= start && a.handle <= end {
                let f: UInt8 = a.type.attWire.count == 2 ? 1 : 2
                if format == 0 { format = f }
                let e = le(a.handle) + a.type.attWire
                guard f == format, 2 + body.count + e.count <= mtu else { break }
                body += e
            }
            return body.isEmpty ? error(op, start, 0x0A) : [[0x05, format] + body]
        case 0x0A: // Read
            let h = u16(pdu, 1)
            if let code = refuseRead(h) { return error(op, h, code) }
            guard let v = value(h) else { return error(op, h, 0x01) }
            return [[0x0B] + v.prefix(mtu - 1)]
        case 0x12, 0x52: // Write Request, Write Command
            let h = u16(pdu, 1)
            let v = Array(pdu[3...])
            guard let i = attributes.firstIndex(where: { $0.handle == h }) else { return op == 0x12 ? error(op, h, 0x01) : [] }
            attributes[i].value = v
            writes.append((op == 0x52 ? "cmd " : "") + Hex.int(h, width: 4) + "=" + Hex.string(v))
            return op == 0x12 ? [[0x13]] : []
        default:
            return op & 0x40 != 0 ? [] : error(op, 0x0000, 0x06)
        }
    }

    /// The last handle of the service declared at `h`.
    private func groupEnd(_ h: UInt16) -> UInt16 {
        let next = attributes.first { $0.handle > h && ($0.type == Self.serviceType || $0.type == BluetoothUUID(uint16: 0x2801)) }
        return next.map { $0.handle - 1 } ?? attributes.last?.handle ?? h
    }
}
