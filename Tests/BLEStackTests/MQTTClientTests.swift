#if canImport(Glibc)
import Glibc
#endif
import Testing
@testable import BLEWire
@testable import MQTT
import Attled
import BLETransport

// MARK: - A real broker, started by the test

/// Why a test's set-up (broker, certificates, password file) failed.
struct BrokerSetupError: Error, CustomStringConvertible {
    let description: String
    init(_ d: String) { description = d }
}

/// Debian's `mosquitto` on a free loopback port with a config of the test's
/// choosing, in a directory of its own. `stop()` (also run by deinit) ends it.
final class TestBroker {
    let dir: String
    let port: Int
    let config: [String]
    private(set) var pid: pid_t = 0

    /// `config` lines come after `listener PORT 127.0.0.1`; nothing is persisted.
    init(dir: String, config: [String]) throws {
        self.dir = dir
        self.port = try freeLoopbackPort()
        self.config = config
        let text = (["listener \(port) 127.0.0.1", "persistence false", "log_dest stderr"] + config).joined(separator: "\n") + "\n"
        try writeFile("\(dir)/mosquitto.conf", text)
        try start()
    }

    deinit { stop() }

    /// Starts the broker and waits (up to 10 s) until its port accepts connections.
    func start() throws {
        let exe = try mosquittoPath()
        pid = try spawn([exe, "-c", "\(dir)/mosquitto.conf"], log: "\(dir)/mosquitto.log")
        let deadline = Instant.now().adding(ms: 10_000)
        while !canConnect(port: port) {
            var status: Int32 = 0
            if waitpid(pid, &status, WNOHANG) == pid {
                pid = 0
                throw BrokerSetupError("mosquitto exited at start (status \(status)); log:\n" + readText("\(dir)/mosquitto.log"))
            }
            if Instant.now() >= deadline {
                stop()
                throw BrokerSetupError("mosquitto did not listen on 127.0.0.1:\(port) within 10 s; log:\n" + readText("\(dir)/mosquitto.log"))
            }
            _ = poll(nil, 0, 20)
        }
    }

    /// Ends the broker: SIGTERM, then SIGKILL if it has not gone within 5 s.
    func stop() {
        guard pid > 0 else { return }
        _ = Glibc.kill(pid, SIGTERM)
        if !reap(within: 5000) {
            _ = Glibc.kill(pid, SIGKILL)
            _ = reap(within: 5000)
        }
        pid = 0
    }

    /// Kills the broker without warning (SIGKILL), as a crash would.
    func crash() {
        guard pid > 0 else { return }
        _ = Glibc.kill(pid, SIGKILL)
        _ = reap(within: 5000)
        pid = 0
    }

    private func reap(within ms: Int) -> Bool {
        let deadline = Instant.now().adding(ms: ms)
        var status: Int32 = 0
        while Instant.now() < deadline {
            let r = waitpid(pid, &status, WNOHANG)
            if r == pid || (r < 0 && errno == ECHILD) { return true }
            _ = poll(nil, 0, 10)
        }
        return false
    }
}

/// A fresh directory under /tmp that removes itself.
final class TempDir {
    let path: String
    init() throws {
        var template = Array("/tmp/attled-mqtt-XXXXXX".utf8CString)
        guard let p = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw BrokerSetupError("mkdtemp failed: errno \(errno)")
        }
        path = String(cString: p)
        // Started as root, mosquitto drops to user mosquitto: it must be able to read in here.
        _ = chmod(path, 0o755)
    }
    deinit { _ = try? run(["rm", "-rf", path]) }
}

/// A port on 127.0.0.1 that nothing listens on right now.
func freeLoopbackPort() throws -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw BrokerSetupError("socket: errno \(errno)") }
    defer { close(fd) }
    var addr = loopback(port: 0)
    let bound = withUnsafePointer(to: &addr) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard bound == 0 else { throw BrokerSetupError("bind: errno \(errno)") }
    var len = socklen_t(MemoryLayout<sockaddr_in>.size)
    let got = withUnsafeMutablePointer(to: &addr) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) }
    }
    guard got == 0 else { throw BrokerSetupError("getsockname: errno \(errno)") }
    return Int(UInt16(bigEndian: addr.sin_port))
}

private func loopback(port: UInt16) -> sockaddr_in {
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_port = port.bigEndian
    addr.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
    return addr
}

/// Whether a TCP connect to 127.0.0.1:`port` succeeds now.
func canConnect(port: Int) -> Bool {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return false }
    defer { close(fd) }
    var addr = loopback(port: UInt16(port))
    return withUnsafePointer(to: &addr) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    } == 0
}

