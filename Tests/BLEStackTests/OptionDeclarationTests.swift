import Testing
@testable import BLEWire
@testable import BLETrace
@testable import LEDProfile
@testable import AttledCLI

private func parse(_ args: [String]) throws -> Options { try Options.parse(args, environment: [:]) }

private func message(_ line: String) -> String? {
    do { _ = try parse(line.split(separator: " ").map(String.init)); return nil } catch let e as UsageError { return e.message } catch { return nil }
}

/// One option's sample: the rest of a valid command line, the value to give
/// (nil for a switch), and what the parse must hold.
private struct Sample: @unchecked Sendable {
    let context: String
    let value: String?
    let check: (Options) -> Bool
    init(_ context: String, _ value: String? = nil, _ check: @escaping (Options) -> Bool) {
        self.context = context; self.value = value; self.check = check
    }
}

private let addr = BDAddress("C0:11:22:33:44:55")!

/// A sample of every option, by its first spelling (the values today's parser gave).
private let samples: [String: Sample] = [
    "-i": Sample("scan", "hci1") { $0.transport == .userChannel(index: 1) },
    "--name": Sample("get", "Lamp") { $0.names == ["Lamp"] },
    "--service": Sample("get", "180d") { $0.service == BluetoothUUID(uint16: 0x180d) },
    "-a": Sample("get", "C0:11:22:33:44:55,public") { $0.addresses == [DeviceAddress(addr, .public)] },
    "--profile": Sample("get", "particle") { $0.led.profile == .particle },
    "--red": Sample("get --service 1800 --green 2a02 --blue 2a03", "2a01") { $0.led.red == BluetoothUUID(uint16: 0x2a01) },
    "--green": Sample("get --service 1800 --red 2a01 --blue 2a03", "2a02") { $0.led.green == BluetoothUUID(uint16: 0x2a02) },
    "--blue": Sample("get --service 1800 --red 2a01 --green 2a02", "2a03") { $0.led.blue == BluetoothUUID(uint16: 0x2a03) },
    "--rgb": Sample("set", "0,128,255") { $0.led.rgb == RGB(0, 128, 255) },
    "--value": Sample("send", "0x0103") { $0.value == [1, 3] },
    "--char": Sample("read", "0x002a") { $0.characteristics == [.handle(0x2a)] },
    "--without-response": Sample("write --char 0x10 --value 01") { $0.gattTool.withoutResponse },
    "--values": Sample("gatt") { $0.gattTool.values },
    "--count": Sample("listen", "3") { $0.count == 3 },
    "--passive": Sample("scan") { $0.passive },
    "--extended": Sample("scan") { $0.extendedScan },
    "--own-address": Sample("get", "C0:11:22:33:44:55") { $0.ownAddress == addr },
    "-t": Sample("scan", "2.5") { $0.timeoutMs == 2500 },
    "--connect-timeout": Sample("get", "700") { $0.connectTimeoutMs == 700 },
    "--att-timeout": Sample("get", "900") { $0.attTimeoutMs == 900 },
    "--no-cache": Sample("get") { $0.noCache },
    "--trust-cache": Sample("get") { $0.trustCache },
    "--pair": Sample("get") { $0.pair == .always },
    "--no-pair": Sample("get") { $0.pair == .never },
    "--no-repair": Sample("get") { $0.noRepair },
    "--remove": Sample("bonds", "C0:11:22:33:44:55,public") { $0.removeBond == DeviceAddress(addr, .public) },
    "--mqtt": Sample("gateway", "broker.lan:8883") { $0.gateway.mqttHost == "broker.lan" && $0.gateway.mqttPort == 8883 },
    "--mqtt-user": Sample("gateway --mqtt h", "u") { $0.gateway.mqttUser == "u" },
    "--mqtt-password-file": Sample("gateway --mqtt h --mqtt-user u", "/run/pw") { $0.gateway.mqttPasswordFile == "/run/pw" },
    "--mqtt-tls-ca": Sample("gateway --mqtt h", "/etc/ca.pem") { $0.gateway.mqttTLSCA == "/etc/ca.pem" },
    "--topic-prefix": Sample("gateway --mqtt h", "home") { $0.gateway.topicPrefix == "home" },
    "--discovery-prefix": Sample("gateway --mqtt h", "ha") { $0.gateway.discoveryPrefix == "ha" },
    "--gateway-id": Sample("gateway --mqtt h", "gw2") { $0.gateway.gatewayID == "gw2" },
    "--max-links": Sample("gateway --mqtt h", "3") { $0.gateway.maxLinks == 3 },
    "--status": Sample("gateway --mqtt h") { $0.gateway.status },
    "--no-accept-list": Sample("ui") { $0.gateway.noAcceptList },
    "--gatt": Sample("serve", "/tmp/db.json") { $0.serve.gattFile == "/tmp/db.json" },
    "--advertise-name": Sample("serve --profile pycom", "Lamp") { $0.serve.advertiseName == "Lamp" },
    "--advertise-uuid": Sample("serve --profile pycom", "180f") { $0.serve.advertiseUUIDs == [BluetoothUUID(uint16: 0x180F)] },
    "--secure": Sample("serve --profile pycom") { $0.serve.secure },
    "--sc-only": Sample("serve --profile pycom") { $0.serve.secureConnectionsOnly },
    "--conn-interval": Sample("serve --profile pycom", "30-50") { $0.serve.connectionParameters?.intervalMax == 40 },
    "--listen": Sample("proxy", "127.0.0.1:16053") { $0.proxy.listenHost == "127.0.0.1" && $0.proxy.listenPort == 16053 },
    "--proxy": Sample("gateway --mqtt h", "6053") { $0.proxy.inGateway && $0.proxy.listenHost == "0.0.0.0" && $0.proxy.listenPort == 6053 },
    "--api-key-file": Sample("proxy", "/etc/attled/api.key") { $0.proxy.apiKeyFile == "/etc/attled/api.key" },
    "--allow-plaintext": Sample("proxy") { $0.proxy.allowPlaintext },
    "--no-mdns": Sample("proxy") { $0.proxy.noMDNS },
    "--max-connections": Sample("proxy", "3") { $0.proxy.maxConnections == 3 },
    "--json": Sample("get") { $0.json },
    "-q": Sample("get") { $0.quiet },
    "--trace": Sample("get", "hex") { $0.trace == .hex && !$0.traceKeys },
    "--btsnoop": Sample("get", "/tmp/c.btsnoop") { $0.btsnoop == "/tmp/c.btsnoop" },
    "--filter": Sample("decode cap.btsnoop", "att") { $0.filter == .att },
    "-h": Sample("get") { $0.command == .help && $0.helpTopic == .get },
    "--version": Sample("") { $0.command == .version },
]

