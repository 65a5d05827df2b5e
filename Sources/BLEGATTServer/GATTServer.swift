import BLEWire
import BLEATT
import BLEGATT

extension ATTErrorCode {
    /// Value Not Allowed (0x13): a client cleared a Client Supported Features bit.
    public static let valueNotAllowed = ATTErrorCode(rawValue: 0x13)
}

/// A GATT server (Core Vol 3 Part G) on one database shared by every client
/// connected to it: each bearer gets a `GATTServerSession` (its own CCCDs,
/// Client Supported Features, queue of prepared writes, indication in
/// flight). Values written by a client are the database's (all clients see
/// them), except the per-client ones. `update` changes a value and notifies
/// or indicates it to the clients that subscribed.
public final class GATTServer {
    public private(set) var database: GATTServerDatabase
    /// The Database Hash served (Core Vol 3 Part G 7.3), when the database has the characteristic.
    public let databaseHash: [UInt8]?
    /// The longest queue of prepared writes one client may hold (Prepare Queue Full beyond).
    public var prepareQueueLimit = 32
    /// Where bonded clients' subscriptions and last Database Hash are kept
    /// between connections (nil: nothing is kept).
    public var bondedClients: (any BondedClientStore)?

    /// How a value was written.
    public enum WriteOp: String, Sendable { case request, command, prepared }

    /// A write a client made (after it was applied).
    public struct Write: Sendable {
        public let handle: UInt16
        /// The attribute's type: the characteristic UUID for a value, the descriptor's for a descriptor.
        public let uuid: BluetoothUUID
        /// The attribute's whole value after the write.
        public let value: [UInt8]
        public let op: WriteOp
    }

    public enum Event {
        /// A client wrote a value (not a CCCD).
        case write(GATTServerSession, Write)
        /// A client wrote a characteristic's CCCD.
        case subscribed(GATTServerSession, ServedCharacteristic, notify: Bool, indicate: Bool)
        /// A client confirmed the indication of `handle`.
        case confirmed(GATTServerSession, handle: UInt16)
        /// A client was refused an attribute for want of encryption (the
        /// owner asks it to secure the link: an SMP Security Request). Once
        /// per session until the link is encrypted.
        case securityNeeded(GATTServerSession, handle: UInt16)
    }
    public typealias Subscription = Subscribers<Event>.Token
    private var subscribers = Subscribers<Event>()
    private(set) var sessions: [GATTServerSession] = []

    /// - Throws: `SMPCryptoError` when the Database Hash cannot be computed.
    public init(database: GATTServerDatabase) throws {
        var db = database
        var hash: [UInt8]? = nil
        if let c = db.characteristics.first(where: { $0.uuid == GATTUUID.databaseHash }) {
            let h = try db.databaseHash()
            db.set(c.valueHandle, h)
            hash = h
        }
        self.database = db
        databaseHash = hash
    }

    @discardableResult
    public func subscribe(_ handler: @escaping (Event) -> Void) -> Subscription { subscribers.add(handler) }
    public func cancel(_ s: Subscription) { subscribers.remove(s) }
    func emit(_ e: Event) { subscribers.emit(e) }

    /// Serves `bearer` (its `server` from now on).
    /// - Parameters:
    ///   - isEncrypted: whether the link is encrypted now.
    ///   - hasKeys: whether there is a bond with the client (an unencrypted
    ///     client is told Insufficient Encryption then, else Insufficient Authentication).
    ///   - bondIdentity: the identity address of the client's bond, nil while
    ///     there is none: its state is kept in `bondedClients` under it.
    public func attach(_ bearer: ATTBearer, peer: DeviceAddress, isEncrypted: @escaping () -> Bool = { false },
                       hasKeys: @escaping () -> Bool = { false },
                       bondIdentity: @escaping () -> DeviceAddress? = { nil }) -> GATTServerSession {
        let s = GATTServerSession(server: self, bearer: bearer, peer: peer, isEncrypted: isEncrypted, hasKeys: hasKeys,
                                  bondIdentity: bondIdentity)
        bearer.server = s
        sessions.append(s)
        return s
    }

    /// Stops serving a client (its link went down); a bonded client's state is kept.
    public func detach(_ s: GATTServerSession) {
        s.keepBond()
        sessions.removeAll { $0 === s }
        if s.bearer?.server === s { s.bearer?.server = nil }
    }

    /// Changes a shared value; a characteristic value is notified (or
    /// indicated) to every client that subscribed and may read it.
    public func update(_ handle: UInt16, _ value: [UInt8]) {
        database.set(handle, value)
        guard let c = database.characteristic(value: handle) else { return }
        for s in sessions { s.deliver(c, value) }
    }

    func store(_ handle: UInt16, _ value: [UInt8]) { database.set(handle, value) }
}
