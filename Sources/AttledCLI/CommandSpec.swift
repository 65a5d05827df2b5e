/// A command as `attled --help` lists it, declared once: its synopsis (the
/// name and what it needs) and its help lines.
public struct CommandSpec: Sendable {
    public let command: Options.Command
    /// `send --value HEX`.
    public let synopsis: String
    public let help: [String]

    init(_ command: Options.Command, _ synopsis: String, _ help: [String]) {
        self.command = command
        self.synopsis = synopsis
        self.help = help
    }

    /// A command whose synopsis is its name.
    init(_ command: Options.Command, _ help: [String]) { self.init(command, command.rawValue, help) }

    /// The order of the Commands section of `attled --help`.
    public static let all: [CommandSpec] = [
        CommandSpec(.set, ["write --rgb to the device's LED (the default command)"]),
        CommandSpec(.get, ["read the colour back"]),
        CommandSpec(.send, "send --value HEX", ["write raw bytes to the command characteristic (harness: 01/00, 03/04)"]),
        CommandSpec(.listen, ["subscribe and print notifications until Ctrl-C or --count N",
                              "(--char UUID|0xHHHH: any characteristic of any GATT server)"]),
        CommandSpec(.gatt, "gatt [--values]", ["list services (primary and secondary, with includes), characteristics",
                                               "(handles, properties) and descriptors; --values reads every readable one"]),
        CommandSpec(.read, "read --char C", ["read a characteristic or descriptor of any GATT server (long values in full);",
                                             "several --char: all in one round trip (Read Multiple Variable Length)"]),
        CommandSpec(.write, "write --char C --value HEX [--without-response]",
                    ["write one (Write Request; Write Command with --without-response or when",
                     "it only allows that; Prepare/Execute Write when longer than ATT_MTU-3)"]),
        CommandSpec(.ui, ["full-screen colour sliders (harness: buttons), reconnecting as needed"]),
        CommandSpec(.scan, ["list advertising devices"]),
        CommandSpec(.bonds, "bonds [--remove ADDR]", ["list the stored bonds (pairing keys), or remove one"]),
        CommandSpec(.gateway, "gateway --mqtt HOST[:PORT]",
                    ["bridge the LED devices around to MQTT and Home Assistant (discovery,",
                     "commands, state, availability); runs until SIGINT/SIGTERM"]),
        CommandSpec(.serve, "serve --profile pycom|particle|harness | --gatt FILE",
                    ["be the device: advertise and serve a board's GATT database (or a clone of any),",
                     "print each change of its LED; runs until SIGINT/SIGTERM"]),
        CommandSpec(.proxy, "proxy [--api-key-file FILE]",
                    ["be a Home Assistant Bluetooth proxy over ESPHome's native API: its clients",
                     "get the advertisements and connect through this radio; runs until SIGINT/SIGTERM"]),
        CommandSpec(.decode, "decode FILE", ["decode a btsnoop capture (- for stdin)"]),
        CommandSpec(.help, "help [COMMAND]", ["this text, or the options of one command (also: COMMAND --help)"]),
    ]

    /// The declaration of `command`.
    public static func of(_ command: Options.Command) -> CommandSpec? { all.first { $0.command == command } }
}
