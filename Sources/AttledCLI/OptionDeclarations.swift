import BLEWire
import BLETransport
import LEDProfile
import BLETrace

/// Every option of attled, once: spellings, argument, effect, commands, help.
/// The order here is the order of `attled --help` within each section.
extension OptionSpec {
    public static let all: [OptionSpec] = transportAndTarget + valuesAndLinks + security + gateway + serving + proxying + output

    /// What a refusal says after "CMD does not take OPTION: " where more
    /// helps than "OPTION only applies to ...": the option that does the
    /// thing there, or why the option means nothing there. Options by their
    /// first spelling; the first row that matches wins.
    static let hints: [Hint] = [
        Hint(["-a"], [.serve], "serve has no target; its own address is --own-address"),
        Hint(["-a", "--service"], [.proxy], "the proxy connects to what its API clients ask for"),
        Hint(["--service"], [.serve], "serve has no target; it advertises a service UUID with --advertise-uuid"),
        Hint(["--pair", "--no-pair", "--no-repair"], [.serve],
             "serve pairs when a client asks (--secure makes the LED need it, --sc-only refuses legacy pairing)"),
        Hint(["--rgb"], [.scan], "scan only lists devices; set the colour with `set --rgb`"),
        Hint(["-a", "--name"], [.bonds], "bonds lists every bond; remove one with `bonds --remove ADDR`"),
        Hint(onController, [.bonds], "bonds opens no controller (it reads the bonds kept on disk)"),
        Hint(onController, [.decode], "decode opens no controller (it reads a capture FILE)"),
    ] + gateway.filter { $0.commands == [.gateway] }.map {
        Hint([$0.names[0]], Set<Options.Command>.every.subtracting([.gateway]),
             "\($0.longName) only applies to gateway, the bridge to MQTT (attled gateway --mqtt HOST[:PORT])")
    }

    /// The options about the controller itself (the transport, our address, the capture).
    static let onController = ["-i", "--extended", "--own-address", "--btsnoop", "--trace"]

    static let proxying: [OptionSpec] = [
        OptionSpec(["--listen"], .value("HOST:PORT") { o, _, v in
            let b = try OptionValue.hostPort("--listen", v, defaultPort: 6053)
            o.proxy.listenHost = b.host; o.proxy.listenPort = UInt16(b.port)
        }, group: .proxy, commands: [.proxy], help: ["where the API listens (default 0.0.0.0:6053; port 0: any free one)"]),
        OptionSpec(["--proxy"], .value("[HOST:]PORT") { o, _, v in
            let b = try OptionValue.hostPort("--proxy", v.contains(":") ? v : ":" + v, defaultPort: 6053)
            o.proxy.listenHost = b.host; o.proxy.listenPort = UInt16(b.port); o.proxy.inGateway = true
        }, group: .proxy, commands: [.gateway],
           help: ["gateway: be a Bluetooth proxy too, on this port (HOST default 0.0.0.0), the lamps", "and the proxy's clients sharing the controller's links"]),
        OptionSpec(["--api-key-file"], .value("FILE") { o, _, v in o.proxy.apiKeyFile = v },
                   group: .proxy, commands: [.proxy, .gateway],
                   help: ["Noise encryption with this key (32 bytes in base64, as ESPHome's", "api: encryption: key); the file must not be readable by others"]),
        OptionSpec(["--allow-plaintext"], .none { o in o.proxy.allowPlaintext = true },
                   group: .proxy, commands: [.proxy, .gateway], help: ["without a key, listen in plaintext beyond loopback"]),
        OptionSpec(["--no-mdns"], .none { o in o.proxy.noMDNS = true }, group: .proxy, commands: [.proxy, .gateway],
                   help: ["do not announce the proxy over mDNS (by default it is, as _esphomelib._tcp,", "through avahi-daemon, so Home Assistant discovers it)"]),
        OptionSpec(["--max-connections"], .value("N") { o, _, v in
            let n = try OptionValue.positive("--max-connections", v)
            guard n <= 9 else { throw UsageError("--max-connections: at most 9 (what ESPHome's proxies allow), not \(n)") }
            o.proxy.maxConnections = n
        }, group: .proxy, commands: [.proxy, .gateway], help: ["at most N Bluetooth connections for API clients (default: what the", "controller allows, at most 9)"]),
    ]