/// Starts `argv` (found on PATH), output appended to `log` (or discarded).
func spawn(_ argv: [String], log: String? = nil) throws -> pid_t {
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
    posix_spawn_file_actions_addopen(&actions, 1, log ?? "/dev/null", O_WRONLY | O_CREAT | O_APPEND, 0o644)
    posix_spawn_file_actions_adddup2(&actions, 1, 2)
    // The child starts with no signal blocked and default dispositions: the
    // test process may block or ignore signals (signalfd), and a broker that
    // inherited that would not stop on SIGTERM.
    var attr = posix_spawnattr_t()
    posix_spawnattr_init(&attr)
    defer { posix_spawnattr_destroy(&attr) }
    var none = sigset_t(), defaults = sigset_t()
    sigemptyset(&none)
    sigemptyset(&defaults)
    for s in [SIGTERM, SIGINT, SIGHUP, SIGPIPE, SIGCHLD] { sigaddset(&defaults, s) }
    posix_spawnattr_setsigmask(&attr, &none)
    posix_spawnattr_setsigdefault(&attr, &defaults)
    posix_spawnattr_setflags(&attr, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
    var cargs: [UnsafeMutablePointer<CChar>?] = argv.map { strdup($0) } + [nil]
    defer { for a in cargs { free(a) } }
    var pid: pid_t = 0
    let rc = posix_spawnp(&pid, argv[0], &actions, &attr, &cargs, environ)
    guard rc == 0 else { throw BrokerSetupError("cannot start \(argv[0]): errno \(rc)") }
    return pid
}

/// Runs `argv` to completion (at most 120 s) and returns its exit status; output goes to `log`.
@discardableResult
func run(_ argv: [String], log: String? = nil) throws -> Int32 {
    let pid = try spawn(argv, log: log)
    let deadline = Instant.now().adding(ms: 120_000)
    var status: Int32 = 0
    while true {
        let r = waitpid(pid, &status, WNOHANG)
        if r == pid { break }
        if r < 0 && errno != EINTR { throw BrokerSetupError("waitpid \(argv[0]): errno \(errno)") }
        if Instant.now() >= deadline {
            _ = kill(pid, SIGKILL)
            _ = waitpid(pid, &status, 0)
            throw BrokerSetupError("\(argv.joined(separator: " ")) did not finish within 120 s")
        }
        _ = poll(nil, 0, 10)
    }
    // WIFEXITED / WEXITSTATUS by hand (the macros do not import).
    return status & 0x7F == 0 ? (status >> 8) & 0xFF : 128 + (status & 0x7F)
}

/// Runs `argv` and throws with its output unless it exits 0.
func runChecked(_ argv: [String], in dir: String) throws {
    let log = "\(dir)/command.log"
    _ = unlink(log)
    let rc = try run(argv, log: log)
    guard rc == 0 else {
        throw BrokerSetupError("\(argv.joined(separator: " ")) exited \(rc):\n" + readText(log))
    }
}

func writeFile(_ path: String, _ text: String) throws {
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
    guard fd >= 0 else { throw BrokerSetupError("cannot write \(path): errno \(errno)") }
    defer { close(fd) }
    let bytes = Array(text.utf8)
    guard bytes.withUnsafeBytes({ write(fd, $0.baseAddress, $0.count) }) == bytes.count else {
        throw BrokerSetupError("short write to \(path)")
    }
}

func readText(_ path: String) -> String {
    let fd = open(path, O_RDONLY)
    guard fd >= 0 else { return "" }
    defer { close(fd) }
    var out: [UInt8] = []
    var buf = [UInt8](repeating: 0, count: 4096)
    while true {
        let n = buf.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        if n <= 0 { break }
        out += buf[0..<n]
    }
    return String(decoding: out, as: UTF8.self)
}

func which(_ name: String) -> String? {
    let path = getenv("PATH").map { String(cString: $0) } ?? "/usr/bin:/bin"
    for d in path.split(separator: ":").map(String.init) + ["/usr/sbin", "/sbin", "/usr/local/sbin"] {
        let p = "\(d)/\(name)"
        if access(p, X_OK) == 0 { return p }
    }
    return nil
}

/// Debian's mosquitto broker; installed with apt-get when missing (as root),
/// and a thrown error, never a silent skip, when that cannot be done.
func mosquittoPath() throws -> String {
    if let p = which("mosquitto"), which("mosquitto_passwd") != nil { return p }
    guard getuid() == 0 else {
        throw BrokerSetupError("mosquitto is not installed and this is not root: apt-get install mosquitto")
    }
    if (try? run(["apt-get", "install", "-y", "-qq", "mosquitto"])) != 0 {
        try run(["apt-get", "update", "-qq"])
        try run(["apt-get", "install", "-y", "-qq", "mosquitto"])
    }
    guard let p = which("mosquitto") else { throw BrokerSetupError("apt-get install mosquitto did not provide mosquitto") }
    return p
}

/// A CA, a server certificate it signs for 127.0.0.1 and localhost, and an
/// unrelated CA, made with the openssl command-line tool in `d`.
func makeTestCA(in d: String) throws {
    guard let openssl = which("openssl") else { throw BrokerSetupError("openssl is missing: apt-get install openssl") }
    func ec(_ args: [String]) throws { try runChecked([openssl] + args, in: d) }
    let curve = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    try ec(["req", "-x509"] + curve + ["-keyout", "\(d)/ca.key", "-out", "\(d)/ca.crt", "-days", "2", "-subj", "/CN=attled test CA"])
    try ec(["req"] + curve + ["-keyout", "\(d)/server.key", "-out", "\(d)/server.csr", "-subj", "/CN=localhost"])
    try writeFile("\(d)/san.cnf", "subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    try ec(["x509", "-req", "-in", "\(d)/server.csr", "-CA", "\(d)/ca.crt", "-CAkey", "\(d)/ca.key",
            "-CAcreateserial", "-out", "\(d)/server.crt", "-days", "2", "-extfile", "\(d)/san.cnf"])
    try ec(["req", "-x509"] + curve + ["-keyout", "\(d)/other.key", "-out", "\(d)/other.crt", "-days", "2", "-subj", "/CN=some other CA"])
    _ = chmod("\(d)/server.key", 0o644) // the broker may drop to user mosquitto
}

