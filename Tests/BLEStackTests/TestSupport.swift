import Testing
@testable import BLEWire
@testable import BLETransport
@testable import BLEHCI
@testable import BLEL2CAP
@testable import BLEATT
@testable import BLEGATT

// MARK: - Hex literals that look like the wire

/// `hex("01 03 0c 00")` -> [0x01, 0x03, 0x0C, 0x00]. A literal that does not
/// parse is a bug in the test: it is recorded as an issue and yields [].
func hex(_ text: String, sourceLocation: SourceLocation = #_sourceLocation) -> [UInt8] {
    guard let b = Hex.parse(text) else {
        Issue.record("bad hex literal in test: \"\(text)\"", sourceLocation: sourceLocation)
        return []
    }
    return b
}

/// An HCI packet from its H4 form (indicator byte first): `h4("04 0e 04 01 03 0c 00")`.
func h4(_ text: String, sourceLocation: SourceLocation = #_sourceLocation) -> HCIPacket {
    let b = hex(text, sourceLocation: sourceLocation)
    guard let t = b.first else {
        Issue.record("empty H4 literal", sourceLocation: sourceLocation)
        return HCIPacket(.event, [])
    }
    return HCIPacket(HCIPacketType(rawValue: t), Array(b.dropFirst()))
}

/// Every proper prefix of `bytes` (lengths 0 ..< count).
func prefixes(_ bytes: [UInt8]) -> [[UInt8]] {
    (0..<bytes.count).map { Array(bytes[0..<$0]) }
}

/// Runs `body` and returns the WireError it threw, recording an issue if it
/// returned normally or threw something else.
@discardableResult
func expectWireError<T>(_ what: String = "", sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> T) -> WireError? {
    do {
        let v = try body()
        Issue.record("expected WireError \(what) but decoded \(v)", sourceLocation: sourceLocation)
        return nil
    } catch let e as WireError {
        return e
    } catch {
        Issue.record("expected WireError \(what), got \(error)", sourceLocation: sourceLocation)
        return nil
    }
}

// MARK: - Event builders (for scripting a controller)

enum Ev {
    /// Command Complete with Num_HCI_Command_Packets `ncmd` and return parameters.
    static func complete(_ op: HCIOpcode, _ returnParameters: [UInt8] = [0x00], ncmd: UInt8 = 1) -> HCIPacket {
        var w = ByteWriter()
        w.u8(0x0E); w.u8(UInt8(3 + returnParameters.count)); w.u8(ncmd); w.u16(op.rawValue); w.append(returnParameters)
        return HCIPacket(.event, w.bytes)
    }
    /// Command Status.
    static func status(_ op: HCIOpcode, _ status: UInt8 = 0, ncmd: UInt8 = 1) -> HCIPacket {
        var w = ByteWriter()
        w.u8(0x0F); w.u8(4); w.u8(status); w.u8(ncmd); w.u16(op.rawValue)
        return HCIPacket(.event, w.bytes)
    }
    /// Number Of Completed Packets for one handle.
    static func completed(handle: UInt16, count: UInt16 = 1) -> HCIPacket {
        var w = ByteWriter()
        w.u8(0x13); w.u8(5); w.u8(1); w.u16(handle); w.u16(count)
        return HCIPacket(.event, w.bytes)
    }
    /// Disconnection Complete, status success.
    static func disconnected(handle: UInt16, reason: UInt8 = 0x13) -> HCIPacket {
        var w = ByteWriter()
        w.u8(0x05); w.u8(4); w.u8(0); w.u16(handle); w.u8(reason)
        return HCIPacket(.event, w.bytes)
    }
}

// MARK: - A scripted controller

/// A fake `HCITransport`: records what the host sends, and answers from a
/// script. Two kinds of script entries:
///  - `expect(out, reply:)`: strict, ordered; the next packet the host sends
///    must equal `out`, and `reply` is queued for the host to receive.
///  - `when(matching:reply:)`: standing rules, consulted when the packet does
///    not match the head of the strict script ("when the host sends X, reply Y").
/// `receive` pops queued packets and returns `.timeout` when there are none
/// (or throws `closedByPeer` once drained when `closeWhenDrained` is set).
final class ScriptedController: HCITransport {
    struct Rule {
        var label: String
        var matches: (HCIPacket) -> Bool
        var replies: [HCIPacket]
        var once: Bool
    }

