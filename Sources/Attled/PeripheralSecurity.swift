import BLEWire
import BLEHCI
import BLEL2CAP
import BLESMP

/// How the peripheral (`attled serve`) secures its links.
public struct PeripheralSecurityOptions: Sendable, Equatable {
    /// Pair at all: false answers every Pairing Request with Pairing Failed,
    /// Pairing Not Supported (bonded clients still encrypt).
    public var pairing: Bool
    /// Secure Connections Only mode (Core Vol 3 Part H 2.3.5.1): a central
    /// without LE Secure Connections gets Authentication Requirements.
    public var secureConnectionsOnly: Bool
    /// Set Bonding: keys are exchanged and the client's bond stored.
    public var bonding: Bool
    /// Our identity (IRK and public or static random address), distributed
    /// when the client asks for IdKey; nil distributes none.
    public var identity: LocalIdentity?
    /// The smallest key size accepted (7 ... 16).
    public var minEncryptionKeySize: UInt8

    /// Pairing allowed, Secure Connections with legacy fallback, bonding,
    /// no identity, key sizes 7 ... 16.
    public init(pairing: Bool = true, secureConnectionsOnly: Bool = false, bonding: Bool = true,
                identity: LocalIdentity? = nil, minEncryptionKeySize: UInt8 = 7) {
        self.pairing = pairing
        self.secureConnectionsOnly = secureConnectionsOnly
        self.bonding = bonding
        self.identity = identity
        self.minEncryptionKeySize = minEncryptionKeySize
    }

    /// The responder's settings: Just Works, SC (legacy unless SC Only),
    /// the client's IdKey accepted.
    var smp: SMPConfiguration {
        var c = SMPConfiguration()
        c.bonding = bonding
        c.allowLegacy = !secureConnectionsOnly
        c.minEncryptionKeySize = minEncryptionKeySize
        c.peerKeys = [.idKey]
        c.localIdentity = identity
        return c
    }
}

/// What happened to a peripheral link's security. Printing one never shows a key.
public enum PeripheralSecurityEvent: Hashable, Sendable, CustomStringConvertible {
    /// Pairing finished (Just Works; `result.secureConnections` says LE Secure
    /// Connections or legacy; the keys sent and received are in it). `bond`
    /// is what was stored (nil: not bonding, no store, or `storeError`).
    case paired(PairingResult, bond: Bond?, storeError: String?)
    /// The link is encrypted: with the client's stored `bond`, or, nil, with
    /// the key of the pairing in progress (its key distribution follows).
    case encrypted(bond: Bond?)
    /// Pairing failed: the reason we sent or the client sent, a failed
    /// encryption with the new key, or SMP's 30 s timeout (then no SMP on
    /// this link until it reconnects).
    case failed(PairingFailure)
    /// The client's encryption outside pairing failed with this HCI status
    /// (e.g. 0x06 after we had no key for it, 0x3D a wrong key).
    case encryptionFailed(HCIStatus)

    public var description: String {
        switch self {
        case let .paired(r, bond, err):
            return "paired: \(r)" + (bond != nil ? "; bond stored" : "") + (err.map { "; bond NOT stored: \($0)" } ?? "")
        case let .encrypted(bond): return bond.map { "encrypted with the bond of \($0.identity)" } ?? "encrypted with the new key"
        case let .failed(f): return f.description
        case let .encryptionFailed(s): return "encryption failed: \(s)"
        }
    }
}

/// The Security Manager of one link as peripheral: runs an `SMPResponder`
/// over the SMP channel (CID 0x0006) with SMP's 30 s timer, answers the
/// controller's LE Long Term Key Request (Core Vol 4 Part E 7.7.65.5) with
/// the pairing's STK or LTK or the client's bond (else a Negative Reply),
/// follows Encryption Change and Key Refresh, and stores the client's bond
/// (`BondRole.peripheral`). Everything arrives on the host's loop; `onEvent`
/// reports it.
public final class PeripheralSecurity {
    /// The connection handle.
    public let handle: UInt16
    /// The client (central) as it connected, and our address on the link.
    public let central: DeviceAddress
    public let local: DeviceAddress
    /// Where clients' bonds live (nil: nothing stored, no bond found).
    public let store: BondStore?
    /// Settings for the pairings to come.
    public var options: PeripheralSecurityOptions
    /// Every pairing, encryption and failure.
    public var onEvent: ((PeripheralSecurityEvent) -> Void)?

