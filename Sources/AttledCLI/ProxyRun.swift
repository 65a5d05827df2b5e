import Attled
import AttledProxy
import ESPHomeAPI

/// `attled proxy`: the command line's options parsed into the library's
/// `ProxyConfig`, the proxy run on the session's stack through a keeper of
/// its own (the session reopens the controller after a fault).
enum ProxyRun {
    /// The configuration from the options, checked before the controller is
    /// opened: the key file (private, 32 bytes of base64), and plaintext only
    /// on loopback unless `--allow-plaintext`.
    /// - Throws: `RunError` (usage).
    static func config(_ opts: Options) throws -> ProxyConfig {
        var c = ProxyConfig()
        c.listenHost = opts.proxy.listenHost
        c.listenPort = opts.proxy.listenPort
        c.maxConnections = opts.proxy.maxConnections
        c.announce = !opts.proxy.noMDNS
        if let n = opts.names.first, opts.command == .proxy {
            guard opts.names.count == 1 else { throw RunError("proxy takes one --name (the node's name)", .usage) }
            guard n.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-") }), n.count <= 31 else {
                throw RunError("--name '\(n)': a proxy's node name is at most 31 letters, digits and '-' (as ESPHome's)", .usage)
            }
            c.name = n.lowercased()
            c.friendlyName = n
        }
        if let f = opts.proxy.apiKeyFile {
            c.key = try key(f)
        } else if !opts.proxy.allowPlaintext && !isLoopback(c.listenHost) {
            throw RunError("proxy without --api-key-file speaks plaintext, which anyone on the network can read and use: give --api-key-file FILE (a 32-byte base64 key, as ESPHome's api: encryption: key), listen on loopback (--listen 127.0.0.1:6053), or add --allow-plaintext", .usage)
        }
        c.connectTimeoutMs = opts.connectTimeoutMs ?? c.connectTimeoutMs
        return c
    }

    /// Reads the key file: mode 0600 or stricter, its text the base64 key.
    static func key(_ path: String) throws -> NoisePSK {
        guard let mode = SystemIO.permissions(path) else {
            throw RunError("--api-key-file \(path): cannot read it (does it exist?)", .usage)
        }
        guard mode & 0o077 == 0 else {
            throw RunError("--api-key-file \(path) is readable by others (mode \(String(mode, radix: 8))): the key lets anyone use this radio; chmod 600 \(path)", .usage)
        }
        let bytes: [UInt8]
        do { bytes = try SystemIO.contents(of: path, limit: 4096) } catch {
            throw RunError("--api-key-file \(path): \(error)", .usage)
        }
        let text = String(decoding: bytes.filter { ![0x20, 0x09, 0x0A, 0x0D].contains($0) }, as: UTF8.self)
        do { return try NoisePSK(base64: text) } catch {
            throw RunError("--api-key-file \(path): \(error) (generate one with: head -c 32 /dev/urandom | base64)", .usage)
        }
    }

    static func isLoopback(_ host: String) -> Bool { host.hasPrefix("127.") || host == "::1" || host == "localhost" }

    /// The proxy on `keeper` (its own, or the gateway's), listening.
    /// - Throws: `RunError` (usage) when the address cannot be listened on.
    static func make(_ config: ProxyConfig, keeper: DeviceKeeper, _ s: Session) throws -> Proxy {
        guard let stack = keeper.stack else { throw RunError("no controller", .failure) }
        var c = config
        // The node is keyed by its MAC in Home Assistant: our address on this
        // controller, kept across restarts (the identity under the state directory).
        let own = Array(stack.info.ownAddress.address.bytes.reversed())
        c.macAddress = own
        c.bluetoothAddress = own
        let proxy = Proxy(config: c, keeper: keeper)
        proxy.log = { CLIConsole.err($0) }
        proxy.bonds = s.bonds
        proxy.verbose = s.opts.trace != .off
        if s.opts.trace != .off { proxy.trace = { CLIConsole.err($0) } }
        do { try proxy.start() } catch let e as ListenError { throw RunError(e.description, .usage) }
        return proxy
    }

    /// Runs the proxy until SIGINT/SIGTERM (a clean stop is success).
    static func run(_ config: ProxyConfig, _ s: Session) throws {
        guard let stack = s.stack else { throw RunError("no controller", .failure) }
        var p = DeviceKeeper.Policy()
        p.connectTimeoutMs = config.connectTimeoutMs
        let keeper = DeviceKeeper(stack: stack, policy: p, reopen: { [unowned s] in try s.reopenStack() }, close: { [unowned s] _ in s.closeStack() })
        let proxy = try make(config, keeper: keeper, s)
        defer { proxy.stop() }
        // The controller lost and reopened (a replugged dongle, a transport
        // closed): said, as the gateway says it (with --proxy the gateway's keeper logs).
        keeper.log = { CLIConsole.err("proxy: " + $0) }
        do {
            try keeper.run()
        } catch HCIError.interrupted(let sig) {
            // SIGINT or SIGTERM: the way a proxy ends; its clients' links are let go by the clean-up.
            CLIConsole.err("proxy: stopping (\(sig == SignalWatch.terminate ? "SIGTERM" : "SIGINT"))")
        }
    }
}
