import Testing
@testable import BLETransport
#if canImport(Glibc)
import Glibc
#endif

@Suite("SystemIO: files written atomically, directories, locks")
struct SystemIOFileTests {
    /// The error `body` threw (nil: none).
    private func failure(_ body: () throws -> Void) -> FileError? {
        do { try body(); return nil } catch { return error as? FileError }
    }

    private func mode(_ path: String) -> UInt32? {
        var st = stat()
        return stat(path, &st) == 0 ? UInt32(st.st_mode & 0o777) : nil
    }

    @Test("a file written atomically replaces the old one whole, with the mode asked, and leaves no temporary file")
    func writeAtomically() throws {
        let dir = try GATTCacheTests.tempDirectory()
        defer { GATTCacheTests.removeAll(dir) }
        let p = dir + "/record"
        try SystemIO.writeFileAtomically(p, Array("one\n".utf8))
        #expect(SystemIO.readFile(p) == Array("one\n".utf8))
        #expect(mode(p) == 0o600)
        try SystemIO.writeFileAtomically(p, Array("two\n".utf8), mode: 0o644, durable: false)
        #expect(SystemIO.readFile(p) == Array("two\n".utf8))
        #expect(SystemIO.directoryEntries(dir) == ["record"])
    }

    @Test("a write into a missing directory fails naming the temporary file and ENOENT, and nothing is left")
    func writeFails() throws {
        let dir = try GATTCacheTests.tempDirectory()
        defer { GATTCacheTests.removeAll(dir) }
        let p = dir + "/missing/record"
        let e = failure { try SystemIO.writeFileAtomically(p, [1, 2, 3]) }
        #expect(e == FileError(path: p + ".tmp.\(SystemIO.processID)", code: ENOENT))
        #expect(SystemIO.directoryEntries(dir).isEmpty)
    }

    @Test("directories are made with their missing parents; the last one with its own mode; one already there is fine")
    func directories() throws {
        let dir = try GATTCacheTests.tempDirectory()
        defer {
            rmdir(dir + "/a/b"); rmdir(dir + "/a")
            GATTCacheTests.removeAll(dir)
        }
        try SystemIO.makeDirectories(dir + "/a/b", mode: 0o700)
        #expect(mode(dir + "/a") == 0o755)
        #expect(mode(dir + "/a/b") == 0o700)
        try SystemIO.makeDirectories(dir + "/a/b", mode: 0o700)
        try SystemIO.setMode(dir + "/a/b", 0o750)
        #expect(mode(dir + "/a/b") == 0o750)
    }

    @Test("a lock held by another open file is refused with EWOULDBLOCK until it is released")
    func locks() throws {
        let dir = try GATTCacheTests.tempDirectory()
        defer { GATTCacheTests.removeAll(dir) }
        let p = dir + "/lock"
        let held = try SystemIO.lock(p)
        let e = failure { let fd = try SystemIO.tryLock(p); SystemIO.unlock(fd) }
        #expect(e == FileError(path: p, code: EWOULDBLOCK))
        SystemIO.unlock(held)
        let again = try SystemIO.tryLock(p)
        SystemIO.unlock(again)
    }

    @Test("a file that cannot be opened says why")
    func contentsFail() {
        let e = failure { _ = try SystemIO.contents(of: "/nonexistent/attled") }
        #expect(e == FileError(path: "/nonexistent/attled", code: ENOENT))
        #expect(FileError(path: "/x", code: ENOENT).description == "/x: No such file or directory")
    }
}