    /// True once the link is encrypted (Encryption Change, enabled).
    public private(set) var isEncrypted = false
    /// The key the link is encrypted with (kind and size; never printed).
    public private(set) var currentKey: LongTermKey?
    /// The client's bond: found in the store when attached, replaced by a pairing that bonds.
    public private(set) var bond: Bond?
    /// The client has a stored bond.
    public var hasBond: Bool { bond != nil }
    /// A pairing (or a Security Request) is in progress.
    public var isPairing: Bool { smp?.isActive == true }
    /// SMP's timer (Core Vol 3 Part H 3.4: 30 s; shorter only in tests).
    public var timeoutMs = SMPResponder.timeoutMs

    private unowned let host: HCIHost
    private unowned let l2cap: L2CAPLink
    private var smp: SMPResponder?
    private var smpDead = false
    private var timer: HostToken?
    private var tokens: [HostToken] = []
    /// The key given to the controller and the bond it came from (nil: the pairing's).
    private var answered: (key: LongTermKey, bond: Bond?)?

    /// Takes over SMP on `link` (an incoming connection, we the peripheral)
    /// and answers its LTK requests. `local` is the address we advertised
    /// and were connected at (default: the controller's own). Without an
    /// identity in `options`, the store's (`BondStore.localIdentity`, the
    /// IRK the central role distributes too) is offered when `local` can be
    /// an identity address. A second call returns the first one's.
    /// - Returns: the link's peripheral security (also `link.peripheralSecurity`).
    @discardableResult
    public static func attach(to link: Link, store: BondStore?, options: PeripheralSecurityOptions = PeripheralSecurityOptions(),
                              local: DeviceAddress? = nil) -> PeripheralSecurity {
        if let p = link.peripheralSecurity { return p }
        let address = local ?? link.stack.info.ownAddress
        var options = options
        if options.identity == nil, let id = store?.localIdentity(address: address) { options.identity = id }
        let p = PeripheralSecurity(host: link.stack.host, l2cap: link.l2cap, central: link.peer,
                                   local: address, store: store, options: options)
        link.peripheralSecurity = p
        return p
    }

    /// The security of the link `l2cap` from `central` to us at `local`.
    public init(host: HCIHost, l2cap: L2CAPLink, central: DeviceAddress, local: DeviceAddress,
                store: BondStore?, options: PeripheralSecurityOptions = PeripheralSecurityOptions()) {
        self.host = host
        self.l2cap = l2cap
        self.handle = l2cap.handle
        self.central = central
        self.local = local
        self.store = store
        self.options = options
        bond = store?.bond(for: central, role: .peripheral)
        l2cap.smpHandler = { [weak self] in self?.receive($0) }
        tokens.append(host.onEvent { [weak self] ev in
            guard let self else { return }
            if let ec = ev.encryptionChange, ec.handle == self.handle { self.encryptionChanged(ec) }
            if case let .leMeta(sub, p) = ev, sub == .longTermKeyRequest, let r = try? HCI.LELongTermKeyRequest.decode(p),
               r.handle == self.handle {
                self.keyRequested(ediv: r.ediv, rand: r.rand)
            }
        })
    }

    /// Asks the client to secure the link (Security Request, Core Vol 3 Part H
    /// 3.6.7): call it when an unencrypted client touches an attribute that
    /// needs encryption (and answer that request with Insufficient
    /// Authentication or Encryption). The client pairs or encrypts with its
    /// bond; `onEvent` tells which.
    /// - Returns: false when nothing was sent: already encrypted, pairing in
    ///   progress, or SMP dead after a timeout.
    @discardableResult
    public func sendSecurityRequest() -> Bool {
        guard !smpDead, !isEncrypted, !isPairing, l2cap.isOpen else { return false }
        var s = SMPResponder(configuration: options.smp, initiator: central, responder: local)
        let actions = s.securityRequest()
        smp = s
        perform(actions)
        return !actions.isEmpty
    }

    /// The link ended: timers stop, SMP is released.
    func linkClosed() {
        host.cancel(tokens)
        tokens = []
        stopTimer()
        l2cap.smpHandler = nil
        smp = nil
        answered = nil
    }