    let name = "scripted"
    private(set) var sent: [HCIPacket] = []
    var inbox: [HCIPacket] = []
    private(set) var script: [(out: HCIPacket, replies: [HCIPacket])] = []
    private var rules: [Rule] = []
    /// Packets that matched neither the script head nor a rule.
    private(set) var unexpected: [HCIPacket] = []
    /// Queue a Number Of Completed Packets (count 1) for every ACL packet sent,
    /// before that packet's scripted replies, as a controller does once it transmitted it.
    var autoCompleteACL = false
    /// When true, `receive` throws `closedByPeer` once the inbox is empty.
    var closeWhenDrained = false
    /// Answers what neither the script nor a rule did (a scripted peer, say:
    /// `ScriptedGATTServer`); nil from it leaves the packet unexpected.
    var respond: ((HCIPacket) -> [HCIPacket]?)?
    private(set) var receiveCalls = 0
    private(set) var closed = false

    init() {}

    // Scripting

    /// Strict: the next packet sent must be `out` (H4 form); then `replies` are delivered.
    func expect(_ out: HCIPacket, reply replies: [HCIPacket] = []) {
        script.append((out, replies))
    }

    /// "When the host sends X, reply Y" for an exact packet.
    func when(_ out: HCIPacket, reply replies: [HCIPacket], once: Bool = false) {
        rules.append(Rule(label: Hex.string(out.h4), matches: { $0 == out }, replies: replies, once: once))
    }

    /// "When the host sends a command with this opcode, reply Y".
    func when(command op: HCIOpcode, reply replies: [HCIPacket], once: Bool = false) {
        rules.append(Rule(label: "\(op)", matches: { p in
            p.type == .command && p.bytes.count >= 2 && (UInt16(p.bytes[0]) | UInt16(p.bytes[1]) << 8) == op.rawValue
        }, replies: replies, once: once))
    }

    /// Drops the rules for commands with this opcode (the controller stops answering them).
    func removeRules(for op: HCIOpcode) { rules.removeAll { $0.label == "\(op)" } }

    /// Delivers packets on the next receives, without waiting for anything.
    func deliver(_ packets: HCIPacket...) { inbox += packets }

    /// Script entries not yet consumed.
    var remainingScript: [String] { script.map { Hex.string($0.out.h4) } }

    /// Every packet sent of one type, in H4 form hex ("02 01 00 ...").
    func sentHex(_ type: HCIPacketType? = nil) -> [String] {
        sent.filter { type == nil || $0.type == type! }.map { Hex.string($0.h4) }
    }

    /// Opcodes of the commands sent, in order.
    var sentOpcodes: [UInt16] {
        sent.filter { $0.type == .command && $0.bytes.count >= 2 }.map { UInt16($0.bytes[0]) | UInt16($0.bytes[1]) << 8 }
    }

    // HCITransport

    func send(_ packet: HCIPacket) throws {
        if closed { throw TransportError.closedByPeer(name) }
        sent.append(packet)
        if autoCompleteACL, packet.type == .acl, packet.bytes.count >= 2 {
            inbox.append(Ev.completed(handle: (UInt16(packet.bytes[0]) | UInt16(packet.bytes[1]) << 8) & 0x0FFF))
        }
        if let head = script.first, head.out == packet {
            script.removeFirst()
            inbox += head.replies
            return
        }
        if let i = rules.firstIndex(where: { $0.matches(packet) }) {
            inbox += rules[i].replies
            if rules[i].once { rules.remove(at: i) }
            return
        }
        if let replies = respond?(packet) {
            inbox += replies
            return
        }
        unexpected.append(packet)
    }

    func receive(timeoutMs: Int, wakeFD: Int32) throws -> ReceiveResult {
        receiveCalls += 1
        if !inbox.isEmpty { return .packet(inbox.removeFirst()) }
        if closeWhenDrained { throw TransportError.closedByPeer(name) }
        return .timeout
    }

    func close() { closed = true }
}

// MARK: - A host, link, bearer over the scripted controller

/// ACL helpers for handle 0x0001: our outgoing start fragments carry PB 00
/// ("01 00"), the controller's incoming ones PB 10 ("01 20").
enum ACL {
    static let handle: UInt16 = 0x0001

