import Attled
import AttledJSON

/// `attled bonds`: lists the stored bonds (never their keys): the devices
/// attled paired with as central, then the clients that paired with `attled
/// serve`; or removes one with `--remove ADDR` (an identity address, or a
/// private address one of them resolves), a device's before a client's.
func runBonds(_ opts: Options, environment: [String: String]) -> Int32 {
    let store = BondStore(directory: BondStore.defaultDirectory(environment))
    if let a = opts.removeBond {
        // The type given, else either type.
        let other = DeviceAddress(a.address, a.type.isRandom ? .public : .random)
        let removed = store.remove(a) ?? store.remove(other) ?? store.remove(a, role: .peripheral) ?? store.remove(other, role: .peripheral)
        guard let b = removed else {
            Console.err("attled: error: no bond for \(a.address) in \(store.directory) ('attled bonds' lists them)")
            return ExitCode.notFound.rawValue
        }
        if opts.json {
            Console.out(JSONValue.object([("ok", .bool(true)), ("command", .string("bonds")), ("removed", .string(b.identity.address.description))]).serialized)
        } else if !opts.quiet {
            Console.err("attled: removed the bond with \(b.identity)")
        }
        return 0
    }
    let all = store.all() + store.all(role: .peripheral)
    if opts.json {
        Console.out(JSONValue.object([("ok", .bool(true)), ("command", .string("bonds")), ("directory", .string(store.directory)),
                                 ("bonds", .array(all.map { b in
                                     .object([("role", .string(b.role == .central ? "device" : "client")),
                                              ("identity", .string(b.identity.address.description)),
                                              ("identity_type", .string(b.identity.type.description)),
                                              ("last_address", .string(b.lastAddress.address.description)),
                                              ("secure_connections", .bool(b.longTermKey.secureConnections)),
                                              ("authenticated", .bool(b.longTermKey.authenticated)),
                                              ("key_size", .int(Int64(b.longTermKey.keySize))),
                                              ("irk", .bool(b.irk != nil))])
                                 }))]).serialized)
    } else if all.isEmpty {
        Console.err("attled: no bonds in \(store.directory)")
    } else {
        for b in all { Console.out((b.role == .central ? "" : "client ") + b.description) }
    }
    return 0
}
