import Attled
import AttledJSON

/// `attled bonds`: lists the stored bonds (never their keys), identity by
/// identity (one per controller: `Identities`): the devices attled paired
/// with as central, then the clients that paired with `attled serve`; or
/// removes one with `--remove ADDR` (an identity address, or a private
/// address one of them resolves), a device's before a client's, from every
/// identity that has one.
func runBonds(_ opts: Options, environment: [String: String]) -> Int32 {
    let root = BondStore.defaultDirectory(environment)
    let stores = Identities(root: root).stores()
    if let a = opts.removeBond {
        // The type given, else either type.
        let other = DeviceAddress(a.address, a.type.isRandom ? .public : .random)
        let removed = stores.compactMap { _, store in
            store.remove(a) ?? store.remove(other) ?? store.remove(a, role: .peripheral) ?? store.remove(other, role: .peripheral)
        }
        guard let b = removed.first else {
            Console.err("attled: error: no bond for \(a.address) in \(root) ('attled bonds' lists them)")
            return ExitCode.notFound.rawValue
        }
        if opts.json {
            Console.out(JSONValue.object([("ok", .bool(true)), ("command", .string("bonds")), ("removed", .string(b.identity.address.description))]).serialized)
        } else if !opts.quiet {
            Console.err("attled: removed the bond with \(b.identity)" + (removed.count > 1 ? " (\(removed.count) identities had one)" : ""))
        }
        return 0
    }
    let all = stores.flatMap { entry, store in (store.all() + store.all(role: .peripheral)).map { (ours(entry, store), $0) } }
    if opts.json {
        Console.out(JSONValue.object([("ok", .bool(true)), ("command", .string("bonds")), ("directory", .string(root)),
                                 ("bonds", .array(all.map { id, b in
                                     .object([("role", .string(b.role == .central ? "device" : "client")),
                                              ("identity", .string(b.identity.address.description)),
                                              ("identity_type", .string(b.identity.type.description)),
                                              ("last_address", .string(b.lastAddress.address.description)),
                                              ("secure_connections", .bool(b.longTermKey.secureConnections)),
                                              ("authenticated", .bool(b.longTermKey.authenticated)),
                                              ("key_size", .int(Int64(b.longTermKey.keySize))),
                                              ("irk", .bool(b.irk != nil)),
                                              ("our_identity", id.json)])
                                 }))]).serialized)
    } else if all.isEmpty {
        Console.err("attled: no bonds in \(root)")
    } else {
        for (id, b) in all { Console.out((b.role == .central ? "" : "client ") + b.description + "; ours: " + id.text) }
    }
    return 0
}

/// Our identity a bond was made with: the address we showed and the controller.
private struct OurIdentity {
    var address: DeviceAddress?
    var controller: String
    var folder: String

    var text: String { "\(address.map(\.description) ?? "address unknown") on \(controller)" }
    var json: JSONValue {
        .object([("address", address.map { .string($0.address.description) } ?? .null),
                 ("address_type", address.map { .string($0.type.description) } ?? .null),
                 ("controller", .string(controller)), ("folder", .string(folder))])
    }
}

private func ours(_ e: Identities.Entry, _ store: BondStore) -> OurIdentity {
    if e.key.hasPrefix("public "), let a = BDAddress(String(e.key.dropFirst(7))) {
        return OurIdentity(address: DeviceAddress(a, .public), controller: "the controller with that public address", folder: e.folder)
    }
    let kept = store.keptStaticAddress().map { DeviceAddress($0, .random) }
    return OurIdentity(address: kept, controller: e.key, folder: e.folder)
}
