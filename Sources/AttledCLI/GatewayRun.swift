#if ATTLED_GATEWAY
import Attled
import AttledGateway
import AttledLED
import AttledProxy

/// `attled gateway`: the command line's options parsed into the library's
/// `GatewayConfig`, the gateway run on the session's stack (the session
/// reopens the controller after a fault and cleans up at the end).
enum GatewayRun {
    /// The gateway's configuration from the options.
    /// - Throws: `RunError` (usage) for bad prefixes.
    static func config(_ opts: Options) throws -> GatewayConfig {
        var c = GatewayConfig(brokerHost: opts.gateway.mqttHost, brokerPort: opts.gateway.mqttPort, topicPrefix: opts.gateway.topicPrefix,
                              discoveryPrefix: opts.gateway.discoveryPrefix, gatewayID: opts.gateway.gatewayID)
        c.username = opts.gateway.mqttUser
        c.passwordFile = opts.gateway.mqttPasswordFile
        c.tlsCAFile = opts.gateway.mqttTLSCA
        c.names = opts.names
        c.addresses = opts.addresses
        c.keeper.maxLinks = opts.gateway.maxLinks
        if opts.gateway.noAcceptList { c.keeper.acceptList = .off(because: "--no-accept-list") }
        c.security = opts.securityPolicy
        c.verbose = opts.trace != .off
        do { _ = try c.topics() } catch { throw RunError("\(error)", .usage) }
        if !opts.proxy.inGateway, let given = ["--api-key-file", "--allow-plaintext", "--max-connections", "--no-mdns"].first(where: { opts.given.contains($0) }) {
            throw RunError("gateway takes \(given) only with --proxy [HOST:]PORT (the gateway's Bluetooth proxy)", .usage)
        }
        return c
    }

    /// The gateway's Bluetooth proxy (`--proxy`), checked before the controller is opened.
    static func proxyConfig(_ opts: Options) throws -> ProxyConfig? {
        opts.proxy.inGateway ? try ProxyRun.config(opts) : nil
    }

    /// The gateway on the session's stack (after `open`, which may have moved the cache and the bonds).
    static func make(_ c: GatewayConfig, _ s: Session) throws -> Gateway {
        guard let stack = s.stack else { throw RunError("no controller", .failure) }
        do {
            let g = try Gateway(config: c, stack: stack, bonds: s.bonds, cache: s.cache,
                                reopen: { [unowned s] in try s.reopenStack() }, close: { [unowned s] _ in s.closeStack() })
            g.log = { CLIConsole.err($0) }
            return g
        } catch let e as GatewayError {
            throw RunError(message(e), .usage)
        }
    }

    /// A gateway error as the command line says it: the option that set what failed.
    static func message(_ e: GatewayError) -> String {
        switch e {
        case let .passwordFileUnreadable(path, errno): return "cannot read --mqtt-password-file \(path): \(SystemIO.errorText(errno))"
        case .configuration, .broker: return e.description
        }
    }

    /// `--status`: the broker's view of the gateways and lamps, on stdout.
    static func status(_ c: GatewayConfig, _ s: Session) throws {
        do {
            let view = try GatewayStatus.read(c, loop: s.loop)
            Console.out(GatewayStatus.text(view))
        } catch let e as GatewayError {
            throw RunError(message(e), .failure)
        }
    }

    /// Runs until SIGINT/SIGTERM; a clean stop is the run's success. With
    /// `proxy`, the gateway is a Bluetooth proxy too, on the same keeper:
    /// the lamps and the proxy's clients share the controller's links.
    static func run(_ g: Gateway, _ s: Session, proxy: ProxyConfig? = nil) throws {
        let p = try proxy.map { try ProxyRun.make($0, keeper: g.keeper, s) }
        defer { p?.stop() }
        do {
            try g.run()
        } catch let e as GatewayError {
            throw RunError(message(e), .usage)
        } catch HCIError.interrupted(let sig) where g.stopped {
            s.sigintIsSuccess = true
            s.quietSuccess = true
            throw HCIError.interrupted(signal: sig)
        }
    }
}
#endif
