import BLEWire
import BLETransport
import BLESMP

/// The role this side played when the bond was made.
public enum BondRole: String, Hashable, Sendable {
    /// We were the central (`attled` connecting to a device): the key is the
    /// one the device distributed (legacy) or derived (LE Secure
    /// Connections), used with LE Enable Encryption.
    case central
    /// We were the peripheral (`attled serve`): the key is the one we
    /// distributed with its EDIV and Rand (legacy) or derived (LE Secure
    /// Connections: EDIV and Rand 0), given to our controller in answer to
    /// LE Long Term Key Request; the peer is the client.
    case peripheral
}

/// A stored bond: what pairing left behind for one peer, to encrypt later
/// links without pairing again. Printing it never shows a key.
public struct Bond: Hashable, Sendable, CustomStringConvertible {
    /// The peer's identity address (its public or static random address, or
    /// the address it paired from when it gave no identity).
    public var identity: DeviceAddress
    /// The key to encrypt with (LE Enable Encryption).
    public var longTermKey: LongTermKey
    /// The peer's Identity Resolving Key: recognises its resolvable private addresses.
    public var irk: SMPSecret?
    /// The address the peer last connected from.
    public var lastAddress: DeviceAddress
    /// The role we played (central by default); the two kinds are filed apart.
    public var role: BondRole

    /// A bond for `identity`, made as `role`.
    public init(identity: DeviceAddress, longTermKey: LongTermKey, irk: SMPSecret?, lastAddress: DeviceAddress, role: BondRole = .central) {
        self.identity = identity; self.longTermKey = longTermKey; self.irk = irk; self.lastAddress = lastAddress; self.role = role
    }

    public var description: String {
        var parts = [identity.description, longTermKey.secureConnections ? "LE Secure Connections" : "LE legacy",
                     longTermKey.authenticated ? "authenticated" : "unauthenticated (Just Works)", "key size \(longTermKey.keySize)"]
        if irk != nil { parts.append("IRK") }
        if lastAddress != identity { parts.append("last seen as \(lastAddress)") }
        if role == .peripheral { parts.append("a client of ours") }
        return parts.joined(separator: ", ")
    }

    /// True when `address` is this peer: its identity, or a resolvable
    /// private address its IRK resolves (Core Vol 6 Part B 1.3.2.3).
    public func matches(_ address: DeviceAddress) -> Bool {
        if address.address == identity.address && address.type.isRandom == identity.type.isRandom { return true }
        guard let irk, address.type.isRandom, address.address.randomAddressKind == .resolvable else { return false }
        let b = address.address.bytes // wire order: hash = bytes[0..<3], prand = bytes[3..<6]
        guard let h = try? SMPCrypto.ah(irk: irk.bytes, prand: Array(b[3..<6])) else { return false }
        return h == Array(b[0..<3])
    }
}

/// Bonds kept on disk, one file per peer identity, under a directory of mode
/// 0700; each file is mode 0600 and written atomically (a temporary file,
/// fsync, rename). The central's bonds are `bond-ADDRESS-TYPE`, the
/// peripheral's (`attled serve`'s clients) `client-ADDRESS-TYPE`, side by
/// side; every lookup names the role (central by default). Keys are stored as hex because the file is the only place
/// they live; nothing else ever prints them.
///
/// Default directory: `$XDG_STATE_HOME/attled/`, as root `/var/lib/attled/`,
/// else `~/.local/state/attled/`.
public struct BondStore: Sendable {
    /// Where the bond files are.
    public let directory: String

    /// A store in `directory` (created on the first save).
    public init(directory: String) { self.directory = directory }

    /// The default directory for this process's environment.
    public static func defaultDirectory(_ env: [String: String]) -> String {
        if let x = env["XDG_STATE_HOME"], !x.isEmpty { return x + "/attled" }
        if SystemIO.userID == 0 { return "/var/lib/attled" }
        if let h = env["HOME"], !h.isEmpty { return h + "/.local/state/attled" }
        return "/tmp/attled-state-\(SystemIO.userID)"
    }

