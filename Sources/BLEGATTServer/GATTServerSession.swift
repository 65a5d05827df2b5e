import BLEWire
import BLEATT
import BLEGATT

/// One client of a `GATTServer`, on one bearer: answers its requests (Core
/// Vol 3 Part F 3.4, every error as 3.4.1.1 and each request's section say:
/// the request's opcode, the handle in error, the code), keeps its own
/// CCCDs and Client Supported Features, its queue of prepared writes and
/// its indication in flight (one at a time, 3.4.7.2).
public final class GATTServerSession: ATTServer {
    unowned let server: GATTServer
    public private(set) weak var bearer: ATTBearer?
    public let peer: DeviceAddress
    let isEncrypted: () -> Bool
    let hasKeys: () -> Bool
    let bondIdentity: () -> DeviceAddress?
    /// This client's own values (CCCDs, Client Supported Features).
    var own: [UInt16: [UInt8]] = [:]
    var prepared: [(handle: UInt16, offset: Int, value: [UInt8])] = []
    var indicating: UInt16?
    var indications: [(UInt16, [UInt8])] = []

    init(server: GATTServer, bearer: ATTBearer, peer: DeviceAddress, isEncrypted: @escaping () -> Bool, hasKeys: @escaping () -> Bool,
         bondIdentity: @escaping () -> DeviceAddress?) {
        self.server = server; self.bearer = bearer; self.peer = peer; self.isEncrypted = isEncrypted; self.hasKeys = hasKeys
        self.bondIdentity = bondIdentity
    }

    var db: GATTServerDatabase { server.database }

    /// The CCCD bits of each characteristic this client subscribed to (value handle: bits), to keep for a bonded client.
    public var subscriptions: [UInt16: UInt16] {
        var out: [UInt16: UInt16] = [:]
        for c in db.characteristics {
            guard let h = c.cccdHandle, let v = own[h], v.count == 2 else { continue }
            let bits = UInt16(v[0]) | UInt16(v[1]) << 8
            if bits != 0 { out[c.valueHandle] = bits }
        }
        return out
    }

    /// Restores a bonded client's subscriptions (from `subscriptions`, an earlier connection's).
    public func restore(_ subs: [UInt16: UInt16]) {
        for (valueHandle, bits) in subs {
            guard let h = db.characteristic(value: valueHandle)?.cccdHandle else { continue }
            own[h] = [UInt8(bits & 0xFF), UInt8(bits >> 8)]
        }
    }

    /// The value this client sees.
    func value(_ a: Attribute) -> [UInt8] { a.perClient ? (own[a.handle] ?? a.value) : a.value }

    /// The owner was told this session needs encryption (until it is encrypted).
    private var securityAsked = false

    private func securityError(_ needs: Bool, _ handle: UInt16) -> ATTErrorCode? {
        guard needs, !isEncrypted() else { return nil }
        if !securityAsked {
            securityAsked = true
            server.emit(.securityNeeded(self, handle: handle))
        }
        return hasKeys() ? .insufficientEncryption : .insufficientAuthentication
    }
    func readError(_ a: Attribute) -> ATTErrorCode? {
        guard a.permissions.contains(.read) else { return .readNotPermitted }
        return securityError(a.permissions.contains(.readEncrypted), a.handle)
    }
    func writeError(_ a: Attribute) -> ATTErrorCode? {
        guard a.permissions.contains(.write) else { return .writeNotPermitted }
        return securityError(a.permissions.contains(.writeEncrypted), a.handle)
    }

    /// The link was encrypted: a later refusal tells the owner again if it is lost.
    public func encrypted() { securityAsked = false }

    static func error(_ op: ATTOpcode, _ h: UInt16, _ e: ATTErrorCode) -> ATT.ErrorResponse {
        ATT.ErrorResponse(request: op, handle: h, error: e)
    }

    // MARK: ATTServer

    public func serve(_ pdu: any ATTPDU, opcode: ATTOpcode, on bearer: ATTBearer) -> (any ATTPDU)? {
        let mtu = bearer.mtu
        switch pdu {
        case let r as ATT.FindInformationRequest: return findInformation(r, mtu)
        case let r as ATT.FindByTypeValueRequest: return findByTypeValue(r, mtu)
        case let r as ATT.ReadByTypeRequest: return readByType(r, mtu)
        case let r as ATT.ReadByGroupTypeRequest: return readByGroupType(r, mtu)
        case let r as ATT.ReadRequest: return read(r.handle, offset: nil, mtu)
        case let r as ATT.ReadBlobRequest: return read(r.handle, offset: Int(r.offset), mtu)
        case let r as ATT.ReadMultipleRequest: return readMultiple(r.handles, variable: false, mtu)
        case let r as ATT.ReadMultipleVariableRequest: return readMultiple(r.handles, variable: true, mtu)
        case let r as ATT.WriteRequest:
            if let (h, e) = write(r.handle, r.value, .request) { return Self.error(.writeRequest, h, e) }
            return ATT.WriteResponse()
        case let r as ATT.WriteCommand:
            _ = write(r.handle, r.value, .command) // a command gets no answer, an error none either (3.4.5.3)
            return nil
        case let r as ATT.PrepareWriteRequest: return prepare(r)
        case let r as ATT.ExecuteWriteRequest: return execute(r)
        case is ATT.SignedWriteCommand: return nil // no signing keys: ignored (3.4.5.4)
        default:
            return opcode.kind == .request ? Self.error(opcode, pdu.firstHandle ?? 0, .requestNotSupported) : nil
        }
    }

    public func confirmed(on bearer: ATTBearer) {
        guard let h = indicating else { return }
        indicating = nil
        server.emit(.confirmed(self, handle: h))
        sendNextIndication()
    }
}