@Suite("Option declarations")
struct OptionDeclarationTests {
    @Test("no two declarations share a spelling, and every spelling is a flag")
    func uniqueSpellings() {
        let names = OptionSpec.all.flatMap(\.names)
        #expect(Set(names).count == names.count)
        for n in names { #expect(n.hasPrefix("-") && n.count > 1, "\(n)") }
    }

    @Test("every option, with every spelling, is in the generated help")
    func optionsInHelp() {
        for spec in OptionSpec.all {
            #expect(!spec.help.isEmpty, "\(spec.names[0]) has no help")
            #expect(Usage.help.contains("  " + spec.synopsis), "\(spec.synopsis)")
            for line in spec.help { #expect(Usage.help.contains(line), "\(line)") }
        }
    }

    @Test("every command has help, in the help text and (but help and version) in the usage line")
    func commandsInHelp() {
        for c in Options.Command.allCases where c != .version {
            let spec = CommandSpec.of(c)
            #expect(spec?.help.isEmpty == false, "\(c)")
            #expect(spec.map { Usage.help.contains("  " + $0.synopsis) } == true, "\(c)")
            if c != .help { #expect(Usage.line.contains(c.rawValue), "\(c)") }
        }
        #expect(Usage.line == "usage: attled [set|scan|get|send|listen|gatt|read|write|ui|bonds|gateway|serve|proxy|decode] [-i TRANSPORT] [--name NAME | --service UUID | --address ADDR] [--rgb R,G,B] [options]")
    }

    /// The commands with options of their own. A property, not a closure in
    /// the attribute: Swift 6.0.3 (Debian 13) crashes type-checking a
    /// closure in @Test's arguments.
    static let commandsWithOptions = Options.Command.allCases.filter { $0 != .help && $0 != .version }

    @Test("a command's help lists the options that apply to it, and only those", arguments: commandsWithOptions)
    func commandHelp(_ c: Options.Command) {
        let text = Usage.text(for: c)
        #expect(text.hasPrefix("usage: attled \(CommandSpec.of(c)!.synopsis)"))
        for spec in OptionSpec.all {
            let listed = text.contains("\n  " + spec.synopsis + " ") || text.contains("\n  " + spec.synopsis + "\n")
            #expect(listed == spec.commands.contains(c), "\(c): \(spec.names[0])")
        }
    }

    @Test("every option has a sample, which parses to today's value with each spelling, as --flag value and --flag=value")
    func samplesParse() throws {
        for spec in OptionSpec.all {
            guard let s = samples[spec.names[0]] else { Issue.record("no sample for \(spec.names[0])"); continue }
            let context = s.context.split(separator: " ").map(String.init)
            for name in spec.names {
                var forms: [[String]] = []
                switch spec.argument {
                case .none: forms = [[name]]
                case .inline: forms = [[name + "=" + s.value!]]
                case .value:
                    forms = [[name, s.value!]]
                    if name.hasPrefix("--") { forms.append([name + "=" + s.value!]) }
                }
                for f in forms {
                    let o = try parse(context + f)
                    #expect(s.check(o), "\(f)")
                    // Before the command, too (but --help and --version end parsing there).
                    if !spec.endsParsing { #expect(s.check(try parse(f + context)), "\(f) first") }
                }
            }
        }
    }

    @Test("help topics: help CMD and CMD --help; --help alone is the whole text")
    func helpTopics() throws {
        #expect(try parse(["help", "gateway"]).helpTopic == .gateway)
        #expect(try parse(["gateway", "--help"]).helpTopic == .gateway)
        #expect(try parse(["--help"]).helpTopic == nil)
        #expect(try parse(["--rgb", "red", "--help"]).helpTopic == nil)
        #expect(try parse(["help", "bogus"]).command == .help)
        #expect(Usage.text(for: nil) == Usage.help)
        #expect(Usage.text(for: .gateway).contains("--mqtt HOST[:PORT]") && !Usage.text(for: .gateway).contains("--rgb"))
        #expect(!Usage.text(for: .gateway).contains("Exit codes") && Usage.help.contains("Exit codes"))
    }

    /// What each command needs to parse, but the options under test: flag
    /// and value (decode: its FILE).
    static let needs: [Options.Command: [[String]]] = [
        .set: [["--rgb", "red"]], .send: [["--value", "01"]], .read: [["--char", "0x10"]],
        .write: [["--char", "0x10"], ["--value", "01"]], .gateway: [["--mqtt", "h"]],
        .serve: [["--profile", "pycom"]], .decode: [["cap.btsnoop"]],
    ]
    /// What an option needs beside it where it applies.
    static let companions: [String: [String]] = [
        "--red": ["--service", "1800", "--green", "2a02", "--blue", "2a03"],
        "--green": ["--service", "1800", "--red", "2a01", "--blue", "2a03"],
        "--blue": ["--service", "1800", "--red", "2a01", "--green", "2a02"],
        "--mqtt-password-file": ["--mqtt-user", "u"],
    ]
    /// A command's need an option takes the place of (serve plays --gatt or --profile).
    static let replaces: [String: String] = ["--gatt": "--profile"]
    /// Every option but --help and --version (which end parsing and apply everywhere).
    static let walked = OptionSpec.all.filter { !$0.endsParsing }

    /// The command line for `spec` given to `c`: what `c` needs, what the
    /// option needs where it applies, and the option with its sample value.
    static func line(_ c: Options.Command, _ spec: OptionSpec) -> [String]? {
        guard let s = samples[spec.names[0]] else { return nil }
        let applies = spec.commands.contains(c)
        var args = [c.rawValue]
        for need in needs[c] ?? [] where !(spec.names.contains(need[0]) || replaces[spec.names[0]] == need[0]) { args += need }
        if applies { args += companions[spec.names[0]] ?? [] }
        switch spec.argument {
        case .none: args.append(spec.names[0])
        case .inline: args.append(spec.names[0] + "=" + s.value!)
        case .value: args += [spec.names[0], s.value!]
        }
        return args
    }

    @Test("every option, given to every command: parsed where it applies, else refused naming the command and the option",
          arguments: commandsWithOptions)
    func everyPair(_ c: Options.Command) {
        for spec in Self.walked {
            guard let args = Self.line(c, spec) else { Issue.record("no sample for \(spec.names[0])"); continue }
            let text = args.joined(separator: " ")
            var parsed: Options?
            var refusal: String?
            do { parsed = try parse(args) } catch let e as UsageError { refusal = e.message } catch { refusal = "\(error)" }
            if spec.commands.contains(c) {
                #expect(refusal == nil, "\(text): \(refusal ?? "")")
                let took = parsed.map { samples[spec.names[0]]!.check($0) } ?? false
                #expect(took, "\(text)")
            } else {
                let wasParsed = parsed != nil
                #expect(!wasParsed, "\(text) parsed")
                #expect(refusal?.hasPrefix("\(c.rawValue) does not take \(spec.longName): ") == true, "\(text): \(refusal ?? "")")
                #expect(refusal == spec.refusal(for: c), "\(text)")
            }
        }
    }

    @Test("refusals name the command and the option, and where another option does the thing, say which")
    func refusals() {
        // The issue's case: serve has no target.
        #expect(message("serve --profile pycom --address C0:11:22:33:44:55")
                == "serve does not take --address: serve has no target; its own address is --own-address")
        #expect(message("serve --profile pycom -a C0:11:22:33:44:55")
                == "serve does not take --address: serve has no target; its own address is --own-address")
        #expect(message("serve --profile pycom --service 180d")
                == "serve does not take --service: serve has no target; it advertises a service UUID with --advertise-uuid")
        #expect(message("serve --profile pycom --pair")
                == "serve does not take --pair: serve pairs when a client asks (--secure makes the LED need it, --sc-only refuses legacy pairing)")
        #expect(message("scan --rgb red") == "scan does not take --rgb: scan only lists devices; set the colour with `set --rgb`")
        #expect(message("bonds --address C0:11:22:33:44:55") == "bonds does not take --address: bonds lists every bond; remove one with `bonds --remove ADDR`")
        #expect(message("bonds -i hci0") == "bonds does not take --transport: bonds opens no controller (it reads the bonds kept on disk)")
        #expect(message("bonds --trace") == "bonds does not take --trace: bonds opens no controller (it reads the bonds kept on disk)")
        #expect(message("decode cap.btsnoop --btsnoop x") == "decode does not take --btsnoop: decode opens no controller (it reads a capture FILE)")
        for flag in ["--mqtt h", "--mqtt-user u", "--mqtt-password-file f", "--mqtt-tls-ca ca", "--topic-prefix p", "--discovery-prefix p", "--gateway-id g", "--max-links 2"] {
            let name = String(flag.split(separator: " ")[0])
            #expect(message("ui " + flag) == "ui does not take \(name): \(name) only applies to gateway, the bridge to MQTT (attled gateway --mqtt HOST[:PORT])")
        }
        // Where no hint fits: where the option applies.
        #expect(message("get --rgb red") == "get does not take --rgb: --rgb only applies to set")
        #expect(message("get --colour red") == "get does not take --rgb: --rgb only applies to set")
        #expect(message("get --values") == "get does not take --values: --values only applies to gatt")
        #expect(message("read --char 0x10 --without-response") == "read does not take --without-response: --without-response only applies to write")
        #expect(message("get --remove C0:11:22:33:44:55") == "get does not take --remove: --remove only applies to bonds")
        #expect(message("get --no-accept-list") == "get does not take --no-accept-list: --no-accept-list only applies to ui and gateway")
        #expect(message("set --rgb red --conn-interval 30-50") == "set does not take --conn-interval: --conn-interval only applies to serve")
        #expect(message("ui --timeout 5") == "ui does not take --timeout: --timeout only applies to set, scan, get, send, listen, gatt, read and write")
        // Checked before what the command needs: the misapplied option is what is wrong.
        #expect(message("send --rgb red") == "send does not take --rgb: --rgb only applies to set")
        #expect(message("serve --address C0:11:22:33:44:55") == "serve does not take --address: serve has no target; its own address is --own-address")
        #expect(message("--rgb red --topic-prefix x --count 2 --value 01") == "set does not take --value: --value only applies to send and write")
        // A value that does not parse is reported as before, where it is given.
        #expect(message("get --count") == "--count needs a value")
        #expect(message("get --count=x") == "--count: 'x' is not a positive number")
        #expect(message("get --trace=x") == "--trace takes no value, =hex or =keys")
        #expect(message("get --bogus=1") == "unknown option '--bogus=1'")
    }
}
