import Attled

/// The command line's console: every line it writes to stderr on its own
/// behalf starts with the program's name. The libraries print lines without
/// it; the command line gives them their prefix here.
enum CLIConsole {
    /// What starts every line the command line writes to stderr.
    static let prefix = "attled: "

    /// Writes `line` to stderr as "attled: line".
    static func err(_ line: String) { Console.err(prefix + line) }
}

extension Report {
    /// A report whose progress lines go to stderr as the command line
    /// prints them: "attled: <prefix>text".
    static func console(prefix: String, quiet: Bool) -> Report {
        let r = Report(prefix: prefix, quiet: quiet)
        r.output = { CLIConsole.err($0) }
        return r
    }
}
