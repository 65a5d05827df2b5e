import BLEWire
import BLEHCI
import BLEL2CAP
import BLESMP

/// Why a link could not be encrypted. Printing one never shows a key.
public enum SecurityError: Error, Hashable, Sendable, CustomStringConvertible {
    /// Pairing ended without keys: the Pairing Failed reason (ours or the
    /// peer's), a failed encryption with the new key, or SMP's 30 s timeout.
    case pairing(PairingFailure)
    /// Encryption with a stored key was refused: 0x06 PIN or Key Missing (the
    /// peer answered the controller's LTK request negatively, Core Vol 6
    /// Part B 5.1.3.1), or 0x05 Authentication Failure, which Root Canal
    /// reports for the same refusal. The device has forgotten the bond.
    case keyMissing(HCIStatus)
    /// Encryption failed with another HCI status.
    case encryption(HCIStatus)
    /// The link went down first.
    case disconnected
    /// SMP timed out earlier on this link: no SMP PDU may be sent until it is
    /// reconnected (Core Vol 3 Part H 3.4).
    case smpUnavailable

    public var description: String {
        switch self {
        case let .pairing(f): return f.description
        case let .keyMissing(s): return "the device has forgotten the bond (encryption failed: \(s))"
        case let .encryption(s): return "encryption failed: \(s)"
        case .disconnected: return "the link went down before encryption completed"
        case .smpUnavailable: return "SMP timed out earlier on this link; reconnect to pair"
        }
    }
}

/// The Security Manager's driver for one link, as central: runs an
/// `SMPInitiator` over the SMP channel (CID 0x0006) with SMP's 30 s timer,
/// and LE Enable Encryption with its Encryption Change. Event-driven: each
/// operation is a `Future`, completed from the host's loop.
public final class LinkSecurity {
    /// The connection handle.
    public let handle: UInt16
    private unowned let host: HCIHost
    private unowned let l2cap: L2CAPLink
    private let initiatorAddress: DeviceAddress
    private let responderAddress: DeviceAddress

    /// True once the link is encrypted (Encryption Change, enabled).
    public private(set) var isEncrypted = false
    /// How the link is encrypted: the key's kind and size (the key itself is
    /// never printed).
    public private(set) var currentKey: LongTermKey?
    /// Pairing settings for `startPairing()`.
    public var configuration = SMPConfiguration()
    /// Called with each Security Request the peer sends while no pairing is in
    /// progress (the AuthReq it asks for). When nil, the request is answered
    /// with Pairing Failed, Pairing Not Supported.
    public var onSecurityRequest: ((AuthReq) -> Void)?

    private var smp: SMPInitiator?
    private var pairing: Future<PairingResult>?
    private var encrypting: Future<Void>?
    private var timer: HostToken?
    private var smpDead = false
    private var tokens: [HostToken] = []

    init(host: HCIHost, l2cap: L2CAPLink, initiator: DeviceAddress, responder: DeviceAddress) {
        self.host = host
        self.l2cap = l2cap
        self.handle = l2cap.handle
        self.initiatorAddress = initiator
        self.responderAddress = responder
        l2cap.smpHandler = { [weak self] in self?.receive($0) }
        tokens.append(host.onEvent { [weak self] ev in
            guard let self, let ec = ev.encryptionChange, ec.handle == self.handle else { return }
            self.encryptionChanged(ec)
        })
    }

    /// Pairing in progress, if any.
    public var isPairing: Bool { smp?.isActive == true }

    /// Pairs (Just Works: LE Secure Connections, else legacy when allowed);
    /// the link is encrypted with the new key when it completes. A second
    /// call while pairing returns the same future.
    /// - Returns: a future of the result (keys inside, never printed), failed
    ///   with `SecurityError`.
    public func startPairing() -> Future<PairingResult> {
        if let p = pairing, !p.isComplete { return p }
        guard !smpDead else { return Future(error: SecurityError.smpUnavailable) }
        let f = Future<PairingResult>()
        pairing = f
        var s = SMPInitiator(configuration: configuration, initiator: initiatorAddress, responder: responderAddress)
        let actions = s.start()
        smp = s
        perform(actions)
        return f
    }

    /// Encrypts the link with a stored key (LE Enable Encryption). A second
    /// call while encrypting returns the same future.
    /// - Returns: a future that succeeds at the Encryption Change (or Key
    ///   Refresh) and fails with `SecurityError.keyMissing` when the peer
    ///   refuses the key (0x06, or 0x05 as Root Canal says it), else `.encryption(status)`.
    public func startEncryption(_ key: LongTermKey) -> Future<Void> {
        if let e = encrypting, !e.isComplete { return e }
        let f = Future<Void>()
        encrypting = f
        enableEncryption(key) { [weak self] status in
            self?.encrypting = nil
            if status == .success { f.succeed(()) }
            else if status == .pinOrKeyMissing || status == .authenticationFailure { f.fail(SecurityError.keyMissing(status)) }
            else { f.fail(SecurityError.encryption(status)) }
        }
        return f
    }

