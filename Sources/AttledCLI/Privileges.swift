#if canImport(Glibc)
import Attled
import Glibc
#endif
import BLEWire
import BLETransport

/// Started through sudo, attled gives up root as soon as the adapter socket
/// is open: the open socket keeps working, and nothing else needs root. The
/// one thing that does (bringing the adapter back up with HCIDEVUP, which
/// needs CAP_NET_ADMIN) is handed to a small root process started first: it
/// waits for attled to exit (its stdin pipe closes, whatever the way out,
/// even SIGKILL) and then brings the adapter up.
enum Privileges {
    struct Dropped { var uid: uid_t; var gid: gid_t; var restorer: pid_t? }

    /// The invoking user when running as root under sudo, else nil.
    static func sudoUser(_ env: [String: String]) -> (uid_t, gid_t)? {
        guard getuid() == 0 || geteuid() == 0,
              let u = env["SUDO_UID"].flatMap({ UInt32($0) }), let g = env["SUDO_GID"].flatMap({ UInt32($0) }), u != 0 else { return nil }
        return (uid_t(u), gid_t(g))
    }

    /// Drops to the sudo user's uid/gid. Throws when it cannot be done completely.
    static func drop(transport: HCITransport, env: [String: String]) throws -> Dropped? {
        guard let (uid, gid) = sudoUser(env) else { return nil }
        var restorer: pid_t? = nil
        if let uc = transport as? UserChannelTransport, uc.handOverRestore() {
            restorer = try spawnRestorer(index: uc.adapterIndex, channel: uc.socketFD)
        }
        var groups: [gid_t] = [gid]
        guard setgroups(1, &groups) == 0, setgid(gid) == 0, setuid(uid) == 0 else {
            throw RunError("could not drop root privileges to uid \(uid) gid \(gid): \(errnoName(errno))", .permission)
        }
        // Root must be gone for good.
        guard getuid() == uid, geteuid() == uid, setuid(0) != 0 else {
            throw RunError("privileges were not dropped completely (uid \(getuid()), euid \(geteuid()))", .permission)
        }
        return Dropped(uid: uid, gid: gid, restorer: restorer)
    }

    /// Starts `attled __restore-hci N` as root with a pipe on its stdin; the
    /// write end stays (close-on-exec) in this process until it exits. The
    /// helper also holds the user-channel socket (fd 3), so the channel is
    /// released exactly when the helper lets go of it, never racing its HCIDEVUP.
    static func spawnRestorer(index: UInt16, channel: Int32) throws -> pid_t {
        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else { throw RunError("pipe: \(errnoName(errno))", .failure) }
        _ = fcntl(fds[1], F_SETFD, FD_CLOEXEC)
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, fds[0], 0)
        posix_spawn_file_actions_addclose(&actions, fds[1])
        if channel >= 0 { posix_spawn_file_actions_adddup2(&actions, channel, 3) }
        var pid: pid_t = 0
        let exe = "/proc/self/exe"
        let args = ["attled", "__restore-hci", String(index)]
        var cargs: [UnsafeMutablePointer<CChar>?] = args.map { strdup($0) } + [nil]
        defer { for a in cargs { free(a) } }
        let rc = posix_spawn(&pid, exe, &actions, nil, &cargs, environ)
        _ = close(fds[0])
        guard rc == 0 else { _ = close(fds[1]); throw RunError("could not start the adapter restorer: \(errnoName(rc))", .failure) }
        // fds[1] is deliberately left open: its closing at our exit is the signal.
        return pid
    }

    /// The restorer: wait until the parent's pipe closes, then HCIDEVUP.
    static func runRestorer(_ args: [String]) -> Int32 {
        guard args.count == 2, let index = UInt16(args[1]) else { return 64 }
        signal(SIGINT, SIG_IGN) // Ctrl-C reaches the whole process group; outlive attled's clean-up
        signal(SIGTERM, SIG_IGN)
        var b: UInt8 = 0
        while true {
            let n = read(0, &b, 1)
            if n == 0 || (n < 0 && errno != EINTR) { break }
        }
        // attled is gone; let go of our reference to its user channel (fd 3),
        // which releases it, then bring the adapter up (EBUSY while the kernel
        // finishes closing it is retried).
        _ = close(3)
        if let e = UserChannelTransport.bringUp(index, retryMs: 10_000), e != ENODEV {
            Console.err("attled: warning: could not bring hci\(index) back up (HCIDEVUP: \(errnoName(e))); bring it up with 'hciconfig hci\(index) up' or 'bluetoothctl power on'")
            return 1
        }
        return 0
    }

    /// Home directory of a user (for the cache after dropping privileges).
    static func home(of uid: uid_t) -> String? {
        guard let pw = getpwuid(uid), let dir = pw.pointee.pw_dir else { return nil }
        return String(cString: dir)
    }
}
