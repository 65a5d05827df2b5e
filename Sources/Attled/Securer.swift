import BLEWire
import BLEHCI
import BLEATT
import BLEGATT

/// How a link is secured: when to pair, and what to do about a bond the
/// device has forgotten.
public struct SecurityPolicy: Sendable, Equatable {
    /// When pairing happens.
    public enum Pairing: Sendable, Equatable {
        /// When the device asks (an ATT security error, a Security Request), and
        /// up front with a stored bond.
        case auto
        /// Up front, before anything else (`--pair`).
        case always
        /// Never pair (a stored bond is still used; `--no-pair`).
        case never
    }
    public var pairing: Pairing
    /// A device that forgot the bond is paired with again (false: an error; `--no-repair`).
    public var repairForgottenBond: Bool

    public init(pairing: Pairing = .auto, repairForgottenBond: Bool = true) {
        self.pairing = pairing
        self.repairForgottenBond = repairForgottenBond
    }
}

/// Why securing a link was refused by the policy.
public enum SecuringError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The rule of the `SecurityPolicy` that refused to pair.
    public enum Rule: Sendable, Equatable {
        /// `pairing` is `.never`.
        case neverPair
        /// `repairForgottenBond` is false.
        case keepForgottenBond
    }

    /// The device has forgotten the stored bond of `identity` (`cause`: how
    /// encryption failed) and `rule` forbids pairing with it again; the bond is kept.
    case bondForgotten(cause: String, identity: DeviceAddress, refusedBy: Rule)
    /// The device needs pairing (`reason`) and there is no bond, but the policy never pairs.
    case pairingNotAllowed(reason: String)

    public var description: String {
        switch self {
        case let .bondForgotten(cause, identity, rule):
            let why = rule == .keepForgottenBond ? "does not repair a forgotten bond" : "never pairs"
            return "\(cause); the security policy \(why), so the device is not paired with again (the bond of \(identity) is kept)"
        case .pairingNotAllowed(let reason):
            return "\(reason); the security policy never pairs"
        }
    }
}

/// When and how a run pairs or encrypts a link (issue: encrypted links):
/// up front with `--pair` or with a stored bond; when the device answers an
/// ATT request with Insufficient Authentication (0x05), Insufficient
/// Encryption (0x0F) or Encryption Key Size Too Short (0x0C), then the
/// request is retried once; and when the device sends a Security Request.
/// A stored bond the device has forgotten is removed and the device paired
/// with again, unless the policy says not to (`--no-repair`).
public final class Securer {
    public let policy: SecurityPolicy
    public let store: BondStore?
    public let report: Report
    private var inFlight: Future<Void>?

    public init(policy: SecurityPolicy, store: BondStore?, report: Report) {
        self.policy = policy
        self.store = store
        self.report = report
    }

    /// An ATT error that encryption would cure.
    public static func needsSecurity(_ e: any Error) -> Bool {
        guard case let ATTError.errorResponse(_, _, code) = e else { return false }
        return code == .insufficientAuthentication || code == .insufficientEncryption || code == .encryptionKeySizeTooShort
    }

    /// Answers the peer's Security Requests on this link.
    public func attach(_ link: Link) {
        // --no-pair without a bond: the link answers Pairing Failed, Pairing Not Supported.
        if policy.pairing == .never && store?.bond(for: link.peer) == nil { return }
        link.security.onSecurityRequest = { [weak self, weak link] auth in
            guard let self, let link else { return }
            self.report.progress("the device sent a Security Request (\(auth))")
            self.secure(link).whenComplete { r in
                if case .failure(let e) = r { self.report.progress("answering the Security Request failed: \(e)") }
            }
        }
    }

