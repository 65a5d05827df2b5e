import BLEWire
import AttledJSON

/// The phases of a run, in the order they usually happen.
public enum Phase: String, Sendable {
    case open, initialise = "init", scan, connect, pair, encrypt, cache, discover, write, read, subscribe, listen, advertise, serve

    /// The word used in progress lines and "interrupted during ...".
    public var word: String { rawValue }
}

/// What one run (or one device within it) reports: progress lines on
/// stderr, the time spent in each phase, and the fields of its JSON result.
/// With several targets each device has its own, and its lines are prefixed
/// with the device's label.
public final class Report {
    /// Printed before each progress line ("Lamp1: "), empty for a single target.
    public let prefix: String
    public let quiet: Bool
    /// Where progress lines go (default: stderr, one line each, as they are;
    /// a program puts its own name before them here).
    public var output: (String) -> Void = { Console.err($0) }
    public private(set) var phase = Phase.open
    private var phaseStart = Instant.now()
    public private(set) var phases: [(Phase, UInt64)] = []
    /// Fields of the JSON result, in order.
    public var fields: [(String, JSONValue)] = []

    public init(prefix: String, quiet: Bool) {
        self.prefix = prefix
        self.quiet = quiet
    }

    /// A progress line: "<prefix>text", to `output`.
    public func progress(_ s: String) {
        if !quiet { output(prefix + s) }
    }

    /// Starts timing a phase.
    public func begin(_ p: Phase) {
        phase = p
        phaseStart = Instant.now()
    }

    /// Ends the current phase.
    /// - Returns: its duration as "12.3 ms".
    @discardableResult
    public func end() -> String {
        let us = Instant.now().usSince(phaseStart)
        phases.append((phase, us))
        return formatMs(us: us) + " ms"
    }

    /// Ends the current phase and prints "phase  duration  text".
    public func done(_ text: String) {
        let p = phase
        let d = end()
        progress("\(pad(p.word, 8)) \(pad(d, 10)) \(text)")
    }

    /// The phases as a JSON object of milliseconds.
    public var phasesJSON: JSONValue {
        .object(phases.map { ($0.0.word, .double(Double($0.1 / 100) / 10)) })
    }
}

/// `s` padded with spaces to `n` characters (column output).
public func pad(_ s: String, _ n: Int) -> String { s.count >= n ? s : s + String(repeating: " ", count: n - s.count) }