/// A TCP proxy to the broker whose listen queue is full when the client
/// connects: the kernel drops the client's SYN, and its retransmission about a
/// second later gets through. This is what a broker across a real network
/// looks like to a non-blocking connect (the connect completes later, not at
/// once as it does on loopback). Serviced from the test's own loop.
final class SlowConnectProxy {
    let port: Int
    private let listener: Int32
    private var fillers: [Int32] = []
    private var pairs: [(Int32, Int32)] = []
    private let target: Int

    init(target: Int) throws {
        self.target = target
        port = try freeLoopbackPort()
        listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        var one: Int32 = 1
        setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var addr = loopback(port: UInt16(port))
        let ok = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard ok == 0, listen(listener, 0) == 0 else { throw BrokerSetupError("proxy listen: errno \(errno)") }
        // Fill the accept queue (one connection with backlog 0) and put one more SYN in the way.
        for _ in 0..<2 {
            let f = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
            var a = loopback(port: UInt16(port))
            _ = withUnsafePointer(to: &a) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(f, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            fillers.append(f)
        }
    }

    deinit {
        for f in fillers { close(f) }
        for (a, b) in pairs { close(a); close(b) }
        close(listener)
    }

    /// Accepts what is waiting (each to its own broker connection) and moves bytes both ways.
    func service() {
        while true {
            let c = accept(listener, nil, nil)
            if c < 0 { break }
            _ = fcntl(c, F_SETFL, O_NONBLOCK)
            let b = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var a = loopback(port: UInt16(target))
            _ = withUnsafePointer(to: &a) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(b, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            _ = fcntl(b, F_SETFL, O_NONBLOCK)
            pairs.append((c, b))
        }
        var buf = [UInt8](repeating: 0, count: 16384)
        for (x, y) in pairs {
            for (from, to) in [(x, y), (y, x)] {
                let n = buf.withUnsafeMutableBytes { read(from, $0.baseAddress, $0.count) }
                if n > 0 { _ = buf.withUnsafeBytes { write(to, $0.baseAddress, n) } }
            }
        }
    }
}

// MARK: - A client under test, with what it saw

/// An MQTTClient plus everything its callbacks reported.
final class Probe {
    let client: MQTTClient
    /// Each probe is served from an event loop of its own, as the gateway's client is from the gateway's.
    let loop = EventLoop()
    var connacks: [MQTTConnack] = []
    var disconnects: [MosquittoCode] = []
    var messages: [(topic: String, payload: String, retained: Bool)] = []

    init(_ options: MQTTOptions) throws {
        client = try MQTTClient(options)
        client.attach(to: loop)
        client.onConnect = { [unowned self] in self.connacks.append($0) }
        client.onDisconnect = { [unowned self] in self.disconnects.append($0) }
        client.onMessage = { [unowned self] topic, payload, retained in
            self.messages.append((topic, String(decoding: payload, as: UTF8.self), retained))
        }
    }

    var accepted: Bool { connacks.last == .accepted && client.state == .connected }

    /// Pumps until `condition` holds; false after `ms`.
    @discardableResult
    func pump(ms: Int = 5000, _ condition: () -> Bool) -> Bool {
        loop.runUntil(Instant.now().adding(ms: ms), condition)
    }

    /// Connects and waits for CONNACK accepted.
    func connectAndWait() throws {
        try client.connect()
        #expect(pump { !connacks.isEmpty || !disconnects.isEmpty }, "no CONNACK within 5 s")
        #expect(accepted, "connect refused: connacks \(connacks), disconnects \(disconnects)")
    }

    func received(_ topic: String, _ payload: String) -> Bool {
        messages.contains { $0.topic == topic && $0.payload == payload }
    }
}

extension EventLoop {
    /// Runs the loop (signals do not interrupt it) until `condition` holds (true) or `deadline` passes.
    @discardableResult
    func runUntil(_ deadline: Instant, _ condition: () -> Bool) -> Bool {
        (try? run(until: deadline, interruptible: false, condition)) ?? false
    }
}

/// Pumps several clients together until `condition` holds or `ms` pass.
@discardableResult
func pumpAll(_ probes: [Probe], ms: Int = 5000, _ condition: () -> Bool) -> Bool {
    let deadline = Instant.now().adding(ms: ms)
    while !condition() {
        if Instant.now() >= deadline { return false }
        for p in probes { p.loop.runUntil(Instant.now().adding(ms: 10)) { false } }
    }
    return true
}

private func options(_ broker: TestBroker, _ id: String, _ configure: (inout MQTTOptions) -> Void = { _ in }) -> MQTTOptions {
    var o = MQTTOptions(host: "127.0.0.1", port: broker.port, clientID: id, keepalive: 10)
    configure(&o)
    return o
}

// MARK: - Tests against Debian's mosquitto

@Suite("MQTT client against a real mosquitto broker", .serialized)
struct MQTTClientBrokerTests {
    @Test("connect, subscribe, publish, and receive our own message through the external poll loop")
    func roundTrip() throws {
        let tmp = try TempDir()
        let broker = try TestBroker(dir: tmp.path, config: ["allow_anonymous true"])
        defer { broker.stop() }
        let p = try Probe(options(broker, "rt"))
        #expect(p.client.socket == -1, "no socket before connect")
        try p.client.connect()
        #expect(p.client.socket >= 0, "connect opened a socket for the owner to poll")
        #expect(p.client.state == .connecting)
        #expect(p.pump { p.accepted })
        try p.client.subscribe(topic: "attled/test/#", qos: .atLeastOnce)
        try p.client.publish(topic: "attled/test/a", text: "hello", qos: .atLeastOnce)
        try p.client.publish(topic: "attled/test/bin", payload: [0x00, 0xFF, 0x80], qos: .atMostOnce)
        #expect(p.pump { p.messages.count >= 2 })
        #expect(p.messages.first?.topic == "attled/test/a")
        #expect(p.messages.first?.payload == "hello")
        #expect(p.messages.first?.retained == false, "a live message is not flagged retained")
        #expect(p.messages.last?.topic == "attled/test/bin")
        try p.client.disconnect()
        #expect(p.pump { !p.disconnects.isEmpty })
        #expect(p.disconnects == [.success], "a disconnect we asked for reports success")
        #expect(p.client.socket == -1)
    }

    @Test("binary payloads arrive byte for byte")
    func binaryPayload() throws {
        let tmp = try TempDir()
        let broker = try TestBroker(dir: tmp.path, config: ["allow_anonymous true"])
        defer { broker.stop() }
        let c = try MQTTClient(options(broker, "bin"))
        let loop = EventLoop()
        c.attach(to: loop)
        var got: [UInt8]?
        var connected = false
        c.onConnect = { connected = $0.isAccepted }
        c.onMessage = { _, payload, _ in got = payload }
        try c.connect()
        #expect(loop.runUntil(Instant.now().adding(ms: 5000)) { connected })
        try c.subscribe(topic: "bin")
        let bytes: [UInt8] = (0...255).map { UInt8($0) }
        try c.publish(topic: "bin", payload: bytes)
        #expect(loop.runUntil(Instant.now().adding(ms: 5000)) { got != nil })
        #expect(got == bytes)
    }

    @Test("a retained message reaches a later subscriber flagged retained")
    func retained() throws {
        let tmp = try TempDir()
        let broker = try TestBroker(dir: tmp.path, config: ["allow_anonymous true"])
        defer { broker.stop() }
        let a = try Probe(options(broker, "pub"))
        try a.connectAndWait()
        try a.client.subscribe(topic: "attled/r")
        try a.client.publish(topic: "attled/r", text: "kept", qos: .atLeastOnce, retain: true)
        // Our own copy coming back proves the broker has stored it.
        #expect(a.pump { a.received("attled/r", "kept") })
        #expect(a.messages.first?.retained == false)

        let b = try Probe(options(broker, "late"))
        try b.connectAndWait()
        try b.client.subscribe(topic: "attled/r")
        #expect(b.pump { b.received("attled/r", "kept") })
        #expect(b.messages.first?.retained == true, "delivered from the broker's store, so flagged retained")
    }

    @Test("the last will is published when a connection drops without DISCONNECT, and not on a clean one")
    func lastWill() throws {
        let tmp = try TempDir()
        let broker = try TestBroker(dir: tmp.path, config: ["allow_anonymous true"])
        defer { broker.stop() }
        let observer = try Probe(options(broker, "observer"))
        try observer.connectAndWait()
        try observer.client.subscribe(topic: "gw/+/availability", qos: .atLeastOnce)

        let will = MQTTWill(topic: "gw/1/availability", payload: Array("offline".utf8), qos: .atLeastOnce, retain: true)
        let gw = try Probe(options(broker, "gw1") { $0.will = will })
        try gw.connectAndWait()
        try gw.client.publish(topic: "gw/1/availability", text: "online", qos: .atLeastOnce, retain: true)
        #expect(pumpAll([observer, gw]) { observer.received("gw/1/availability", "online") })

        // Drop the TCP connection under libmosquitto's feet: no DISCONNECT goes out.
        _ = shutdown(gw.client.socket, Int32(SHUT_RDWR))
        #expect(pumpAll([observer, gw]) { !gw.disconnects.isEmpty && observer.received("gw/1/availability", "offline") })
        #expect(gw.disconnects.first != .success, "a lost connection reports an error code, got \(gw.disconnects)")
        #expect(gw.client.state == .disconnected)

        // The will is retained: a newcomer sees the gateway offline.
        let late = try Probe(options(broker, "late"))
        try late.connectAndWait()
        try late.client.subscribe(topic: "gw/1/availability")
        #expect(late.pump { late.received("gw/1/availability", "offline") })

        // A clean disconnect sends DISCONNECT: the broker discards the will.
        let will2 = MQTTWill(topic: "gw/2/availability", payload: Array("offline".utf8), qos: .atLeastOnce, retain: false)
        let gw2 = try Probe(options(broker, "gw2") { $0.will = will2 })
        try gw2.connectAndWait()
        try gw2.client.disconnect()
        #expect(gw2.pump { !gw2.disconnects.isEmpty })
        #expect(gw2.disconnects == [.success])
        // A marker published after the disconnect arrives; the will must not have come before it.
        try late.client.publish(topic: "gw/2/availability", text: "marker", qos: .atLeastOnce)
        #expect(pumpAll([observer, late]) { observer.received("gw/2/availability", "marker") })
        #expect(!observer.received("gw/2/availability", "offline"))
    }

    @Test("password authentication: right password accepted; wrong password and anonymous refused with the broker's reason")
    func passwordAuth() throws {
        let tmp = try TempDir()
        _ = try mosquittoPath()
        guard let passwd = which("mosquitto_passwd") else { throw BrokerSetupError("mosquitto_passwd is missing") }
        try writeFile("\(tmp.path)/passwd", "")
        try runChecked([passwd, "-b", "\(tmp.path)/passwd", "attled", "s3cret pass"], in: tmp.path)
        _ = chmod("\(tmp.path)/passwd", 0o644) // readable by the broker after it drops root
        let broker = try TestBroker(dir: tmp.path, config: ["allow_anonymous false", "password_file \(tmp.path)/passwd"])
        defer { broker.stop() }

        let good = try Probe(options(broker, "good") { $0.username = "attled"; $0.password = "s3cret pass" })
        try good.connectAndWait()
        try good.client.subscribe(topic: "auth/t")
        try good.client.publish(topic: "auth/t", text: "in")
        #expect(good.pump { good.received("auth/t", "in") })

        for (id, user, pass) in [("bad", "attled", "wrong"), ("anon", nil, nil) as (String, String?, String?)] {
            let p = try Probe(options(broker, id) { $0.username = user; $0.password = pass })
            try p.client.connect()
            #expect(p.pump { !p.connacks.isEmpty })
            let ack = try #require(p.connacks.first)
            #expect(!ack.isAccepted)
            #expect(ack == .notAuthorised || ack == .badUsernameOrPassword, "got \(ack)")
            #expect(ack.description.contains("password file") || ack.description.contains("allow_anonymous"),
                    "the reason says what to check: \(ack)")
            #expect(p.pump { p.client.socket == -1 }, "the refused connection is closed")
            #expect(p.client.state == .disconnected)
        }
    }

    @Test("TLS with a CA made for the test: verified connection works; a different CA is refused")
    func tls() throws {
        let tmp = try TempDir()
        let d = tmp.path
        try makeTestCA(in: d)
        let broker = try TestBroker(dir: d, config: [
            "allow_anonymous true", "cafile \(d)/ca.crt", "certfile \(d)/server.crt", "keyfile \(d)/server.key",
        ])
        defer { broker.stop() }

        let p = try Probe(options(broker, "tls") { $0.tlsCAFile = "\(d)/ca.crt" })
        try p.connectAndWait()
        try p.client.subscribe(topic: "tls/t")
        try p.client.publish(topic: "tls/t", text: "secret")
        #expect(p.pump { p.received("tls/t", "secret") })

        // Straight to the broker, the handshake may fail inside connect() (the
        // broker answers the ClientHello before SSL_connect gives up waiting) or,
        // on a busy machine, later in the poll loop; both must be reported.
        let wrong = try Probe(options(broker, "wrongca") { $0.tlsCAFile = "\(d)/other.crt" })
        var thrown: MQTTError?
        do { try wrong.client.connect() } catch { thrown = error }
        if thrown == nil {
            #expect(wrong.pump { !wrong.disconnects.isEmpty || !wrong.connacks.isEmpty })
            #expect(wrong.connacks.isEmpty, "no CONNACK through an unverified TLS session")
            #expect(!wrong.disconnects.isEmpty && wrong.disconnects.first != .success)
        }
        #expect(wrong.client.state != .connected)

        // Through a proxy whose TCP connect completes late, connect() cannot get
        // as far as the broker's certificate: the refusal always comes in the
        // poll loop, where libmosquitto 2.0.11 closes the socket without calling
        // on_disconnect. The client must still report it.
        let proxy = try SlowConnectProxy(target: broker.port)
        var far = MQTTOptions(host: "127.0.0.1", port: proxy.port, clientID: "wrongca-far", keepalive: 10)
        far.tlsCAFile = "\(d)/other.crt"
        let late = try Probe(far)
        try late.client.connect()
        #expect(late.client.socket >= 0 && late.client.state == .connecting, "connect() returned before the handshake")
        let deadline = Instant.now().adding(ms: 6000)
        while late.disconnects.isEmpty && late.connacks.isEmpty && Instant.now() < deadline {
            late.loop.runUntil(Instant.now().adding(ms: 10)) { !late.disconnects.isEmpty }
            proxy.service()
        }
        #expect(late.connacks.isEmpty, "no CONNACK through an unverified TLS session")
        #expect(late.disconnects == [.tls], "the failed handshake is reported once, as a TLS error: \(late.disconnects)")
        #expect(late.client.socket == -1)
        #expect(late.client.state == .disconnected)

        let plain = try Probe(options(broker, "plain"))
        try plain.client.connect()
        #expect(plain.pump { !plain.disconnects.isEmpty || !plain.connacks.isEmpty })
        #expect(!plain.accepted, "plain MQTT to a TLS listener does not get through")
    }

    @Test("TLS to a broker whose TCP connect completes late (as across a network) still handshakes in the external loop")
    func tlsSlowConnect() throws {
        let tmp = try TempDir()
        let d = tmp.path
        try makeTestCA(in: d)
        let broker = try TestBroker(dir: d, config: [
            "allow_anonymous true", "cafile \(d)/ca.crt", "certfile \(d)/server.crt", "keyfile \(d)/server.key",
        ])
        defer { broker.stop() }
        let proxy = try SlowConnectProxy(target: broker.port)
        var o = MQTTOptions(host: "127.0.0.1", port: proxy.port, clientID: "far", keepalive: 10)
        o.tlsCAFile = "\(d)/ca.crt"
        let p = try Probe(o)
        try p.client.connect()
        let deadline = Instant.now().adding(ms: 6000)
        while !(p.accepted || !p.disconnects.isEmpty) && Instant.now() < deadline {
            p.loop.runUntil(Instant.now().adding(ms: 10)) { false }
            proxy.service()
        }
        #expect(p.accepted, "CONNACK through TLS after a late TCP connect: connacks \(p.connacks), disconnects \(p.disconnects)")
    }

    @Test("broker killed: onDisconnect fires; after restart a reconnect paced by Backoff works and traffic flows")
    func brokerRestart() throws {
        let tmp = try TempDir()
        let broker = try TestBroker(dir: tmp.path, config: ["allow_anonymous true"])
        defer { broker.stop() }
        let p = try Probe(options(broker, "phoenix"))
        try p.connectAndWait()
        try p.client.subscribe(topic: "x")

        broker.crash()
        #expect(p.pump { !p.disconnects.isEmpty }, "the loss is noticed (read returns EOF)")
        #expect(p.disconnects.first != .success)
        #expect(p.client.socket == -1)
        #expect(p.client.state == .disconnected)

        // While the broker is down, a reconnect fails (now or through onDisconnect).
        var backoff = Backoff(initialMs: 20, maxMs: 200, multiplier: 2, jitter: 0.5)
        var failures = 0
        do {
            try p.client.reconnect()
            _ = p.pump(ms: 2000) { p.disconnects.count >= 2 || p.accepted }
            #expect(p.disconnects.count >= 2, "a reconnect to a dead broker reports a disconnect")
        } catch {
            failures += 1
            #expect(error.description.contains("reconnect"), "\(error)")
        }

        try broker.start()
        let deadline = Instant.now().adding(ms: 10_000)
        let connacksBefore = p.connacks.count
        while p.connacks.count == connacksBefore && Instant.now() < deadline {
            do {
                try p.client.reconnect()
                _ = p.pump(ms: 2000) { p.connacks.count > connacksBefore || p.client.socket == -1 }
            } catch {
                failures += 1
            }
            if p.connacks.count == connacksBefore {
                let wait = backoff.next()
                #expect(wait >= 1 && wait <= 200)
                _ = p.pump(ms: wait) { false }
            }
        }
        #expect(p.accepted, "reconnected after the broker came back (attempts that failed: \(failures))")
        backoff.reset()
        // clean session: subscriptions are gone, so subscribe again.
        try p.client.subscribe(topic: "x")
        try p.client.publish(topic: "x", text: "again")
        #expect(p.pump { p.received("x", "again") })
    }

    @Test("connecting to a port nothing listens on fails with ECONNREFUSED advice, at once or through onDisconnect")
    func refused() throws {
        let port = try freeLoopbackPort()
        let p = try Probe(MQTTOptions(host: "127.0.0.1", port: port, clientID: "nobody"))
        do {
            try p.client.connect()
            #expect(p.pump { !p.disconnects.isEmpty })
            #expect(p.disconnects.first != .success)
            #expect(p.connacks.isEmpty)
        } catch {
            guard case .library(_, let code, let e) = error else { Issue.record("unexpected \(error)"); return }
            #expect(code == .errno && e == ECONNREFUSED)
            #expect(error.description.contains("is the broker running?"), "\(error)")
        }
        #expect(p.client.state == .disconnected)
    }
}

@Suite("MQTT client: options and errors without a broker")
struct MQTTClientOptionTests {
    @Test("options libmosquitto would refuse are refused first, saying which and why")
    func invalidOptions() {
        #expect(throws: MQTTError.invalidArgument("keepalive 2 s is outside 5...65535")) {
            try MQTTClient(MQTTOptions(host: "h", clientID: "c", keepalive: 2))
        }
        #expect(throws: MQTTError.invalidArgument("port 0 is outside 1...65535")) {
            try MQTTClient(MQTTOptions(host: "h", port: 0, clientID: "c"))
        }
        #expect(throws: MQTTError.invalidArgument("no broker host given")) {
            try MQTTClient(MQTTOptions(host: "", clientID: "c"))
        }
        do {
            _ = try MQTTClient(MQTTOptions(host: "h", clientID: "c", tlsCAFile: "/nonexistent/ca.crt"))
            Issue.record("a missing CA file was accepted")
        } catch {
            #expect(error.description.contains("/nonexistent/ca.crt"))
            #expect(error.description.contains("No such file"))
        }
    }

    @Test("publish and subscribe before connecting fail with no-connection and say what to do")
    func notConnected() throws {
        let c = try MQTTClient(MQTTOptions(host: "127.0.0.1", clientID: "idle"))
        #expect(c.state == .idle)
        #expect(c.socket == -1)
        #expect(c.handleReadable() == .noConnection)
        #expect(c.periodic() == .noConnection)
        do {
            try c.publish(topic: "t", text: "x")
            Issue.record("publish without a connection succeeded")
        } catch {
            #expect(error == .library(operation: "publish to t", code: .noConnection, errno: 0))
            #expect(error.description.contains("connect first"))
        }
    }

    @Test("a NUL inside a topic, id or password is refused instead of silently cutting the C string short")
    func nulBytes() throws {
        #expect(throws: MQTTError.invalidArgument("the client id contains a NUL byte")) {
            try MQTTClient(MQTTOptions(host: "h", clientID: "a\u{0}b"))
        }
        #expect(throws: MQTTError.invalidArgument("the password contains a NUL byte")) {
            try MQTTClient(MQTTOptions(host: "h", clientID: "c", username: "u", password: "p\u{0}"))
        }
        let c = try MQTTClient(MQTTOptions(host: "127.0.0.1", clientID: "n"))
        #expect(throws: MQTTError.invalidArgument("the topic contains a NUL byte")) { try c.publish(topic: "a\u{0}/b", text: "x") }
        #expect(throws: MQTTError.invalidArgument("the topic contains a NUL byte")) { try c.subscribe(topic: "a\u{0}") }
    }

    @Test("a publish to a wildcard topic is refused by libmosquitto with its reason")
    func wildcardPublish() throws {
        let c = try MQTTClient(MQTTOptions(host: "127.0.0.1", clientID: "w"))
        #expect(throws: MQTTError.library(operation: "publish to a/#", code: .invalid, errno: 0)) { try c.publish(topic: "a/#", text: "x") }
    }

    @Test("codes print libmosquitto's own text")
    func codeText() {
        #expect(MosquittoCode.connectionLost.description == "The connection was lost.")
        #expect(MQTTConnack.notAuthorised.description.hasPrefix("Connection Refused: not authorised."))
        #expect(MQTTConnack(42).description.contains("CONNACK 42"))
    }
}