    static let serving: [OptionSpec] = [
        OptionSpec(["--gatt"], .value("FILE") { o, _, v in o.serve.gattFile = v },
                   group: .serve, commands: [.serve],
                   help: ["serve this database (attled gatt --json --values of a device: a clone), handle for handle"]),
        OptionSpec(["--advertise-name"], .value("NAME") { o, _, v in
            guard !v.isEmpty, v.utf8.count <= 248 else { throw UsageError("--advertise-name must be 1 to 248 bytes") }
            o.serve.advertiseName = v
        }, group: .serve, commands: [.serve], help: ["the name to advertise (default: --name, or the Device Name)"]),
        OptionSpec(["--advertise-uuid"], .value("UUID") { o, flag, v in o.serve.advertiseUUIDs.append(try OptionValue.uuid(flag, v)) },
                   group: .serve, commands: [.serve],
                   help: ["a service UUID to advertise, repeatable (default: the first primary one that fits)"]),
        OptionSpec(["--secure"], .none { o in o.serve.secure = true }, group: .serve, commands: [.serve],
                   help: ["put the LED characteristics and their CCCDs behind encryption (a client pairs)"]),
        OptionSpec(["--sc-only"], .none { o in o.serve.secureConnectionsOnly = true }, group: .serve, commands: [.serve],
                   help: ["pair with LE Secure Connections only (legacy pairing refused)"]),
        OptionSpec(["--conn-interval"], .value("MIN-MAX") { o, flag, v in o.serve.connectionParameters = try OptionValue.interval(flag, v) },
                   group: .serve, commands: [.serve],
                   help: ["ask each central for this connection interval in ms (7.5-4000) once it connected"]),
    ]

    static let transportAndTarget: [OptionSpec] = [
        OptionSpec(["-i", "--transport", "--device"], .value("SPEC") { o, _, v in
            do { o.transport = try TransportSpec.parse(v) } catch let e as TransportError { throw UsageError(e.description) }
        }, group: .transport, commands: .controller, help: ["hciN | serial:/dev/ttyACM0[,BAUD][,rtscts] | tcp:HOST:PORT | unix:/PATH"]),

        OptionSpec(["--name"], .value("NAME") { o, _, v in
            guard !v.isEmpty, v.utf8.count <= 248 else { throw UsageError("--name must be 1 to 248 bytes") }
            o.names.append(v)
        }, group: .target, commands: .controller, help: ["advertised local name (complete, or shortened prefix); serve: the name to advertise;", "proxy: the node's name (default attled-proxy)"]),
        OptionSpec(["--service"], .value("UUID") { o, flag, v in o.service = try OptionValue.uuid(flag, v) },
                   group: .target, commands: .run, help: ["advertised service UUID"]),
        OptionSpec(["-a", "--address"], .value("ADDR") { o, _, v in o.addresses.append(try OptionValue.address(v)) },
                   group: .target, commands: .device, help: ["connect directly, no scan (ADDR[,public|,random]; default random)"]),

        OptionSpec(["--profile"], .value("pycom|particle|harness") { o, _, v in
            guard let p = LEDProfile.named(v) else { throw UsageError("--profile: unknown profile '\(v)' (pycom, particle, harness)") }
            o.led.profile = p
        }, group: .profile, commands: Set<Options.Command>.led.union([.gatt, .read, .write, .serve]),
           help: ["a built-in profile, not the detected one; serve: the board to play;",
                  "gatt, read, write without a target: a device advertising its service"]),
        OptionSpec(["--red"], .value("UUID") { o, flag, v in o.led.red = try OptionValue.uuid(flag, v) },
                   group: .profile, commands: .led, help: ["the red characteristic of another RGB device"]),
        OptionSpec(["--green"], .value("UUID") { o, flag, v in o.led.green = try OptionValue.uuid(flag, v) },
                   group: .profile, commands: .led, help: ["its green characteristic"]),
        OptionSpec(["--blue"], .value("UUID") { o, flag, v in o.led.blue = try OptionValue.uuid(flag, v) },
                   group: .profile, commands: .led, help: ["its blue characteristic"]),
    ]