    func path(_ identity: DeviceAddress, role: BondRole = .central) -> String {
        directory + (role == .central ? "/bond-" : "/client-") + identity.address.description.split(separator: ":").joined(separator: "-") + "-" + (identity.type.isRandom ? "random" : "public")
    }

    /// Every bond made as `role` in the store, in file name order; damaged files are skipped.
    public func all(role: BondRole = .central) -> [Bond] {
        let prefix = role == .central ? "bond-" : "client-"
        let names = SystemIO.directoryEntries(directory).filter { $0.hasPrefix(prefix) && !$0.includes(".tmp") }  // not local-irk
        return names.sorted().compactMap { load(path: directory + "/" + $0) }.filter { $0.role == role }
    }

    /// The bond for the peer at `address`, however the device shows up: filed
    /// under that identity address; else a bond whose peer paired from (or was
    /// last seen at) that address, as when a device advertises from a static
    /// random address but distributed its public address as identity; else
    /// one whose IRK resolves a resolvable private address. Only bonds made
    /// as `role`.
    public func bond(for address: DeviceAddress, role: BondRole = .central) -> Bond? {
        // Filed under this identity (the file name is the identity address and its type).
        if let b = load(path: path(address, role: role)), b.role == role { return b }
        let all = all(role: role)
        if let b = all.first(where: { $0.lastAddress.address == address.address && $0.lastAddress.type.isRandom == address.type.isRandom }) { return b }
        return all.first { $0.matches(address) }
    }

    /// Saves (or replaces) a bond.
    /// - Throws: `RunFailure`-style `BondStoreError` naming the file and errno.
    public func save(_ b: Bond) throws(BondStoreError) {
        try makeDirectory()
        var lines = ["attled-bond 1",
                     "identity \(b.identity.address) \(b.identity.type.isRandom ? "random" : "public")",
                     "address \(b.lastAddress.address) \(b.lastAddress.type.isRandom ? "random" : "public")",
                     "ltk \(b.longTermKey.key.revealedHex) \(b.longTermKey.ediv) \(b.longTermKey.rand) \(b.longTermKey.secureConnections ? 1 : 0) \(b.longTermKey.authenticated ? 1 : 0) \(b.longTermKey.keySize)"]
        if let irk = b.irk { lines.append("irk \(irk.revealedHex)") }
        if b.role == .peripheral { lines.append("role peripheral") }
        try writeAtomically(path(b.identity, role: b.role), Array((lines.joined(separator: "\n") + "\n").utf8))
    }

    /// Removes the bond made as `role` of the peer at `address` (identity or
    /// resolved private address).
    /// - Returns: the bond removed, nil when there was none.
    @discardableResult
    public func remove(_ address: DeviceAddress, role: BondRole = .central) -> Bond? {
        guard let b = bond(for: address, role: role) else { return nil }
        SystemIO.remove(path(b.identity, role: role))
        return b
    }

    /// Our own identity, distributed when pairing (Identity Information and
    /// Identity Address Information, Core Vol 3 Part H 3.6.4-3.6.5) so the
    /// peer can recognise us: `address` (public or static random) with an IRK
    /// made once, at random, and kept in `local-irk` (mode 0600).
    /// - Returns: nil when `address` cannot be an identity address or the IRK
    ///   cannot be made or stored (pairing then goes on without it).
    public func localIdentity(address: DeviceAddress) -> LocalIdentity? {
        let isStatic = address.type.isRandom && address.address.randomAddressKind == .static
        guard address.type == .public || isStatic else { return nil }
        let p = directory + "/local-irk"
        if let raw = SystemIO.readFile(p, limit: 64), let v = Hex.parse(String(decoding: raw, as: UTF8.self).split(separator: "\n").first.map(String.init) ?? ""), v.count == 16 {
            return LocalIdentity(irk: SMPSecret(v.reversed()), address: address)
        }
        guard let irk = try? SMPCrypto.random(16) else { return nil }
        do {
            try makeDirectory()
            try writeAtomically(p, Array((SMPSecret(irk).revealedHex + "\n").utf8))
        } catch { return nil }
        return LocalIdentity(irk: SMPSecret(irk), address: address)
    }

