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
    "--no-accept-list": Sample("ui") { $0.gateway.noAcceptList },
    "--gatt": Sample("serve", "/tmp/db.json") { $0.serve.gattFile == "/tmp/db.json" },
    "--advertise-name": Sample("serve --profile pycom", "Lamp") { $0.serve.advertiseName == "Lamp" },
    "--advertise-uuid": Sample("serve --profile pycom", "180f") { $0.serve.advertiseUUIDs == [BluetoothUUID(uint16: 0x180F)] },
    "--secure": Sample("serve --profile pycom") { $0.serve.secure },
    "--sc-only": Sample("serve --profile pycom") { $0.serve.secureConnectionsOnly },
    "--conn-interval": Sample("serve --profile pycom", "30-50") { $0.serve.connectionParameters?.intervalMax == 40 },
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
        #expect(Usage.line == "usage: attled [set|scan|get|send|listen|gatt|read|write|ui|bonds|gateway|serve|decode] [-i TRANSPORT] [--name NAME | --service UUID | --address ADDR] [--rgb R,G,B] [options]")
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

    @Test("options refused where they do not apply keep their messages; the others are still accepted")
    func refusals() {
        #expect(message("get --rgb red") == "--rgb only applies to set")
        #expect(message("get --colour red") == "--rgb only applies to set")
        #expect(message("get --values") == "--values only applies to gatt")
        #expect(message("read --char 0x10 --without-response") == "--without-response only applies to write")
        #expect(message("get --remove C0:11:22:33:44:55") == "--remove only applies to bonds")
        #expect(message("get --no-accept-list") == "--no-accept-list only applies to gateway and ui")
        for flag in ["--mqtt h", "--mqtt-user u", "--mqtt-tls-ca ca", "--max-links 2"] {
            #expect(message("get " + flag) == "--mqtt, --mqtt-user, --mqtt-password-file, --mqtt-tls-ca and --max-links only apply to gateway", "\(flag)")
        }
        #expect(message("--rgb red --topic-prefix x --gateway-id y --discovery-prefix z --count 2 --filter att --value 01") == nil)
        #expect(message("get --count") == "--count needs a value")
        #expect(message("get --count=x") == "--count: 'x' is not a positive number")
        #expect(message("get --trace=x") == "--trace takes no value, =hex or =keys")
        #expect(message("get --bogus=1") == "unknown option '--bogus=1'")
    }
}
