import BLEWire
import AttledJSON

/// The phases of a run, in the order they usually happen.
enum Phase: String, Sendable {
    case open, initialise = "init", scan, connect, pair, encrypt, cache, discover, write, read, subscribe, listen

    /// The word used in progress lines and "interrupted during ...".
    var word: String { rawValue }
}

/// What one run (or one device within it) reports: progress lines on
/// stderr, the time spent in each phase, and the fields of its JSON result.
/// With several targets each device has its own, and its lines are prefixed
/// with the device's label.
final class Report {
    /// Printed before each progress line ("Lamp1: "), empty for a single target.
    let prefix: String
    let quiet: Bool
    private(set) var phase = Phase.open
    private var phaseStart = Instant.now()
    private(set) var phases: [(Phase, UInt64)] = []
    /// Fields of the JSON result, in order.
    var fields: [(String, JSONValue)] = []

    init(prefix: String, quiet: Bool) {
        self.prefix = prefix
        self.quiet = quiet
    }

    /// A progress line: "attled: <prefix>text".
    func progress(_ s: String) {
        if !quiet { Console.err("attled: " + prefix + s) }
    }

    /// Starts timing a phase.
    func begin(_ p: Phase) {
        phase = p
        phaseStart = Instant.now()
    }

    /// Ends the current phase.
    /// - Returns: its duration as "12.3 ms".
    @discardableResult
    func end() -> String {
        let us = Instant.now().usSince(phaseStart)
        phases.append((phase, us))
        return formatMs(us: us) + " ms"
    }

    /// Ends the current phase and prints "phase  duration  text".
    func done(_ text: String) {
        let p = phase
        let d = end()
        progress("\(pad(p.word, 8)) \(pad(d, 10)) \(text)")
    }

    /// The phases as a JSON object of milliseconds.
    var phasesJSON: JSONValue {
        .object(phases.map { ($0.0.word, .double(Double($0.1 / 100) / 10)) })
    }
}

func pad(_ s: String, _ n: Int) -> String { s.count >= n ? s : s + String(repeating: " ", count: n - s.count) }
