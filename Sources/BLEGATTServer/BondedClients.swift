import BLEWire
import BLEGATT

/// What a server keeps of a bonded client between connections: its CCCDs,
/// which persist across connections for a bonded client (Core Vol 3 Part G
/// 3.3.3.3), and the Database Hash of the database it last saw, so a change
/// since is indicated to it with Service Changed (Part G 2.5.2, 7.1).
public struct BondedClientState: Equatable, Sendable {
    /// The Database Hash the client last saw (empty: the database has none).
    public var hash: [UInt8]
    /// The CCCD bits of each characteristic it subscribed to, by value handle.
    public var subscriptions: [UInt16: UInt16]

    /// The state from a Database Hash and the subscriptions.
    public init(hash: [UInt8], subscriptions: [UInt16: UInt16]) { self.hash = hash; self.subscriptions = subscriptions }
}

/// Where a server keeps its bonded clients' state, by the client's identity
/// address. The owner provides it (attled serve: files beside the bonds).
public protocol BondedClientStore {
    /// The state kept for `identity`; nil when there is none (or it is damaged).
    func load(_ identity: DeviceAddress) -> BondedClientState?
    /// Keeps (replaces) the state of `identity`.
    func save(_ identity: DeviceAddress, _ state: BondedClientState) throws
}

extension GATTServerSession {
    /// What `restoreBond` found and did.
    public struct Restored: Equatable, Sendable {
        /// How many characteristics the client is subscribed to again.
        public var subscriptions: Int
        /// The Database Hash differs from the one the client last saw.
        public var databaseChanged: Bool
        /// Service Changed was indicated (or notified) to it: the database
        /// changed and its restored CCCD asks for it.
        public var serviceChangedSent: Bool
    }

    /// The client's bond identity, when it has a bond and the server a store:
    /// where its state is kept.
    private var keptAs: (id: DeviceAddress, store: any BondedClientStore)? {
        guard let id = bondIdentity(), let store = server.bondedClients else { return nil }
        return (id, store)
    }

    /// The link is encrypted with the client's bond: its subscriptions of
    /// an earlier connection come back, and when the database changed since
    /// it last saw it, Service Changed for the whole handle range goes to
    /// it (Core Vol 3 Part G 7.1); then its state is kept again.
    /// - Returns: what was restored; nil when the client has no bond, the
    ///   server no store, or the store nothing for it.
    @discardableResult
    public func restoreBond() -> Restored? {
        guard let kept = keptAs, let state = kept.store.load(kept.id) else { return nil }
        restore(state.subscriptions)
        let changed = state.hash != (server.databaseHash ?? [])
        var sent = false
        if changed, let sc = db.characteristics.first(where: { $0.uuid == GATTUUID.serviceChanged }) {
            sent = send(sc.valueHandle, ServiceChangedValue.wholeDatabase.bytes)
        }
        keepBond()
        return Restored(subscriptions: state.subscriptions.count, databaseChanged: changed, serviceChangedSent: sent)
    }

    /// Keeps what the client's next connection needs (its subscriptions,
    /// this database's hash) under its bond, if it has one and the server a
    /// store. The server does so itself when the client writes a CCCD and
    /// when it detaches; the owner calls it when the client has just bonded.
    public func keepBond() {
        guard let kept = keptAs else { return }
        try? kept.store.save(kept.id, BondedClientState(hash: server.databaseHash ?? [], subscriptions: subscriptions))
    }
}
