#if canImport(Glibc)
import Glibc
#endif

/// Writes to stdout/stderr without buffering surprises (each line is flushed,
/// so progress shows as it happens and nothing is lost on a signal exit).
public enum Console {
    public static func out(_ s: String) { write(1, s + "\n") }
    public static func err(_ s: String) { write(2, s + "\n") }

    public static func write(_ fd: Int32, _ s: String) {
        var bytes = Array(s.utf8)
        var off = 0
        while off < bytes.count {
            let n = bytes.withUnsafeMutableBytes { Glibc.write(fd, $0.baseAddress! + off, $0.count - off) }
            if n <= 0 { if n < 0 && errno == EINTR { continue }; return }
            off += n
        }
    }

    public static var stderrIsTTY: Bool { isatty(2) == 1 }
}
