/// One option, declared once: how it is spelled, what it takes, what it
/// does to `Options`, which commands it applies to and its help lines.
/// `OptionSpec.all` lists them; the parser and `attled --help` read it.
public struct OptionSpec: Sendable {
    /// The sections of `attled --help`, in order.
    public enum Group: Int, CaseIterable, Sendable {
        case transport, target, profile, values, scanning, timing, cache, security, gateway, serve, proxy, output

        /// The section's heading (and what it says about all of its options).
        public var heading: String {
            switch self {
            case .transport: return "Transport (default hci0; also ATTLED_TRANSPORT in the environment):"
            case .target: return "Target (one of; without any, the first device advertising a known LED service):"
            case .profile: return "Device profile (detected from the advertised or discovered service):"
            case .values: return "Colour, values and characteristics:"
            case .scanning: return "Scanning and connecting:"
            case .timing: return "Timing:"
            case .cache: return "GATT cache:"
            case .security: return "Pairing and bonds:"
            case .gateway: return "Gateway:"
            case .serve: return "Serving (attled as the device):"
            case .proxy: return "Home Assistant Bluetooth proxy (ESPHome native API):"
            case .output: return "Output and tracing:"
            }
        }

        /// Lines after the section's options.
        public var footer: [String] {
            switch self {
            case .target: return ["--name and --address may be repeated: set, get, send and listen then drive",
                                  "every target at once over concurrent links (one scan serves them all)."]
            case .profile: return ["--service UUID --red UUID --green UUID --blue UUID: any other RGB device."]
            case .serve: return ["serve takes --profile or --gatt; --name is the advertised name and the Device Name."]
            default: return []
            }
        }
    }

    /// What follows the spelling, and what the option does with it.
    public enum Argument: Sendable {
        /// A switch: `--passive`. A `=value` after it is ignored.
        case none(@Sendable (inout Options) throws -> Void)
        /// A value, `--name X` or `--name=X`; the placeholder is what help shows.
        /// The closure gets the spelling used and the value.
        case value(String, @Sendable (inout Options, _ flag: String, _ value: String) throws -> Void)
        /// Only `--trace` or `--trace=VALUE` (never the next argument); the
        /// placeholder is what help shows after the spelling.
        case inline(String, @Sendable (inout Options, String?) throws -> Void)
    }

    /// Every spelling, the first the one help and messages use.
    public let names: [String]
    public let argument: Argument
    public let help: [String]
    public let group: Group
    /// The commands it applies to (which `attled help CMD` lists it for);
    /// given to any other, it is refused (`refusal(for:)`).
    public let commands: Set<Options.Command>
    /// It ends parsing (--help, --version): nothing after it is read.
    public let endsParsing: Bool

    init(_ names: [String], _ argument: Argument, group: Group, commands: Set<Options.Command>,
         endsParsing: Bool = false, help: [String]) {
        self.names = names
        self.argument = argument
        self.group = group
        self.commands = commands
        self.help = help
        self.endsParsing = endsParsing
    }

    /// The spelling refusals use: the first long one (`--address` for
    /// `-a, --address`), else the first.
    public var longName: String { names.first { $0.hasPrefix("--") } ?? names[0] }

    /// The usage error when it is given to `command` and does not apply
    /// there: "serve does not take --address: " and the hint of
    /// `OptionSpec.hints` for that pair, else "--rgb only applies to set".
    /// Nil where it applies.
    public func refusal(for command: Options.Command) -> String? {
        guard !commands.contains(command) else { return nil }
        let why = Self.hints.first { $0.options.contains(names[0]) && $0.commands.contains(command) }?.text
            ?? "\(longName) only applies to \(Self.list(commands))"
        return "\(command.rawValue) does not take \(longName): \(why)"
    }

    /// Commands in the usage line's order: "set", "ui and gateway", "set, get and send".
    static func list(_ commands: Set<Options.Command>) -> String {
        let listed = Options.Command.allCases.filter(commands.contains).map(\.rawValue)
        return listed.count < 2 ? listed.joined() : listed.dropLast().joined(separator: ", ") + " and " + listed.last!
    }

    /// Where an option is refused with more than where it applies: the
    /// option that does the thing there, or why it means nothing there.
    struct Hint: Sendable {
        /// First spellings.
        let options: [String]
        let commands: Set<Options.Command>
        let text: String
        init(_ options: [String], _ commands: Set<Options.Command>, _ text: String) {
            self.options = options; self.commands = commands; self.text = text
        }
    }

    /// The left column of its help: `-i, --transport, --device SPEC`.
    public var synopsis: String {
        switch argument {
        case .none: return names.joined(separator: ", ")
        case .value(let placeholder, _): return names.joined(separator: ", ") + " " + placeholder
        case .inline(let placeholder, _): return names.joined(separator: ", ") + placeholder
        }
    }

    /// Each spelling's declaration.
    static let byName: [String: OptionSpec] = {
        var d: [String: OptionSpec] = [:]
        for s in all { for n in s.names { d[n] = s } }
        return d
    }()
}

/// Command sets the declarations share.
extension Set where Element == Options.Command {
    /// Every command that opens a transport.
    static let device: Set<Options.Command> = [.set, .scan, .get, .send, .listen, .gatt, .read, .write, .ui, .gateway]
    /// Every command on a controller, the device role (serve) too.
    static let controller: Set<Options.Command> = device.union([.serve, .proxy])
    /// Every command that connects to a device.
    static let connecting: Set<Options.Command> = device.subtracting([.scan])
    /// The commands that find their devices with a scan of their own (all
    /// that open a transport but the gateway).
    static let run: Set<Options.Command> = device.subtracting([.gateway])
    /// The commands that run to an end, under one deadline (all that open a
    /// transport but ui and the gateway).
    static let oneShot: Set<Options.Command> = run.subtracting([.ui])
    /// The commands that connect by themselves (the gateway's keeper has its own timing).
    static let linked: Set<Options.Command> = connecting.subtracting([.gateway])
    /// The commands that connect and run to an end (their ATT transactions have a deadline).
    static let linkedOneShot: Set<Options.Command> = linked.subtracting([.ui])
    /// The commands that pair or encrypt with a bond (ui does neither).
    static let securing: Set<Options.Command> = connecting.subtracting([.ui])
    /// The commands that work on an LED given by the options (through its profile).
    static let led: Set<Options.Command> = [.set, .get, .send, .listen, .ui]
    /// Every command but help and version.
    static let every: Set<Options.Command> = Set(Options.Command.allCases).subtracting([.help, .version])
}
