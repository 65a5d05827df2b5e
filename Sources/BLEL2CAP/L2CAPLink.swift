import BLEWire
import BLEHCI

/// L2CAP on one LE connection: reassembles incoming ACL fragments into
/// basic-frame PDUs, dispatches them by channel (ATT, LE signalling, SMP),
/// and frames outgoing PDUs (the HCI layer fragments them to the controller's
/// buffer size). Reassembly is an `L2CAPReassembler` per link: a start fragment
/// begins a PDU (dropping any incomplete one), a continuation without a start
/// is dropped, and data past the announced length is an error (Core Vol 3 Part A 3, 7.2).
public final class L2CAPLink {
    public let handle: UInt16
    public let host: HCIHost
    private var rx = L2CAPReassembler()
    private var channels: [UInt16: ([UInt8]) -> Void] = [:]
    private var nextIdentifier: UInt8 = 1
    /// False once the link is disconnected or closed.
    public private(set) var isOpen = true
    private var tokens: [HostToken] = []
    /// Called once when the link ends: with the disconnection reason, or nil
    /// when the host failed or `close()` was called.
    public var onClose: ((HCIStatus?) -> Void)?

    /// Reassembly problems (for the tracer / diagnostics); the bad data is dropped.
    public var onReassemblyError: ((String) -> Void)?
    /// True on a link where we are the peripheral (LE Connection Complete
    /// Role 1): we may ask for connection parameters (`requestConnectionParameters`)
    /// and never answer a request for them as a central would.
    public let isPeripheral: Bool
    /// Our Connection Parameter Update Requests awaiting their response, by identifier.
    var parameterRequests: [UInt8: (future: Future<Bool>, timer: HostToken)] = [:]
    /// Decides whether to accept a peer's Connection Parameter Update Request
    /// (default: accept when within the ranges the specification allows).
    public var acceptConnectionParameters: (ConnectionParameters) -> Bool = { $0.isValid }
    /// Informational hooks.
    public var onConnectionParameterRequest: ((ConnectionParameters, Bool) -> Void)?
    public var onSMP: ((UInt8) -> Void)?
    /// The Security Manager of this link: when set, it gets every SMP PDU
    /// (CID 0x0006) and answers them itself; when nil, a Pairing Request or
    /// Security Request is answered with Pairing Failed, Pairing Not Supported.
    public var smpHandler: (([UInt8]) -> Void)?

    /// - Parameters:
    ///   - host: the HCI layer.
    ///   - handle: the connection handle from LE Connection Complete.
    ///   - ownsDisconnection: false when the connection's owner closes the
    ///     link on disconnection itself (`close(reason:)`, the facade's Link);
    ///     true (alone, as in tests): it watches for Disconnection Complete.
    ///   - peripheral: we are the connection's peripheral (Role 1).
    public init(host: HCIHost, handle: UInt16, ownsDisconnection: Bool = true, peripheral: Bool = false) {
        self.host = host
        self.handle = handle
        isPeripheral = peripheral
        tokens.append(host.onACL { [weak self] acl in
            guard let self, acl.handle == self.handle, self.isOpen else { return }
            self.receive(acl)
        })
        if ownsDisconnection {
            tokens.append(host.onEvent { [weak self] ev in
                if case let .disconnectionComplete(d) = ev, let self, d.handle == self.handle, d.status == .success {
                    self.end(d.reason)
                }
            })
        }
        tokens.append(host.onClose { [weak self] _ in self?.end(nil) })
        channels[CID.leSignalling] = { [weak self] in self?.handleSignalling($0) }
        channels[CID.smp] = { [weak self] in self?.handleSMP($0) }
    }

    /// Stops using the connection: no more PDUs are sent or delivered, and
    /// the host registrations are released. The connection itself is GAP's
    /// to disconnect. Idempotent.
    public func close() { end(nil) }

    /// Stops using the connection because it ended for `reason` (its owner
    /// saw the disconnection); `onClose` gets the reason. Idempotent.
    public func close(reason: HCIStatus?) { end(reason) }

