#if canImport(Glibc)
import Glibc
#endif

/// Monotonic time in nanoseconds (CLOCK_MONOTONIC). Deadlines in attled are
/// absolute instants on this clock.
public struct Instant: Comparable, Hashable, Sendable {
    public let ns: UInt64
    /// An instant `ns` nanoseconds after the monotonic clock's origin.
    public init(ns: UInt64) { self.ns = ns }

    /// Reads CLOCK_MONOTONIC now.
    public static func now() -> Instant {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Instant(ns: UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec))
    }

    /// Earlier instants order first.
    public static func < (a: Instant, b: Instant) -> Bool { a.ns < b.ns }

    /// The instant `ms` milliseconds later; a negative `ms` counts as 0.
    public func adding(ms: Int) -> Instant { Instant(ns: ns &+ UInt64(max(0, ms)) * 1_000_000) }

    /// Milliseconds from `self` until `later` (0 if already past).
    public func msUntil(_ later: Instant) -> Int {
        later.ns > ns ? Int((later.ns - ns + 999_999) / 1_000_000) : 0
    }

    /// Elapsed time since `earlier`, in milliseconds (0 if `earlier` is later).
    public func msSince(_ earlier: Instant) -> Int { ns > earlier.ns ? Int((ns - earlier.ns) / 1_000_000) : 0 }

    /// Elapsed time since `earlier`, in microseconds.
    public func usSince(_ earlier: Instant) -> UInt64 { ns > earlier.ns ? (ns - earlier.ns) / 1000 : 0 }

    /// Far future: a deadline that never expires.
    public static let distantFuture = Instant(ns: UInt64.max / 2)
    /// Far past: a bound that has always passed.
    public static let distantPast = Instant(ns: 0)
}

/// Wall-clock time in microseconds since the Unix epoch (CLOCK_REALTIME), for capture files.
public func wallClockMicroseconds() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_REALTIME, &ts)
    return UInt64(ts.tv_sec) * 1_000_000 + UInt64(ts.tv_nsec) / 1000
}

/// Formats a microsecond count as milliseconds with `decimals` places: 1234 -> "1.2".
public func formatMs(us: UInt64, decimals: Int = 1) -> String {
    var scale: UInt64 = 1
    for _ in 0..<decimals { scale *= 10 }
    let total = (us * scale + 500) / 1000
    let whole = total / scale
    if decimals == 0 { return String(whole) }
    let frac = String(total % scale)
    return "\(whole)." + String(repeating: "0", count: decimals - frac.count) + frac
}
