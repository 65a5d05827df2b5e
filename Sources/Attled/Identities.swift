import BLEWire
import BLETransport
import BLEHCI

/// One identity of ours per controller, under the state directory: the
/// static random address a controller without a public address uses, our
/// IRK, the bonds made with it and what is remembered of the controller.
///
/// Two controllers on one machine (two dongles, or `attled serve` on one and
/// `attled --rgb` on another) must never show one address on the air. So the
/// state directory holds an index (`identities`): each line names a folder
/// and the controller it belongs to, by its key: `public ADDRESS` for a
/// controller with a public address, else its `TransportSpec.controllerKey`
/// (a USB serial number, a bus path, a transport spec). The first identity
/// is the state directory itself, where every file lived before identities
/// were kept per controller, so the bonds made then keep working; the next
/// ones are `id-2`, `id-3` ... A running process holds its identity's `lock`:
/// a second process on a controller with the same key (Root Canal gives each
/// client of one port a controller of its own) takes an identity of its own.
public final class Identities {
    /// The state directory.
    public let root: String
    /// One line of the index: an identity's folder (relative to `root`; "." is `root`) and its controller's key.
    public struct Entry: Hashable, Sendable {
        public var folder: String
        public var key: String
        /// Its folder's path.
        public func path(in root: String) -> String { folder == "." ? root : root + "/" + folder }
    }

    public init(root: String) { self.root = root }

    /// The index, in the order the identities were made (empty before the first).
    public func entries() -> [Entry] {
        guard let raw = SystemIO.readFile(root + "/identities", limit: 1 << 16) else { return [] }
        return String(decoding: raw, as: UTF8.self).split(separator: "\n").compactMap { line in
            let f = line.split(separator: "\t", maxSplits: 1).map(String.init)
            guard f.count == 2, f[0] == "." || (f[0].hasPrefix("id-") && Int(f[0].dropFirst(3)) != nil) else { return nil }
            return Entry(folder: f[0], key: f[1])
        }
    }

    /// Every identity's bond store, with its entry (the state directory
    /// alone, as the first identity, before any was made).
    public func stores() -> [(Entry, BondStore)] {
        let e = entries()
        if e.isEmpty { return [(Entry(folder: ".", key: "(none yet)"), BondStore(directory: root))] }
        return e.map { ($0, BondStore(directory: $0.path(in: root))) }
    }

    /// Takes the identity for the controller `key`: the first of its
    /// identities no other process holds, else a new one. The lock lasts
    /// until `release` (or the process ends).
    /// - Returns: the identity's entry and the descriptor of its lock.
    /// - Throws: `BondStoreError` when the state directory cannot be written.
    func claim(key: String) throws(BondStoreError) -> (Entry, Int32) {
        let top = BondStore(directory: root)
        try top.makeDirectory()
        let indexLock: Int32
        do { indexLock = try SystemIO.lock(root + "/identities.lock") } catch { throw BondStoreError(error) }
        defer { SystemIO.unlock(indexLock) }
        var all = entries()
        for e in all where e.key == key {
            try BondStore(directory: e.path(in: root)).makeDirectory()
            if let fd = try? SystemIO.tryLock(e.path(in: root) + "/lock") { return (e, fd) }
        }
        let used = Set(all.map(\.folder))
        var folder = "."
        if used.contains(".") {
            var n = 2
            while used.contains("id-\(n)") { n += 1 }
            folder = "id-\(n)"
        }
        let e = Entry(folder: folder, key: key)
        try BondStore(directory: e.path(in: root)).makeDirectory()
        let fd: Int32
        do { fd = try SystemIO.tryLock(e.path(in: root) + "/lock") } catch { throw BondStoreError(error) }
        all.append(e)
        do {
            try top.writeAtomically(root + "/identities", Array(all.map { "\($0.folder)\t\($0.key)\n" }.joined().utf8))
        } catch {
            SystemIO.unlock(fd)
            throw error
        }
        return (e, fd)
    }
}

/// The identity of one controller, as `ControllerMemory` for the
/// initialisation: it picks (and locks) the identity once the controller
/// has told its version and address, recalls and keeps the controller's
/// description there, and gives the kept static random address. One per
/// controller for the life of a process: a controller opened again (after
/// a fault) finds its own identity, still held.
public final class ControllerIdentity: ControllerMemory {
    public let identities: Identities
    /// The controller's key when it has no public address (`TransportSpec.controllerKey`).
    public let controllerKey: String
    /// The identity taken, once the controller was initialised (nil: none could be taken or stored).
    public private(set) var entry: Identities.Entry?
    /// Why no identity could be taken (the run goes on with an address made for it).
    public private(set) var problem: String?
    private var lock: Int32?
    private var key: String?

    public init(identities: Identities, controllerKey: String) {
        self.identities = identities
        self.controllerKey = controllerKey
    }

    deinit { release() }

    /// The identity's bonds (nil before the controller was initialised, or when none could be taken).
    public var bonds: BondStore? { entry.map { BondStore(directory: $0.path(in: identities.root)) } }

    /// Lets the identity go (another process may take it).
    public func release() {
        if let fd = lock { SystemIO.unlock(fd) }
        lock = nil
    }

    /// The identity key of a controller: its public address, else its key.
    static func key(publicAddress: BDAddress, controllerKey: String) -> String {
        publicAddress.isZero ? controllerKey : "public \(publicAddress)"
    }

    public func recall(version: LocalVersion?, publicAddress: BDAddress) -> ControllerDescription? {
        let k = Self.key(publicAddress: publicAddress, controllerKey: controllerKey)
        if k != key || lock == nil {
            release()
            entry = nil
            key = k
            do {
                let (e, fd) = try identities.claim(key: k)
                entry = e; lock = fd; problem = nil
            } catch {
                problem = "\(error)"
                return nil
            }
        }
        guard let store = bonds, let raw = store.readRecord(named: "controller") else { return nil }
        return ControllerDescription(text: String(decoding: raw, as: UTF8.self))
    }

    public func remember(_ description: ControllerDescription) {
        try? bonds?.writeRecord(named: "controller", Array(description.text.utf8))
    }

    public func staticAddress() -> BDAddress? {
        bonds?.localStaticAddress(make: HCIHost.makeStaticRandomAddress)
    }
}