    /// Our own static random address, for a controller that has no public
    /// address: made once (Core Vol 6 Part B 1.3.2.1) and kept in
    /// `local-address` (mode 0600) beside the local IRK, so every run shows
    /// the devices the identity they bonded with.
    /// - Returns: nil when it cannot be stored (the run then makes one up for itself).
    public func localStaticAddress(make: () -> BDAddress) -> BDAddress? {
        let p = directory + "/local-address"
        if let a = keptStaticAddress() { return a }
        let a = make()
        do {
            try makeDirectory()
            try writeAtomically(p, Array((a.description + "\n").utf8))
        } catch { return nil }
        return a
    }

    /// The static random address kept in `local-address`, if there is one (nothing is made).
    public func keptStaticAddress() -> BDAddress? {
        guard let raw = SystemIO.readFile(directory + "/local-address", limit: 64),
              let line = String(decoding: raw, as: UTF8.self).split(separator: "\n").first,
              let a = BDAddress(String(line)), a.randomAddressKind == .static else { return nil }
        return a
    }

    // MARK: files

    func load(path p: String) -> Bond? {
        guard let raw = SystemIO.readFile(p, limit: 4096) else { return nil }
        var identity: DeviceAddress?, last: DeviceAddress?, ltk: LongTermKey?, irk: SMPSecret?, role = BondRole.central
        let lines = String(decoding: raw, as: UTF8.self).split(separator: "\n").map { $0.split(separator: " ").map(String.init) }
        guard lines.first == ["attled-bond", "1"] else { return nil }
        func address(_ f: [String]) -> DeviceAddress? {
            guard f.count == 3, let a = BDAddress(f[1]), f[2] == "random" || f[2] == "public" else { return nil }
            return DeviceAddress(a, f[2] == "random" ? .random : .public)
        }
        func key(_ hex: String) -> SMPSecret? {
            guard let v = Hex.parse(hex), v.count == 16 else { return nil }
            return SMPSecret(v.reversed())
        }
        for f in lines.dropFirst() {
            switch f.first {
            case "identity": identity = address(f)
            case "address": last = address(f)
            case "ltk" where f.count == 7:
                guard let k = key(f[1]), let ediv = UInt16(f[2]), let rand = UInt64(f[3]), let size = Int(f[6]), (7...16).contains(size) else { return nil }
                ltk = LongTermKey(key: k, ediv: ediv, rand: rand, secureConnections: f[4] == "1", authenticated: f[5] == "1", keySize: size)
            case "irk" where f.count == 2: irk = key(f[1])
            case "role" where f == ["role", "peripheral"]: role = .peripheral
            default: return nil
            }
        }
        guard let id = identity, let k = ltk else { return nil }
        return Bond(identity: id, longTermKey: k, irk: irk, lastAddress: last ?? id, role: role)
    }

    /// Makes the directory: parents as usual, the store itself private to its owner (0700).
    func makeDirectory() throws(BondStoreError) {
        do {
            try SystemIO.makeDirectories(directory, mode: 0o700)
            try SystemIO.setMode(directory, 0o700)
        } catch { throw BondStoreError(error) }
    }

    /// Writes a file of the store: mode 0600, atomically and flushed to the disk.
    func writeAtomically(_ p: String, _ bytes: [UInt8]) throws(BondStoreError) {
        do { try SystemIO.writeFileAtomically(p, bytes, mode: 0o600, durable: true) } catch { throw BondStoreError(error) }
    }
}

/// A bond file could not be written.
public struct BondStoreError: Error, Hashable, Sendable, CustomStringConvertible {
    public var path: String
    public var errno: Int32
    init(path: String, errno: Int32) { self.path = path; self.errno = errno }
    /// The file operation that failed.
    init(_ e: FileError) { self.init(path: e.path, errno: e.code) }
    public var description: String {
        "cannot store the bond in \(path): \(SystemIO.errorText(errno)) (set XDG_STATE_HOME to a writable directory)"
    }
}
