// Reconnect pacing, shared by the gateway (broker, devices, controller) and
// the interactive UI (connects, the controller).

/// Exponential backoff with jitter for reconnecting (to the broker, or to a
/// device): the n-th delay is `initialMs × multiplierⁿ`, capped at `maxMs`, then
/// reduced by up to `jitter` of itself at random, so the delays spread over
/// [base × (1 − jitter), base] and many gateways restarted together do not
/// reconnect in step. The delay never exceeds `maxMs`.
public struct Backoff: Sendable, Equatable {
    public let initialMs: Int
    public let maxMs: Int
    public let multiplier: Double
    public let jitter: Double
    /// Delays handed out since the last `reset()`.
    public private(set) var attempt: Int = 0

    /// The longest delay allowed (about 35 years), which keeps every computation far from overflow.
    public static let ceilingMs = 1 << 40

    /// Out-of-range values are clamped: 1 ≤ initial ≤ max ≤ `ceilingMs`, multiplier ≥ 1, jitter in 0...1.
    public init(initialMs: Int = 500, maxMs: Int = 60_000, multiplier: Double = 2, jitter: Double = 0.2) {
        self.initialMs = min(max(1, initialMs), Backoff.ceilingMs)
        self.maxMs = min(max(self.initialMs, maxMs), Backoff.ceilingMs)
        self.multiplier = multiplier.isFinite ? max(1, multiplier) : 1
        self.jitter = jitter.isFinite ? min(max(jitter, 0), 1) : 0
    }

    /// The delay before attempt number `attempt` (0-based), before jitter.
    public func baseDelayMs(attempt: Int) -> Int {
        var d = Double(initialMs)
        var i = 0
        while i < attempt && d < Double(maxMs) {
            d *= multiplier
            i += 1
        }
        return Int(min(d, Double(maxMs)))
    }

    /// The next delay with jitter from `unit`, a value in 0..<1 (clamped), and advances.
    public mutating func next(unit: Double) -> Int {
        let base = Double(baseDelayMs(attempt: attempt))
        let u = unit.isFinite ? min(max(unit, 0), 1) : 0
        attempt += 1
        return max(1, Int((base * (1 - jitter * u)).rounded()))
    }

    /// The next delay, with jitter from `generator`.
    public mutating func next<G: RandomNumberGenerator>(using generator: inout G) -> Int {
        next(unit: Double.random(in: 0..<1, using: &generator))
    }

    /// The next delay, with jitter from the system generator.
    public mutating func next() -> Int {
        var g = SystemRandomNumberGenerator()
        return next(using: &g)
    }

    /// Back to the initial delay, after a connection that held.
    public mutating func reset() { attempt = 0 }
}
