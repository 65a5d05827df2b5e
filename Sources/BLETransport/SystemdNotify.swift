#if canImport(Glibc)
import Glibc
#endif
import BLEWire

/// systemd's service notification protocol (sd_notify(3), written from its
/// documented wire format: one datagram of `KEY=VALUE` lines to the
/// AF_UNIX socket named by `$NOTIFY_SOCKET`, "@" for the abstract namespace).
/// No libsystemd: a long-running command tells systemd it is ready, that it
/// is alive (`WATCHDOG=1`, when the unit has `WatchdogSec=`) and that it is
/// stopping. Outside systemd (no `$NOTIFY_SOCKET`) every call does nothing.
public final class SystemdNotify {
    private let fd: Int32
    private var address = sockaddr_un()
    private let addressLength: socklen_t
    /// How often to send `WATCHDOG=1`: half of `$WATCHDOG_USEC` (nil: no watchdog
    /// asked for this process).
    public let watchdogIntervalMs: Int?

    /// From the environment; nil outside systemd (or with an unusable socket name).
    public init?(environment: [String: String] = SystemIO.environment()) {
        guard let path = environment["NOTIFY_SOCKET"], !path.isEmpty else { return nil }
        var bytes = Array(path.utf8)
        if bytes[0] == UInt8(ascii: "@") { bytes[0] = 0 }  // abstract namespace
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard bytes.count < capacity else { return nil }
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, b) in bytes.enumerated() { raw[i] = b }
        }
        addressLength = socklen_t(MemoryLayout<sa_family_t>.size + bytes.count + (bytes[0] == 0 ? 0 : 1))
        let s = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard s >= 0 else { return nil }
        fd = s
        // WATCHDOG_PID, when set, names the process the watchdog is for.
        let forUs = environment["WATCHDOG_PID"].map { Int32($0) == getpid() } ?? true
        if forUs, let usec = environment["WATCHDOG_USEC"].flatMap({ Int($0) }), usec > 0 {
            watchdogIntervalMs = max(1, usec / 2000)
        } else {
            watchdogIntervalMs = nil
        }
    }

    deinit { close(fd) }

    /// Sends `state` (newline-separated `KEY=VALUE` lines); false when the datagram was not taken.
    @discardableResult
    public func send(_ state: String) -> Bool {
        let bytes = Array(state.utf8)
        let n = bytes.withUnsafeBytes { buf in
            withUnsafePointer(to: &address) { ap in
                ap.withMemoryRebound(to: sockaddr.self, capacity: 1) { sendto(fd, buf.baseAddress, buf.count, Int32(MSG_NOSIGNAL), $0, addressLength) }
            }
        }
        return n == bytes.count
    }

    /// `READY=1`: start-up is over (a `Type=notify` unit counts as started).
    public func ready(_ status: String? = nil) { send("READY=1" + (status.map { "\nSTATUS=" + $0 } ?? "")) }
    /// `WATCHDOG=1`: still alive.
    public func alive() { send("WATCHDOG=1") }
    /// `STOPPING=1`.
    public func stopping() { send("STOPPING=1") }
}
