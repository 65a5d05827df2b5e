#if canImport(Glibc)
import Glibc
#endif
import BLEWire

/// The descriptor loops every part of attled needs: waiting for input with a
/// wake descriptor, writing everything, reading everything. One place turns
/// EINTR and short transfers into the right thing.
public enum SystemIO {
    /// What a bounded wait on a descriptor found.
    public enum Readiness { case readable, woken, timeout }

    /// Waits until `fd` is readable, `wakeFD` (when not -1) is readable, or
    /// `deadline` passes; `fd` wins when both are. A signal interrupting poll
    /// counts as woken.
    /// - Throws: `SystemError` carrying poll's errno for any failure other than EINTR.
    public static func wait(_ fd: Int32, wakeFD: Int32, until deadline: Instant) throws(SystemError) -> Readiness {
        var fds = [pollfd(fd: fd, events: Int16(POLLIN), revents: 0),
                   pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0)]
        let r = poll(&fds, wakeFD >= 0 ? 2 : 1, Int32(clamping: Instant.now().msUntil(deadline)))
        if r < 0 {
            if errno == EINTR { return .woken }
            throw SystemError(errno)
        }
        // The transport first: a wake-up source that stays readable (a busy
        // socket in the gateway's wake-up set) must never starve the
        // controller's packets; the wake-up is seen on the next wait.
        if fds[0].revents != 0 { return .readable }
        if wakeFD >= 0 && fds[1].revents != 0 { return .woken }
        return .timeout
    }

    /// Writes all of `bytes` (retrying EINTR and short writes); false when the descriptor fails.
    @discardableResult
    public static func writeAll(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        var off = 0
        while off < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + off, $0.count - off) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return false }
            off += n
        }
        return true
    }

    /// Reads until end of file or `limit` bytes.
    public static func readAll(_ fd: Int32, limit: Int) -> [UInt8] {
        var out: [UInt8] = []
        var buf = [UInt8](repeating: 0, count: 65536)
        while out.count < limit {
            let n = buf.withUnsafeMutableBytes { read(fd, $0.baseAddress!, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }
            out += buf[0..<n]
        }
        return out
    }

    /// The wall clock: seconds since 1970-01-01 UTC.
    public static func secondsSince1970() -> Int { Int(time(nil)) }

    /// The whole content of a file, nil if it cannot be opened (`contents(of:)` says why).
    public static func readFile(_ path: String, limit: Int = 1 << 20) -> [UInt8]? {
        try? contents(of: path, limit: limit)
    }
}

/// An errno value as a typed error.
public struct SystemError: Error, Equatable, Sendable {
    public var code: Int32
    /// Wraps an errno value such as `EIO`.
    public init(_ code: Int32) { self.code = code }
}

extension SystemIO {
    /// Opens (creating, mode 0600) and locks `path` exclusively without
    /// waiting (flock): the lock lasts as long as the returned descriptor is
    /// open (`unlock`), or the process lives.
    /// - Returns: the descriptor.
    /// - Throws: `FileError` with `EWOULDBLOCK` when another open file holds
    ///   the lock, or the reason the file cannot be opened or locked.
    public static func tryLock(_ path: String) throws(FileError) -> Int32 {
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { throw FileError(path: path, code: errno) }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else { let e = errno; close(fd); throw FileError(path: path, code: e) }
        return fd
    }

    /// Opens and locks `path` exclusively, waiting for it (a short critical
    /// section of another process: an index file being rewritten).
    /// - Returns: the descriptor.
    /// - Throws: `FileError` when the file cannot be opened or locked.
    public static func lock(_ path: String) throws(FileError) -> Int32 {
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { throw FileError(path: path, code: errno) }
        while flock(fd, LOCK_EX) != 0 {
            guard errno == EINTR else { let e = errno; close(fd); throw FileError(path: path, code: e) }
        }
        return fd
    }

    /// Releases a lock taken by `tryLock` or `lock`.
    public static func unlock(_ fd: Int32) { close(fd) }

    /// The target of a symbolic link chain, or nil.
    public static func realPath(_ path: String) -> String? {
        guard let p = realpath(path, nil) else { return nil }
        defer { free(p) }
        return String(cString: p)
    }
}

extension TransportSpec {
    /// What tells this controller from another across runs, for keeping an
    /// identity (a static random address, bonds) per controller: for `hciN`
    /// the USB serial number where the kernel shows one, else the adapter's
    /// place on its bus (`/sys/class/bluetooth/hciN/device`), else the index;
    /// for the byte-stream transports, the spec itself.
    /// - Parameter sysfs: the sysfs root (tests give their own).
    public func controllerKey(sysfs: String = "/sys") -> String {
        guard case let .userChannel(index) = self else { return description }
        guard let dev = SystemIO.realPath("\(sysfs)/class/bluetooth/hci\(index)/device") else { return "hci\(index)" }
        // The USB device (an interface's parent) may carry a serial number.
        var dir = dev
        for _ in 0..<3 {
            if let serial = Self.line(dir + "/serial"), !serial.isEmpty {
                return "usb:\(Self.line(dir + "/idVendor") ?? "?"):\(Self.line(dir + "/idProduct") ?? "?"):\(serial)"
            }
            guard let slash = dir.lastIndex(of: "/"), slash != dir.startIndex else { break }
            dir = String(dir[..<slash])
        }
        let sysDevices = (SystemIO.realPath(sysfs) ?? sysfs) + "/devices/"
        return "bus:" + (dev.hasPrefix(sysDevices) ? String(dev.dropFirst(sysDevices.count)) : dev)
    }
}

extension TransportSpec {
    /// A sysfs attribute's first line, without surrounding blanks.
    static func line(_ path: String) -> String? {
        guard let raw = SystemIO.readFile(path, limit: 256) else { return nil }
        let first = String(decoding: raw, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false).first ?? ""
        return String(first.drop(while: { $0 == " " || $0 == "\t" }).reversed().drop(while: { $0 == " " || $0 == "\t" || $0 == "\r" }).reversed())
    }
}