    private func end(_ reason: HCIStatus?) {
        guard isOpen else { return }
        isOpen = false
        rx.reset()
        host.cancel(tokens)
        tokens.removeAll()
        failParameterRequests(.closed)
        let h = onClose
        onClose = nil
        h?(reason)
    }

    /// Registers the handler for a fixed channel's PDUs (payload without basic header).
    public func register(cid: UInt16, _ handler: @escaping ([UInt8]) -> Void) {
        channels[cid] = handler
    }

    /// Sends a basic-frame PDU on `cid`.
    public func send(cid: UInt16, _ payload: [UInt8]) {
        guard isOpen else { return }
        var w = ByteWriter(capacity: 4 + payload.count)
        w.u16(UInt16(truncatingIfNeeded: payload.count)); w.u16(cid); w.append(payload)
        host.sendACL(handle: handle, pdu: w.bytes)
    }

    /// Feeds one ACL packet (public for unit tests): reassembled by
    /// `L2CAPReassembler`, a complete PDU goes to its channel's handler and
    /// every dropped fragment or PDU is reported to `onReassemblyError`.
    public func receive(_ acl: ACLPacket) {
        let step = rx.receive(acl)
        for e in step.dropped { onReassemblyError?(e.description) }
        if case .complete(let frame)? = step.progress, let h = channels[frame.cid] { h(frame.payload) }
    }

    func identifier() -> UInt8 {
        defer { nextIdentifier = nextIdentifier == 255 ? 1 : nextIdentifier + 1 }
        return nextIdentifier
    }

    private func handleSignalling(_ payload: [UInt8]) {
        guard let cmd = try? SignallingCommand.decode(payload) else {
            // Malformed: reject if we can read code and identifier (0x0000 Command not understood).
            if payload.count >= 2, payload[1] != 0 {
                send(cid: CID.leSignalling, SignallingCommand.commandReject(identifier: payload[1]).encoded)
            }
            return
        }
        switch cmd.code {
        case SignallingCommand.connectionParameterUpdateRequest where isPeripheral:
            // Only the central may accept them (Core Vol 3 Part A 4.20): as
            // BlueZ does, a peripheral rejects the command as not understood.
            send(cid: CID.leSignalling, SignallingCommand.commandReject(identifier: cmd.identifier).encoded)
        case SignallingCommand.connectionParameterUpdateResponse, SignallingCommand.commandReject:
            parameterAnswer(cmd) // ours, or one we did not ask for (ignored)
        case SignallingCommand.connectionParameterUpdateRequest:
            guard let p = try? cmd.connectionParameters() else {
                send(cid: CID.leSignalling, SignallingCommand.commandReject(identifier: cmd.identifier).encoded)
                return
            }
            let ok = acceptConnectionParameters(p)
            onConnectionParameterRequest?(p, ok)
            send(cid: CID.leSignalling, SignallingCommand.connectionParameterUpdateResponse(identifier: cmd.identifier, accepted: ok).encoded)
            if ok {
                // As central, apply them (Core Vol 3 Part A 4.20): the answer arrives as LE Connection Update Complete.
                host.enqueue(LEConnectionUpdate(handle: handle, parameters: p).command) { _ in }
            }
        case let c where SignallingCommand.isRequest(c) || SignallingCommand.declaration(c) == nil:
            // Requests we do not implement (e.g. credit-based channels) and unknown codes.
            if cmd.identifier != 0 {
                send(cid: CID.leSignalling, SignallingCommand.commandReject(identifier: cmd.identifier).encoded)
            }
        default:
            break // responses and rejects we did not ask for: ignore
        }
    }

    private func handleSMP(_ payload: [UInt8]) {
        guard let code = payload.first else { return }
        onSMP?(code)
        if let h = smpHandler { h(payload); return }
        // No security manager on this link: Pairing Request (0x01) and
        // Security Request (0x0B) get Pairing Failed (0x05), reason Pairing
        // Not Supported (0x05) (Core Vol 3 Part H 3.5.5), so the peer does
        // not wait 30 s. BLESMP has the PDUs; this is the only reply here.
        if code == 0x01 || code == 0x0B {
            send(cid: CID.smp, [0x05, 0x05])
        }
    }
}
