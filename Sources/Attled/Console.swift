import BLETransport

/// Writes to stdout/stderr without buffering surprises (each line is flushed,
/// so progress shows as it happens and nothing is lost on a signal exit).
public enum Console {
    public static func out(_ s: String) { write(1, s + "\n") }
    public static func err(_ s: String) { write(2, s + "\n") }

    public static func write(_ fd: Int32, _ s: String) { SystemIO.writeAll(fd, Array(s.utf8)) }
}