    /// Security before anything else: `--pair`, or a stored bond. A bond the
    /// device has forgotten is removed here without pairing again at once
    /// (the same address may now be a device that needs no security; one
    /// that does asks, and is paired with then), except with `--no-repair`,
    /// which fails.
    public func upFront(_ link: Link) -> Future<Void> {
        if policy.pairing == .always { return secure(link) }
        guard let bond = store?.bond(for: link.peer) else { return .done }
        let f = encrypt(link, bond).recover { [self] e -> Future<Void> in
            guard case SecurityError.keyMissing = e else { throw e }
            if !policy.repairForgottenBond { throw forgotten(e, bond) }
            store?.remove(bond.identity)
            report.progress("the device has forgotten the bond: removed it; pairing again when the device asks")
            return .done
        }
        inFlight = f
        return f
    }

    private func encrypt(_ link: Link, _ bond: Bond) -> Future<Void> {
        report.begin(.encrypt)
        return link.security.startEncryption(bond.longTermKey).map { [report, store] in
            // Seen at another public or static address: remember it, so it is
            // found there at once. A resolvable private address changes every
            // few minutes and the IRK finds it anyway: no write for it.
            let isPrivate = link.peer.type.isRandom && link.peer.address.randomAddressKind == .resolvable
            if bond.lastAddress != link.peer, !isPrivate {
                var moved = bond
                moved.lastAddress = link.peer
                try? store?.save(moved)
            }
            report.done("with the stored bond (\(bond.longTermKey.secureConnections ? "LE Secure Connections" : "LE legacy"), key size \(bond.longTermKey.keySize))")
        }.recover { [report] e -> Future<Void> in
            report.end()
            throw e
        }
    }

    private func forgotten(_ e: any Error, _ bond: Bond) -> SecuringError {
        .bondForgotten(cause: "\(e)", identity: bond.identity, refusedBy: !policy.repairForgottenBond ? .keepForgottenBond : .neverPair)
    }

    /// Runs `op`; when it fails for want of encryption, secures the link and
    /// runs it once more (unless `--no-pair` and no bond: then a clear error).
    public func retrying<T>(_ link: Link, _ op: @escaping () -> Future<T>) -> Future<T> {
        op().recover { [self] e -> Future<T> in
            // Already encrypted: Just Works cannot give more (MITM, a longer key), so no retry.
            guard Self.needsSecurity(e), link.isConnected, !link.security.isEncrypted else { throw e }
            report.progress("\(e): encrypting")
            return secure(link, because: "\(e): the device needs an encrypted link").flatMap { op() }
        }
    }

    /// Encrypts the link: with the stored bond, else by pairing. Idempotent
    /// while one is in progress. With `--no-pair` and no bond it fails, its
    /// message starting with `because`.
    public func secure(_ link: Link, because why: String = "the device needs pairing") -> Future<Void> {
        if link.security.isEncrypted { return .done }
        if let f = inFlight, !f.isComplete { return f }
        let f: Future<Void>
        if let bond = store?.bond(for: link.peer) {
            f = encrypt(link, bond).recover { [self] e -> Future<Void> in
                guard case SecurityError.keyMissing = e else { throw e }
                if !policy.repairForgottenBond || policy.pairing == .never { throw forgotten(e, bond) }
                store?.remove(bond.identity)
                report.progress("the device has forgotten the bond: removed it; pairing again")
                return pair(link)
            }
        } else {
            if policy.pairing == .never {
                return Future(error: SecuringError.pairingNotAllowed(reason: why))
            }
            f = pair(link)
        }
        inFlight = f
        return f
    }

    /// Pairs and stores the bond when both sides bonded.
    private func pair(_ link: Link) -> Future<Void> {
        report.begin(.pair)
        // Our identity for the peer (it asks for it through the Pairing Response).
        if let id = store?.localIdentity(address: link.stack.info.ownAddress) { link.security.configuration.localIdentity = id }
        return link.security.startPairing().map { [self] r in
            var stored = ""
            if r.bonded, let k = r.longTermKey, let store {
                let id = r.peerIdentity?.address ?? link.peer
                do {
                    try store.save(Bond(identity: id, longTermKey: k, irk: r.peerIdentity?.irk, lastAddress: link.peer))
                    stored = "; bond stored for \(id)"
                } catch {
                    stored = "; bond NOT stored: \(error)"
                }
            }
            report.done("\(r)\(stored)")
        }
    }
}

