/// One option, declared once: how it is spelled, what it takes, what it
/// does to `Options`, which commands it applies to and its help lines.
/// `OptionSpec.all` lists them; the parser and `attled --help` read it.
public struct OptionSpec: Sendable {
    /// The sections of `attled --help`, in order.
    public enum Group: Int, CaseIterable, Sendable {
        case transport, target, profile, values, scanning, timing, cache, security, gateway, serve, output

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
    /// The commands it applies to (which `attled help CMD` lists it for).
    public let commands: Set<Options.Command>
    /// The usage error when it is given to another command; nil: accepted and ignored there.
    public let refusal: String?
    /// It ends parsing (--help, --version): nothing after it is read.
    public let endsParsing: Bool

    /// - Parameter refused: true to refuse it elsewhere with "NAME only applies to CMDS";
    ///   `refusal` gives another message (and implies it).
    init(_ names: [String], _ argument: Argument, group: Group, commands: Set<Options.Command>,
         refused: Bool = false, refusal: String? = nil, endsParsing: Bool = false, help: [String]) {
        self.names = names
        self.argument = argument
        self.group = group
        self.commands = commands
        self.help = help
        self.endsParsing = endsParsing
        let listed = Options.Command.allCases.filter(commands.contains).map(\.rawValue)
        let only = listed.count < 2 ? listed.joined() : listed.dropLast().joined(separator: ", ") + " and " + listed.last!
        self.refusal = refusal ?? (refused ? "\(names[0]) only applies to \(only)" : nil)
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
    static let controller: Set<Options.Command> = device.union([.serve])
    /// Every command that connects to a device.
    static let connecting: Set<Options.Command> = device.subtracting([.scan])
    /// The commands that run to an end (all that open a transport but the gateway).
    static let run: Set<Options.Command> = device.subtracting([.gateway])
    /// The commands that connect and run to an end.
    static let linked: Set<Options.Command> = connecting.subtracting([.gateway])
    /// The commands that work on an LED given by the options (through its profile).
    static let led: Set<Options.Command> = [.set, .get, .send, .listen, .ui]
    /// Every command but help and version.
    static let every: Set<Options.Command> = Set(Options.Command.allCases).subtracting([.help, .version])
}