    static let valuesAndLinks: [OptionSpec] = [
        OptionSpec(["--rgb", "--color", "--colour"], .value("R,G,B") { o, _, v in
            switch RGB.parse(v) {
            case .success(let c): o.led.rgb = c
            case .failure(let e): throw UsageError("--rgb: \(e.message)")
            }
        }, group: .values, commands: [.set], help: ["colour: 255,0,0 | #ff0000 | red, green, blue, white, off, ..."]),
        OptionSpec(["--value"], .value("HEX") { o, _, v in
            guard let b = Hex.parse(v), !b.isEmpty, b.count <= 512 else { throw UsageError("--value: '\(v)' is not 1 to 512 hex bytes (e.g. 01 or 0x0103)") }
            o.value = b
        }, group: .values, commands: [.send, .write], help: ["bytes for send/write, up to 512 (01, 0x0103, \"01 03\")"]),
        OptionSpec(["--char", "--characteristic"], .value("C") { o, _, v in o.characteristics.append(try CharacteristicRef.parse(v)) },
                   group: .values, commands: [.get, .send, .listen, .read, .write],
                   help: ["0x10 or 0x0010 (a handle, 1-4 hex digits), a UUID (2a37 or 128-bit), or red|green|blue;",
                          "for read/write/listen on any device, send/get on an LED (default:",
                          "the profile's); --service UUID narrows a UUID to that service"]),
        OptionSpec(["--without-response"], .none { o in o.gattTool.withoutResponse = true },
                   group: .values, commands: [.write], help: ["write: use Write Command"]),
        OptionSpec(["--values"], .none { o in o.gattTool.values = true },
                   group: .values, commands: [.gatt], help: ["gatt: read every readable characteristic and descriptor"]),
        OptionSpec(["--count"], .value("N") { o, _, v in o.count = try OptionValue.positive("--count", v) },
                   group: .values, commands: [.listen], help: ["listen: stop after N notifications"]),

        OptionSpec(["--passive"], .none { o in o.passive = true },
                   group: .scanning, commands: .run, help: ["passive scanning (no scan requests)"]),
        OptionSpec(["--extended"], .none { o in o.extendedScan = true },
                   group: .scanning, commands: .controller, help: ["use the extended scan/connect (serve: advertising) commands when the controller lists them"]),
        OptionSpec(["--own-address"], .value("ADDR") { o, _, v in
            guard let a = BDAddress(v), a.randomAddressKind == .static else {
                throw UsageError("--own-address: '\(v)' is not a static random address (6 bytes, the first hex digit C-F: C0:11:22:33:44:55)")
            }
            o.ownAddress = a
        }, group: .scanning, commands: .controller, help: ["our static random address (default: the controller's public",
                                                       "address, else one made once and kept with the bonds)"]),

        OptionSpec(["-t", "--timeout"], .value("SECONDS") { o, flag, v in o.timeoutMs = try OptionValue.ms(flag, v, scale: 1000) },
                   group: .timing, commands: .oneShot, help: ["deadline for the whole run (scan: how long to scan)"]),
        OptionSpec(["--connect-timeout"], .value("MS") { o, flag, v in o.connectTimeoutMs = try OptionValue.ms(flag, v, scale: 1) },
                   group: .timing, commands: .linked, help: ["deadline for connecting (default 5000)"]),
        OptionSpec(["--att-timeout"], .value("MS") { o, flag, v in o.attTimeoutMs = try OptionValue.ms(flag, v, scale: 1) },
                   group: .timing, commands: .linkedOneShot, help: ["deadline per ATT transaction (default 3000)"]),

        OptionSpec(["--no-cache"], .none { o in o.noCache = true },
                   group: .cache, commands: .connecting, help: ["do not use or update the GATT/address cache"]),
        OptionSpec(["--trust-cache"], .none { o in o.trustCache = true },
                   group: .cache, commands: .led, help: ["skip the Database Hash check of cached handles (saves a round trip)"]),
    ]

    static let security: [OptionSpec] = [
        OptionSpec(["--pair"], .none { o in o.pair = .always },
                   group: .security, commands: .securing, help: ["pair (or encrypt with the stored bond) before anything else"]),
        OptionSpec(["--no-pair"], .none { o in o.pair = .never },
                   group: .security, commands: .securing,
                   help: ["never pair; by default attled pairs (LE Secure Connections, Just",
                          "Works; legacy if the device has no SC) when the device answers",
                          "Insufficient Authentication/Encryption or sends a Security Request,",
                          "and encrypts up front with a stored bond"]),
        OptionSpec(["--no-repair"], .none { o in o.noRepair = true },
                   group: .security, commands: .securing, help: ["when the device has forgotten the bond, fail instead of pairing again"]),
        OptionSpec(["--remove"], .value("ADDR") { o, _, v in
            guard let a = BDAddress(v.split(separator: ",").first.map(String.init) ?? "") else {
                throw UsageError("--remove: '\(v)' is not an address like C0:11:22:33:44:55[,random|,public]")
            }
            o.removeBond = DeviceAddress(a, v.hasSuffix(",public") ? .public : .random)
        }, group: .security, commands: [.bonds],
           help: ["bonds: remove the bond of ADDR[,public|,random] (an identity address,", "or a private address it resolves)"]),
    ]
}

