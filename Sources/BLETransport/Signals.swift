#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// SIGINT/SIGTERM handling without races: the handler records the signal and
/// writes a byte to a pipe whose read end every wait polls, so a blocked
/// `poll` wakes at once and the stack can unwind (disconnect, close) cleanly.
public enum SignalWatch {
    /// SIGINT (Ctrl-C), as `HCIError.interrupted` carries it.
    public static let interrupt: Int32 = SIGINT
    /// SIGTERM.
    public static let terminate: Int32 = SIGTERM

    private static let pending = Atomic<Int32>(0)
    private static let pipeWrite = Atomic<Int32>(-1)
    private static let pipeRead = Atomic<Int32>(-1)

    /// Installs handlers for SIGINT and SIGTERM and ignores SIGPIPE.
    public static func install() {
        if pipeRead.load(ordering: .relaxed) < 0 {
            var fds: [Int32] = [-1, -1]
            if pipe(&fds) == 0 {
                for fd in fds {
                    _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
                    _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
                }
                pipeRead.store(fds[0], ordering: .relaxed)
                pipeWrite.store(fds[1], ordering: .relaxed)
            }
        }
        signal(SIGPIPE, SIG_IGN)
        let handler: @convention(c) (Int32) -> Void = { sig in
            // A second signal while unwinding: leave at once.
            if SignalWatch.pending.load(ordering: .relaxed) != 0 && SignalWatch.secondSignalExits.load(ordering: .relaxed) {
                _exit(128 + sig)
            }
            SignalWatch.pending.store(sig, ordering: .relaxed)
            var b: UInt8 = 1
            _ = write(SignalWatch.pipeWrite.load(ordering: .relaxed), &b, 1)
        }
        signal(SIGINT, handler)
        signal(SIGTERM, handler)
    }

    private static let resizedFlag = Atomic<Bool>(false)
    private static let hangupFlag = Atomic<Bool>(false)

    /// Watches a signal that wakes the loop without interrupting it: its flag
    /// is set and the pipe written.
    private static func installWaking(_ sig: Int32) {
        let handler: @convention(c) (Int32) -> Void = { sig in
            if sig == SIGHUP { SignalWatch.hangupFlag.store(true, ordering: .relaxed) }
            else { SignalWatch.resizedFlag.store(true, ordering: .relaxed) }
            var b = UInt8(truncatingIfNeeded: sig)
            _ = write(SignalWatch.pipeWrite.load(ordering: .relaxed), &b, 1)
        }
        signal(sig, handler)
    }

    /// Also watch SIGWINCH (terminal resized): it wakes the loop without interrupting it.
    public static func installResize() { installWaking(SIGWINCH) }

    /// True once after each SIGWINCH.
    public static func takeResized() -> Bool { resizedFlag.exchange(false, ordering: .relaxed) }

    /// Also watch SIGHUP: it wakes the loop without interrupting it (the
    /// gateway reconnects to its broker).
    public static func installHangup() { installWaking(SIGHUP) }

    /// True once after each SIGHUP.
    public static func takeHangup() -> Bool { hangupFlag.exchange(false, ordering: .relaxed) }

    /// When true (the default), a second SIGINT/SIGTERM during clean-up exits immediately.
    public static let secondSignalExits = Atomic<Bool>(true)

    /// The descriptor to poll; -1 if not installed.
    public static var wakeFD: Int32 { pipeRead.load(ordering: .relaxed) }

    /// The signal received, or nil.
    public static var received: Int32? {
        let s = pending.load(ordering: .relaxed)
        return s == 0 ? nil : s
    }

    /// Empties the pipe (the recorded signal stays recorded).
    public static func drain() {
        let fd = pipeRead.load(ordering: .relaxed)
        guard fd >= 0 else { return }
        var buf = [UInt8](repeating: 0, count: 64)
        while read(fd, &buf, 64) > 0 {}
    }
}
