import BLEWire
import BLEATT
import BLEGATT

// Writes (Core Vol 3 Part F 3.4.5, 3.4.6), notifications and indications (3.4.7).
extension GATTServerSession {
    /// Checks and applies one write; nil when done, else the handle and error.
    func write(_ h: UInt16, _ v: [UInt8], _ op: GATTServer.WriteOp) -> (UInt16, ATTErrorCode)? {
        guard let a = db[h] else { return (h, .invalidHandle) }
        if let e = writeError(a) { return (h, e) }
        if let e = valueError(a, v) { return (h, e) }
        apply(a, v, op)
        return nil
    }

    /// What is wrong with `v` as the new value of `a`.
    private func valueError(_ a: Attribute, _ v: [UInt8]) -> ATTErrorCode? {
        if a.type == GATTUUID.clientCharacteristicConfiguration { return v.count == 2 ? nil : .invalidAttributeValueLength }
        guard v.count <= a.maxLength else { return .invalidAttributeValueLength }
        // Client Supported Features: a bit once set stays set (Core Vol 3 Part G 7.2).
        if a.type == GATTUUID.clientSupportedFeatures {
            let old = value(a)
            for (i, b) in old.enumerated() where i >= v.count || v[i] & b != b { return .valueNotAllowed }
        }
        return nil
    }

    private func apply(_ a: Attribute, _ v: [UInt8], _ op: GATTServer.WriteOp) {
        if a.perClient { own[a.handle] = v } else { server.store(a.handle, v) }
        if a.type == GATTUUID.clientCharacteristicConfiguration, let c = db.characteristic(cccd: a.handle) {
            let bits = UInt16(v[0]) | UInt16(v[1]) << 8
            server.emit(.subscribed(self, c, notify: bits & 1 != 0, indicate: bits & 2 != 0))
            keepBond()
        } else {
            server.emit(.write(self, GATTServer.Write(handle: a.handle, uuid: a.type, value: v, op: op)))
        }
    }

    func prepare(_ r: ATT.PrepareWriteRequest) -> any ATTPDU {
        guard let a = db[r.handle] else { return Self.error(.prepareWriteRequest, r.handle, .invalidHandle) }
        if let e = writeError(a) { return Self.error(.prepareWriteRequest, r.handle, e) }
        guard prepared.count < server.prepareQueueLimit else { return Self.error(.prepareWriteRequest, r.handle, .prepareQueueFull) }
        prepared.append((r.handle, Int(r.offset), r.value))
        return ATT.PrepareWriteResponse(handle: r.handle, offset: r.offset, value: r.value)
    }

    /// Execute Write (3.4.6.3): flags 0 cancels the queue; 1 writes it, each
    /// attribute's parts in order, all or nothing (the first bad offset or
    /// length answers, with its handle, and nothing is written).
    func execute(_ r: ATT.ExecuteWriteRequest) -> any ATTPDU {
        let queue = prepared
        prepared = []
        guard r.flags == 1 else {
            return r.flags == 0 ? ATT.ExecuteWriteResponse() : Self.error(.executeWriteRequest, 0, .invalidPDU)
        }
        var order: [UInt16] = []
        var built: [UInt16: [UInt8]] = [:]
        for p in queue {
            guard let a = db[p.handle] else { return Self.error(.executeWriteRequest, p.handle, .invalidHandle) }
            if built[p.handle] == nil { order.append(p.handle); built[p.handle] = value(a) }
            var buf = built[p.handle]!
            guard p.offset <= buf.count else { return Self.error(.executeWriteRequest, p.handle, .invalidOffset) }
            let end = min(buf.count, p.offset + p.value.count)
            buf.replaceSubrange(p.offset..<end, with: p.value)
            built[p.handle] = buf
        }
        for h in order {
            let a = db[h]!, v = built[h]!
            if let e = valueError(a, v) { return Self.error(.executeWriteRequest, h, e) }
        }
        for h in order { apply(db[h]!, built[h]!, .prepared) }
        return ATT.ExecuteWriteResponse()
    }

    // MARK: notifications and indications

    /// Sends `value` of `c` as this client subscribed to it: a notification,
    /// or an indication (queued behind the one in flight). Nothing when the
    /// client may not read it now (an encrypted value on a plain link).
    @discardableResult
    func deliver(_ c: ServedCharacteristic, _ value: [UInt8]) -> Bool {
        guard let h = c.cccdHandle, let v = own[h], v.count == 2, let a = db[c.valueHandle] else { return false }
        if a.permissions.contains(.readEncrypted), !isEncrypted() { return false }
        guard let bearer else { return false }
        let cut = Array(value.prefix(bearer.mtu - 3))
        if v[0] & 1 != 0, c.properties.contains(.notify) {
            try? bearer.send(ATT.HandleValueNotification(handle: c.valueHandle, value: cut))
            return true
        } else if v[0] & 2 != 0, c.properties.contains(.indicate) {
            indications.append((c.valueHandle, cut))
            if indicating == nil { sendNextIndication() }
            return true
        }
        return false
    }

    /// Sends the value at `valueHandle` to this client as its CCCD asks
    /// (Service Changed to a bonded client whose subscription was restored).
    /// - Returns: whether it was sent (the client subscribed and may read it).
    @discardableResult
    public func send(_ valueHandle: UInt16, _ value: [UInt8]) -> Bool {
        guard let c = db.characteristic(value: valueHandle) else { return false }
        return deliver(c, value)
    }

    /// Indicates `value` at `handle` to this client whatever its CCCD says.
    public func indicate(_ handle: UInt16, _ value: [UInt8]) {
        indications.append((handle, value))
        if indicating == nil { sendNextIndication() }
    }

    func sendNextIndication() {
        guard indicating == nil, !indications.isEmpty, let bearer else { return }
        let (h, v) = indications.removeFirst()
        indicating = h
        try? bearer.send(ATT.HandleValueIndication(handle: h, value: Array(v.prefix(bearer.mtu - 3))))
    }

    /// Indications waiting behind the one in flight (and whether one is), for tests.
    public var pendingIndications: (inFlight: UInt16?, queued: Int) { (indicating, indications.count) }
}