extension OptionSpec {
    static let gateway: [OptionSpec] = [
        OptionSpec(["--mqtt"], .value("HOST[:PORT]") { o, _, v in
            let b = try OptionValue.broker(v)
            o.gateway.mqttHost = b.host; o.gateway.mqttPort = b.port
        }, group: .gateway, commands: [.gateway], help: ["the MQTT broker (default port 1883)"]),
        OptionSpec(["--mqtt-user"], .value("U") { o, _, v in o.gateway.mqttUser = v },
                   group: .gateway, commands: [.gateway], help: ["the broker's user name"]),
        OptionSpec(["--mqtt-password-file"], .value("F") { o, _, v in o.gateway.mqttPasswordFile = v },
                   group: .gateway, commands: [.gateway], help: ["the broker's password, read from the file F (needs --mqtt-user)"]),
        OptionSpec(["--mqtt-tls-ca"], .value("PEM") { o, _, v in o.gateway.mqttTLSCA = v },
                   group: .gateway, commands: [.gateway], help: ["TLS to the broker, its certificate checked against the CA file PEM"]),
        OptionSpec(["--topic-prefix"], .value("P") { o, _, v in o.gateway.topicPrefix = v },
                   group: .gateway, commands: [.gateway], help: ["topic prefix (default attled)"]),
        OptionSpec(["--discovery-prefix"], .value("P") { o, _, v in o.gateway.discoveryPrefix = v },
                   group: .gateway, commands: [.gateway], help: ["Home Assistant discovery prefix (default homeassistant)"]),
        OptionSpec(["--gateway-id"], .value("ID") { o, _, v in o.gateway.gatewayID = v },
                   group: .gateway, commands: [.gateway], help: ["this gateway's id in topics (default gateway)"]),
        OptionSpec(["--status"], .none { o in o.gateway.status = true },
                   group: .gateway, commands: [.gateway],
                   help: ["print who holds which lamp and why, from the broker, and exit", "(no controller needed)"]),
        OptionSpec(["--max-links"], .value("N") { o, _, v in o.gateway.maxLinks = try OptionValue.positive("--max-links", v) },
                   group: .gateway, commands: [.gateway], help: ["at most N links at once"]),
        OptionSpec(["--no-accept-list"], .none { o in o.gateway.noAcceptList = true },
                   group: .gateway, commands: [.gateway, .ui],
                   help: ["gateway, ui: reconnect by scanning, not from the controller's Filter Accept List"]),
    ]

    static let output: [OptionSpec] = [
        OptionSpec(["--json"], .none { o in o.json = true }, group: .output,
                   commands: Set<Options.Command>.controller.union([.bonds]),
                   help: ["machine-readable output on stdout (serve: one JSON object per event;", "gateway: one object if it fails; ui: one at the end)"]),
        OptionSpec(["-q", "--quiet"], .none { o in o.quiet = true }, group: .output, commands: .every, help: ["no progress lines on stderr"]),
        OptionSpec(["--trace"], .inline("[=hex|=keys]") { o, v in
            switch v {
            case nil: o.trace = .decoded
            case "hex"?: o.trace = .hex
            case "keys"?: o.trace = .decoded; o.traceKeys = true
            default: throw UsageError("--trace takes no value, =hex or =keys")
            }
        }, group: .output, commands: Set<Options.Command>.controller.union([.decode]),
           help: ["decode every packet on stderr (=hex adds raw bytes; keys are", "masked unless =keys); decode: =hex adds raw bytes"]),
        OptionSpec(["--btsnoop"], .value("FILE") { o, _, v in o.btsnoop = v },
                   group: .output, commands: .controller, help: ["write a btsnoop capture (Wireshark, btmon)"]),
        OptionSpec(["--filter"], .value("att|hci|adv|l2cap") { o, _, v in
            guard let l = PacketLayer(rawValue: v) else { throw UsageError("--filter must be att, hci, adv or l2cap") }
            o.filter = l
        }, group: .output, commands: [.decode], help: ["decode: only the packets of that layer (l2cap includes ATT)"]),
        OptionSpec(["-h", "--help"], .none { o in o.command = .help }, group: .output, commands: .every, endsParsing: true,
                   help: ["this text; after a command, that command's options"]),
        OptionSpec(["--version"], .none { o in o.command = .version }, group: .output, commands: .every, endsParsing: true,
                   help: ["attled's version"]),
    ]
}