    /// Outgoing basic frame on `cid`, one fragment: "02 01 00 LL LL ll ll cc cc payload".
    static func out(cid: UInt16 = CID.att, _ payload: [UInt8]) -> HCIPacket {
        frame(boundary: .firstNonFlushable, cid: cid, payload)
    }
    /// Incoming basic frame on `cid`, one fragment.
    static func `in`(cid: UInt16 = CID.att, _ payload: [UInt8]) -> HCIPacket {
        frame(boundary: .firstFlushable, cid: cid, payload)
    }
    static func frame(boundary: ACLPacket.Boundary, cid: UInt16, _ payload: [UInt8]) -> HCIPacket {
        var w = ByteWriter()
        w.u16(UInt16(payload.count)); w.u16(cid); w.append(payload)
        return ACLPacket(handle: handle, boundary: boundary, data: w.bytes).packet
    }
}

/// A connected bearer on handle 0x0001 over a scripted controller.
final class BearerFixture {
    let ctl = ScriptedController()
    let host: HCIHost
    let link: L2CAPLink
    let bearer: ATTBearer
    var notifications: [HandleValue] = []
    var indications: [HandleValue] = []
    var unexpectedPDUs: [String] = []

    init(aclLength: Int = 27, aclPackets: Int = 4) {
        ctl.autoCompleteACL = true
        host = HCIHost(transport: ctl)
        host.interruptible = false
        host.commandTimeoutMs = 500
        host.setACLBuffers(length: aclLength, packets: aclPackets)
        link = L2CAPLink(host: host, handle: ACL.handle)
        bearer = ATTBearer(link: link)
        bearer.transactionTimeoutMs = 500
        bearer.onNotification = { [unowned self] in self.notifications.append($0) }
        bearer.onIndication = { [unowned self] in self.indications.append($0) }
        bearer.onUnexpected = { [unowned self] in self.unexpectedPDUs.append($0) }
    }

    /// Strict step: we send ATT `request` (hex), the peer answers with `responses` (hex ATT PDUs).
    func expectATT(_ request: String, reply responses: String..., sourceLocation: SourceLocation = #_sourceLocation) {
        ctl.expect(ACL.out(hex(request, sourceLocation: sourceLocation)),
                   reply: responses.map { ACL.in(hex($0, sourceLocation: sourceLocation)) })
    }

    /// ATT payloads we sent (ACL on CID 4), as hex.
    var sentATT: [String] {
        ctl.sent.compactMap { p -> String? in
            guard p.type == .acl, let a = try? ACLPacket.decode(p.bytes), a.data.count >= 4,
                  a.data[2] == 0x04, a.data[3] == 0x00 else { return nil }
            return Hex.string(a.data[4...])
        }
    }

    /// Everything in the script was used and nothing unscripted was sent.
    func verifyScriptDone(sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(ctl.remainingScript.isEmpty, "script steps never reached: \(ctl.remainingScript)", sourceLocation: sourceLocation)
        #expect(ctl.unexpected.isEmpty, "unscripted packets sent: \(ctl.unexpected.map { Hex.string($0.h4) })", sourceLocation: sourceLocation)
    }

    /// Runs the loop until the inbox is empty (bounded), for unsolicited PDUs.
    func drain() throws {
        _ = try host.pump(until: Instant.now().adding(ms: 200)) { ctl.inbox.isEmpty }
    }
}

// MARK: - Scripted GATT

/// The pycom LED service and its red, green and blue characteristics: the
/// UUIDs the scripted ATT/GATT tests use.
let service = BluetoothUUID("36353433-3231-3039-3837-363534333231")!
let red = BluetoothUUID("36353433-3231-3039-3837-363534336261")!
let green = BluetoothUUID("36353433-3231-3039-3837-363534336262")!
let blue = BluetoothUUID("36353433-3231-3039-3837-363534336263")!

/// A UUID's ATT wire form as hex ("31 32 ... 36").
func w(_ u: BluetoothUUID) -> String { Hex.string(u.attWire) }

/// A GATT client on a scripted bearer (handle 0x0001, ATT_MTU 23).
func client() -> (BearerFixture, GATTClient) {
    let f = BearerFixture()
    return (f, GATTClient(bearer: f.bearer))
}
