import Attled

/// `attled --help`, generated from the declarations (`CommandSpec.all`,
/// `OptionSpec.all`) but for the exit codes.
public enum Usage {
    /// The commands the usage line lists (every one but help and version).
    static let listed = Options.Command.allCases.filter { $0 != .help && $0 != .version }

    public static let line = "usage: attled [\(listed.map(\.rawValue).joined(separator: "|"))] [-i TRANSPORT] [--name NAME | --service UUID | --address ADDR] [--rgb R,G,B] [options]"

    public static let help = text(for: nil)

    public static let version = "attled \(AttledVersion.string)"

    static let intro = """
    attled drives a Bluetooth LE controller directly over HCI (no bluetoothd) to
    find an LED peripheral, connect, discover its LED service and write a colour.
    """

    static let exitCodes = """
    Exit codes: 0 ok, 3 device not found, 4 connection failed, 5 service or
    characteristic not found, 6 ATT error from the device, 7 device stopped
    answering or link lost, 8 pairing or encryption failed, 64 usage, 65 bad input file, 69 transport or adapter
    unavailable, 74 transport lost, 75 adapter busy, 76 controller error,
    77 permission denied, 130/143 interrupted (SIGINT/SIGTERM).
    """

    /// The whole help (`command` nil), or one command's: its synopsis and
    /// the options that apply to it.
    public static func text(for command: Options.Command?) -> String {
        var out: [String] = []
        if let c = command, let spec = CommandSpec.of(c) {
            out.append("usage: attled \(spec.synopsis) [options]")
            out.append("")
            out += spec.help.map { "  " + $0 }
        } else {
            out += [line, "", intro, "", "Commands (default: set):"]
            for c in CommandSpec.all { out += entry(c.synopsis, c.help, column: 18) }
        }
        for group in OptionSpec.Group.allCases {
            let specs = OptionSpec.all.filter { $0.group == group && (command.map($0.commands.contains) ?? true) }
            if specs.isEmpty { continue }
            out += ["", group.heading]
            for s in specs { out += entry(s.synopsis, s.help, column: 23) }
            if command == nil { out += group.footer }
        }
        if command == nil { out += ["", exitCodes] }
        return out.joined(separator: "\n")
    }

    /// `  LEFT   first help line` with the rest under it; a LEFT wider than the
    /// column puts the help on the next lines.
    static func entry(_ left: String, _ help: [String], column: Int) -> [String] {
        let indent = String(repeating: " ", count: column + 2)
        var lines: [String]
        var rest = help[...]
        if left.count + 2 <= column, let first = rest.first {
            lines = ["  " + left + String(repeating: " ", count: column - left.count) + first]
            rest = rest.dropFirst()
        } else {
            lines = ["  " + left]
        }
        return lines + rest.map { indent + $0 }
    }
}