    /// The link ended: pending operations fail.
    func linkClosed() {
        host.cancel(tokens)
        tokens = []
        stopTimer()
        l2cap.smpHandler = nil
        pairing?.fail(SecurityError.disconnected)
        encrypting?.fail(SecurityError.disconnected)
        encryptionWaiter = nil
        if let t = encryptionTimer { host.cancel(t); encryptionTimer = nil }
    }

    // MARK: SMP

    private func receive(_ bytes: [UInt8]) {
        if var s = smp, s.isActive {
            let actions = s.receive(bytes)
            smp = s
            perform(actions)
            return
        }
        guard let code = bytes.first else { return }
        if code == SMPCode.securityRequest.rawValue {
            guard let h = onSecurityRequest, bytes.count == 2 else {
                if !smpDead { l2cap.send(cid: CID.smp, SMPPDU.pairingFailed(.pairingNotSupported).encoded) }
                return
            }
            h(AuthReq(rawValue: bytes[1]))
        } else if code == SMPCode.pairingRequest.rawValue, !smpDead {
            // We are the central: a peer never starts pairing with a request.
            l2cap.send(cid: CID.smp, SMPPDU.pairingFailed(.pairingNotSupported).encoded)
        }
        // Anything else outside a pairing (late key distribution, a stray
        // Pairing Failed) is dropped.
    }

    private func perform(_ actions: [SMPAction]) {
        for a in actions {
            switch a {
            case let .send(b):
                guard !smpDead else { continue }
                l2cap.send(cid: CID.smp, b)
                restartTimer()
            case let .startEncryption(k):
                enableEncryption(k) { [weak self] status in
                    guard let self, var s = self.smp else { return }
                    let next = s.encryptionChanged(status: status.rawValue, enabled: status == .success)
                    self.smp = s
                    self.perform(next)
                }
            case let .complete(r):
                stopTimer()
                if let k = r.longTermKey { currentKey = k }
                pairing?.succeed(r)
            case let .failed(f):
                stopTimer()
                if case .timeout = f { smpDead = true }
                pairing?.fail(SecurityError.pairing(f))
            }
        }
    }

    private func restartTimer() {
        stopTimer()
        timer = host.schedule(afterMs: SMPInitiator.timeoutMs) { [weak self] in
            guard let self, var s = self.smp else { return }
            self.timer = nil
            let actions = s.timeout()
            self.smp = s
            self.perform(actions)
        }
    }

    private func stopTimer() {
        if let t = timer { host.cancel(t) }
        timer = nil
    }

    // MARK: LE Enable Encryption

    private var encryptionWaiter: ((HCIStatus) -> Void)?
    private var pendingKey: LongTermKey?
    private var encryptionTimer: HostToken?
    /// How long LE Enable Encryption may take before it is given up (a
    /// controller that never reports the Encryption Change). A wrong key
    /// usually ends the link instead (0x3D MIC Failure).
    public var encryptionTimeoutMs = 5_000

    /// Sends LE Enable Encryption; `done` gets the status of its Encryption
    /// Change (or of a rejected command).
    private func enableEncryption(_ key: LongTermKey, _ done: @escaping (HCIStatus) -> Void) {
        encryptionWaiter = { [weak self] status in
            if let self, let t = self.encryptionTimer { self.host.cancel(t); self.encryptionTimer = nil }
            done(status)
        }
        pendingKey = key
        encryptionTimer = host.schedule(afterMs: encryptionTimeoutMs) { [weak self] in
            guard let self, let w = self.encryptionWaiter else { return }
            self.encryptionTimer = nil
            self.encryptionWaiter = nil
            self.pendingKey = nil
            w(.connectionTimeout)
        }
        let cmd = HCI.LEEnableEncryption(handle: handle, rand: key.rand, ediv: key.ediv, ltk: key.key.bytes).command
        host.submit(cmd).whenComplete { [weak self] r in
            guard case .failure(let e) = r, let self, let w = self.encryptionWaiter else { return }
            self.encryptionWaiter = nil
            if case let HCIError.commandFailed(_, status) = e { w(status) } else { w(.unspecifiedError) }
        }
    }

    private func encryptionChanged(_ ec: EncryptionChange) {
        if ec.status == .success {
            isEncrypted = ec.enabled
            if ec.enabled, let k = pendingKey { currentKey = k }
        } else if !ec.isRefresh {
            isEncrypted = false
        }
        pendingKey = nil
        guard let w = encryptionWaiter else { return }
        encryptionWaiter = nil
        w(ec.enabled || ec.status != .success ? ec.status : .unspecifiedError)
    }
}