    // MARK: SMP

    private func receive(_ bytes: [UInt8]) {
        guard !smpDead, let code = bytes.first else { return }
        if smp?.isActive != true {
            if code == SMPCode.pairingFailed.rawValue { return }  // never answered
            if code == SMPCode.pairingRequest.rawValue && !options.pairing {
                l2cap.send(cid: CID.smp, SMPPDU.pairingFailed(.pairingNotSupported).encoded)
                onEvent?(.failed(.local(.pairingNotSupported, detail: "pairing is not allowed")))
                return
            }
            smp = SMPResponder(configuration: options.smp, initiator: central, responder: local)
        }
        guard var s = smp else { return }
        let actions = s.receive(bytes)
        smp = s
        if s.isActive { restartTimer() }
        perform(actions)
    }

    private func perform(_ actions: [SMPAction]) {
        for a in actions {
            switch a {
            case let .send(b):
                guard !smpDead else { continue }
                l2cap.send(cid: CID.smp, b)
                restartTimer()
            case .startEncryption:
                break  // the central's to start
            case let .complete(r):
                stopTimer()
                paired(r)
            case let .failed(f):
                stopTimer()
                if case .timeout = f { smpDead = true }
                onEvent?(.failed(f))
            }
        }
    }

    private func paired(_ r: PairingResult) {
        var stored: Bond?, storeError: String?
        if r.bonded, let k = r.longTermKey, let store {
            let b = Bond(identity: r.peerIdentity?.address ?? central, longTermKey: k, irk: r.peerIdentity?.irk,
                         lastAddress: central, role: .peripheral)
            do {
                try store.save(b)
                stored = b
                bond = b
            } catch {
                storeError = error.description
            }
        }
        onEvent?(.paired(r, bond: stored, storeError: storeError))
    }

    private func restartTimer() {
        stopTimer()
        timer = host.schedule(afterMs: timeoutMs) { [weak self] in
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

    // MARK: LE Long Term Key Request and Encryption Change

    /// The key for EDIV and Rand: the pairing's (EDIV 0, Rand 0), else the
    /// client's bond (legacy: the EDIV and Rand we distributed; Secure
    /// Connections: EDIV 0, Rand 0), else none.
    func key(ediv: UInt16, rand: UInt64) -> (key: LongTermKey, bond: Bond?)? {
        if let k = smp?.key(ediv: ediv, rand: rand) { return (k, nil) }
        guard let b = bond ?? store?.bond(for: central, role: .peripheral) else { return nil }
        let k = b.longTermKey
        let matches = k.secureConnections ? ediv == 0 && rand == 0 : k.ediv == ediv && k.rand == rand
        return matches ? (k, b) : nil
    }

    private func keyRequested(ediv: UInt16, rand: UInt64) {
        if let found = key(ediv: ediv, rand: rand) {
            answered = found
            var c = HCI.LELongTermKeyRequestReply()
            c.handle = handle
            c.ltk = found.key.key.bytes
            host.enqueue(c.command) { _ in }
        } else {
            answered = nil
            var c = HCI.LELongTermKeyRequestNegativeReply()
            c.handle = handle
            host.enqueue(c.command) { _ in }
        }
    }

    private func encryptionChanged(_ ec: EncryptionChange) {
        let ok = ec.status == .success && ec.enabled
        if ok {
            isEncrypted = true
            if let a = answered { currentKey = a.key }
        } else if !ec.isRefresh {
            isEncrypted = false
        }
        let viaBond = answered?.bond
        answered = nil
        if var s = smp, s.phase == .awaitingEncryption || s.phase == .securityRequested {
            let wasPairing = s.phase == .awaitingEncryption
            let actions = s.encryptionChanged(status: ec.status.rawValue, enabled: ec.enabled)
            smp = s
            if !wasPairing { stopTimer() }
            if ok { onEvent?(.encrypted(bond: wasPairing ? nil : viaBond)) }
            else if !wasPairing { onEvent?(.encryptionFailed(ec.status)) }
            perform(actions)
            return
        }
        onEvent?(ok ? .encrypted(bond: viaBond) : .encryptionFailed(ec.status))
    }
}