@Suite("Backoff")
struct BackoffTests {
    @Test("without jitter the delays grow by the multiplier and stop at the maximum")
    func exponential() {
        var b = Backoff(initialMs: 100, maxMs: 1000, multiplier: 2, jitter: 0)
        #expect((0..<7).map { _ in b.next(unit: 0.5) } == [100, 200, 400, 800, 1000, 1000, 1000])
        #expect(b.attempt == 7)
        b.reset()
        #expect(b.next(unit: 0.9) == 100)
    }

    @Test("jitter lowers a delay by at most its fraction and never raises it above the maximum")
    func jitterBounds() {
        var b = Backoff(initialMs: 1000, maxMs: 4000, multiplier: 2, jitter: 0.25)
        #expect(b.next(unit: 0) == 1000)
        #expect(b.next(unit: 1) == 1500) // 2000 × (1 − 0.25)
        #expect(b.next(unit: 0.5) == 3500) // 4000 × (1 − 0.125)
        var g = SystemRandomNumberGenerator()
        var c = Backoff(initialMs: 1000, maxMs: 4000, multiplier: 2, jitter: 0.25)
        for attempt in 0..<50 {
            let base = c.baseDelayMs(attempt: attempt)
            let d = c.next(using: &g)
            #expect(d <= base && d >= base * 3 / 4, "attempt \(attempt): \(d) outside [\(base * 3 / 4), \(base)]")
            #expect(d <= 4000)
        }
    }

    @Test("nonsense parameters are clamped, not trapped on, and huge attempt counts do not overflow")
    func clamped() {
        var b = Backoff(initialMs: -5, maxMs: -1, multiplier: .nan, jitter: 7)
        #expect(b.initialMs == 1 && b.maxMs == 1 && b.multiplier == 1 && b.jitter == 1)
        #expect(b.next(unit: .infinity) >= 1)
        var big = Backoff(initialMs: Int.max, maxMs: Int.max, multiplier: 1e300, jitter: 1)
        #expect(big.maxMs == Backoff.ceilingMs)
        #expect(big.baseDelayMs(attempt: 1_000_000) == Backoff.ceilingMs)
        #expect(big.next(unit: 0) == Backoff.ceilingMs)
        let slow = Backoff(initialMs: 500, maxMs: 60_000, multiplier: 1.5, jitter: 0)
        #expect(slow.baseDelayMs(attempt: Int.max) == 60_000)
    }
}
