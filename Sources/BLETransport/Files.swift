#if canImport(Glibc)
import Glibc
#endif

/// A file operation that failed: the file it failed on and errno.
public struct FileError: Error, Hashable, Sendable, CustomStringConvertible {
    public var path: String
    /// The errno value (`ENOENT`, `EACCES` ...).
    public var code: Int32
    /// The failure of the operation on `path` with errno `code`.
    public init(path: String, code: Int32) { self.path = path; self.code = code }
    /// "PATH: No such file or directory".
    public var description: String { "\(path): \(SystemIO.errorText(code))" }
}

/// Files, directories and the process: what the layers above need of the
/// operating system, so that they never call the C library themselves.
extension SystemIO {
    /// The C library's text for an errno value ("No such file or directory").
    public static func errorText(_ code: Int32) -> String {
        strerror(code).map { String(cString: $0) } ?? "errno \(code)"
    }

    /// The whole content of a file, at most `limit` bytes.
    /// - Throws: `FileError` when the file cannot be opened.
    public static func contents(of path: String, limit: Int = 1 << 20) throws(FileError) -> [UInt8] {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw FileError(path: path, code: errno) }
        defer { close(fd) }
        return readAll(fd, limit: limit)
    }

    /// Replaces `path` with `bytes` atomically: they go to a temporary file
    /// beside it (`PATH.tmp.PID`, created with `mode`, never through a
    /// symbolic link), which is flushed to the disk when `durable` (fsync)
    /// and renamed over `path`. A reader sees the old content or the new,
    /// never a part; a failure leaves the old file and no temporary one.
    /// - Throws: `FileError` naming the temporary file (it could not be
    ///   created, written or flushed) or `path` (the rename failed).
    public static func writeFileAtomically(_ path: String, _ bytes: [UInt8], mode: UInt32 = 0o600, durable: Bool = true) throws(FileError) {
        let tmp = path + ".tmp.\(getpid())"
        let fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode_t(mode))
        guard fd >= 0 else { throw FileError(path: tmp, code: errno) }
        let ok = writeAll(fd, bytes) && (!durable || fsync(fd) == 0)
        let e = errno
        close(fd)
        guard ok else { unlink(tmp); throw FileError(path: tmp, code: e) }
        guard rename(tmp, path) == 0 else { let e = errno; unlink(tmp); throw FileError(path: path, code: e) }
    }

    /// Makes the directory `path` and any missing parent: the parents with
    /// mode 0755, `path` itself with `mode` (a directory already there is
    /// left as it is).
    /// - Throws: `FileError` for the first directory that cannot be made.
    public static func makeDirectories(_ path: String, mode: UInt32 = 0o755) throws(FileError) {
        var made = ""
        let parts = path.split(separator: "/")
        for (i, part) in parts.enumerated() {
            made += "/" + part
            if mkdir(made, mode_t(i == parts.count - 1 ? mode : 0o755)) != 0 && errno != EEXIST {
                throw FileError(path: made, code: errno)
            }
        }
    }

    /// Sets the permission bits of `path` (chmod).
    /// - Throws: `FileError`.
    public static func setMode(_ path: String, _ mode: UInt32) throws(FileError) {
        if chmod(path, mode_t(mode)) != 0 { throw FileError(path: path, code: errno) }
    }

    /// Removes the file `path` (unlink).
    /// - Returns: false when it could not be removed (or was not there).
    @discardableResult
    public static func remove(_ path: String) -> Bool { unlink(path) == 0 }

    /// A file's permission bits (st_mode & 0o7777), nil when it cannot be stat'ed.
    public static func permissions(_ path: String) -> UInt32? {
        var st = stat()
        guard stat(path, &st) == 0 else { return nil }
        return UInt32(st.st_mode) & 0o7777
    }

    /// The names in the directory `path` (not "." and ".."), in the order
    /// the directory gives them; empty when it cannot be read.
    public static func directoryEntries(_ path: String) -> [String] {
        guard let d = opendir(path) else { return [] }
        defer { closedir(d) }
        var names: [String] = []
        while let e = readdir(d) {
            let name = withUnsafeBytes(of: e.pointee.d_name) { raw in String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self) }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    /// The process environment ("NAME=value" entries; a name given twice keeps the last).
    public static func environment() -> [String: String] {
        var env: [String: String] = [:]
        var p = environ
        while let entry = p.pointee {
            let s = String(cString: entry)
            if let eq = s.firstIndex(of: "=") { env[String(s[..<eq])] = String(s[s.index(after: eq)...]) }
            p += 1
        }
        return env
    }

    /// Ends the process with `code` (exit: the C library's buffers flushed).
    public static func exit(_ code: Int32) -> Never { Glibc.exit(code) }

    /// This process's id.
    public static var processID: Int32 { getpid() }

    /// The real user id of this process (0: root).
    public static var userID: UInt32 { getuid() }

    /// Whether the descriptor is a terminal (isatty).
    public static func isTerminal(_ fd: Int32) -> Bool { isatty(fd) == 1 }
}
