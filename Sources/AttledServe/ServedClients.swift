import BLEWire
import Attled
import BLEGATTServer

/// What `attled serve` keeps of a bonded client between connections (Core
/// Vol 3 Part G 2.5.2, 7.1): its subscriptions (the CCCD bits per
/// characteristic value handle) and the Database Hash of the database it
/// last saw, so a changed database is indicated to it (Service Changed) and
/// its subscriptions come back. One record per client identity beside the
/// bonds (`served-ADDRESS-TYPE`, mode 0600).
public struct ServedClientStore: BondedClientStore, Sendable {
    public let bonds: BondStore

    /// One client's record: what the GATT server keeps of it.
    public typealias Record = BondedClientState

    public init(bonds: BondStore) { self.bonds = bonds }

    static func name(_ identity: DeviceAddress) -> String {
        "served-" + identity.address.description.split(separator: ":").joined(separator: "-") + "-" + (identity.type.isRandom ? "random" : "public")
    }

    /// The client's record; nil when there is none or it is damaged.
    public func load(_ identity: DeviceAddress) -> Record? {
        guard let bytes = bonds.readRecord(named: Self.name(identity)) else { return nil }
        let lines = String(decoding: bytes, as: UTF8.self).split(separator: "\n").map { $0.split(separator: " ").map(String.init) }
        guard lines.first == ["attled-served", "1"] else { return nil }
        var r = Record(hash: [], subscriptions: [:])
        for l in lines.dropFirst() {
            switch l.first {
            case "hash" where l.count == 2: r.hash = Hex.parse(l[1]) ?? []
            case "cccd" where l.count == 3:
                guard let h = UInt16(l[1], radix: 16), let b = UInt16(l[2]) else { return nil }
                r.subscriptions[h] = b
            default: return nil
            }
        }
        return r
    }

    /// Saves (replaces) the client's record.
    /// - Throws: `BondStoreError`.
    public func save(_ identity: DeviceAddress, _ r: Record) throws(BondStoreError) {
        var lines = ["attled-served 1", "hash \(Hex.string(r.hash, separator: ""))"]
        for (h, b) in r.subscriptions.sorted(by: { $0.key < $1.key }) { lines.append("cccd \(Hex.int(h, width: 4)) \(b)") }
        try bonds.writeRecord(named: Self.name(identity), Array((lines.joined(separator: "\n") + "\n").utf8))
    }
}
