#if canImport(Glibc)
import Glibc
#endif
import BLEWire
import BLETransport
import CMosquitto
import CMosquittoLoader

// MARK: - The client

/// An MQTT 3.1.1 or 5 client over libmosquitto, driven by its owner's poll loop.
///
/// libmosquitto never runs a thread here (no `mosquitto_loop_start`). The owner:
/// - polls `socket` (when it is not -1) for POLLIN, and for POLLOUT while `wantsWrite`;
/// - calls `handleReadable()` on POLLIN/POLLERR/POLLHUP and `handleWritable()` on POLLOUT;
/// - calls `periodic()` about once a second (keepalive PINGs, QoS retries) and
///   after any poll that returned, so timeouts are seen even on a quiet socket.
///
/// Callbacks run synchronously inside those calls, on the owner's thread; they
/// may publish, subscribe or disconnect. Reconnecting is the owner's policy:
/// after `onDisconnect` the socket is -1 until `reconnect()`, paced by `Backoff`.
///
/// The host name is resolved with a blocking getaddrinfo inside `connect()`;
/// give an address or a name the local resolver answers at once. The TCP
/// connect and the TLS handshake do not block.
public final class MQTTClient {
    /// Where the connection stands, as the callbacks have reported it.
    public enum State: Sendable, Equatable {
        case idle, connecting, connected, disconnected
    }

    public let options: MQTTOptions
    public private(set) var state: State = .idle

    /// CONNACK arrived: `.accepted`, or the broker's reason for refusing (a refused
    /// connection is followed by `onDisconnect`).
    public var onConnect: ((MQTTConnack) -> Void)?
    /// The connection ended: `.success` when we asked (`disconnect()`), otherwise why it was lost.
    public var onDisconnect: ((MosquittoCode) -> Void)?
    /// A message on a subscribed topic: topic, payload, and whether it is a retained message
    /// delivered because we subscribed (rather than published live).
    public var onMessage: ((String, [UInt8], Bool) -> Void)?

    private let mosq: OpaquePointer
    /// Set by connect/reconnect until the socket first reports writable: the
    /// non-blocking TCP connect has completed then. libmosquitto 2.0.11 moves a
    /// TLS handshake on only inside loop_read, and does not ask for POLLOUT while
    /// the TCP connect is pending; without this nudge a TLS connection to a broker
    /// that is not on loopback stalls before the ClientHello (see the
    /// "TCP connect completes late" test).
    private var connectPending = false
    /// Counts `onDisconnect` deliveries, so a call after which libmosquitto has
    /// closed the socket without one can be told apart (see `drive`).
    private var disconnectsReported = 0

    /// mosquitto_lib_init runs once per process, the first time a client is made.
    private static let libraryInit: Int32 = mosquitto_lib_init()

    /// Makes a client and applies every option; nothing touches the network yet.
    public init(_ options: MQTTOptions) throws(MQTTError) {
        guard options.port > 0 && options.port <= 65535 else {
            throw .invalidArgument("port \(options.port) is outside 1...65535")
        }
        guard options.keepalive >= 5 && options.keepalive <= 65535 else {
            throw .invalidArgument("keepalive \(options.keepalive) s is outside 5...65535")
        }
        guard !options.host.isEmpty else { throw .invalidArgument("no broker host given") }
        guard !options.clientID.isEmpty, options.clientID.utf8.count <= 65535 else {
            throw .invalidArgument("the client id must be 1 to 65535 bytes")
        }
        try MQTTClient.checkText(options.host, "broker host")
        try MQTTClient.checkText(options.clientID, "client id")
        if let u = options.username { try MQTTClient.checkText(u, "user name") }
        if let p = options.password { try MQTTClient.checkText(p, "password") }
        if let w = options.will { try MQTTClient.checkText(w.topic, "will topic") }
        guard attled_mosquitto_open() == 0 else {
            throw .libraryMissing(attled_mosquitto_error().map { String(cString: $0) } ?? "dlopen failed")
        }
        let initResult = MQTTClient.libraryInit
        guard initResult == MOSQ_ERR_SUCCESS.rawValue else {
            throw .library(operation: "lib_init", code: MosquittoCode(initResult), errno: 0)
        }
        guard let m = mosquitto_new(options.clientID, options.cleanSession, nil) else {
            throw .library(operation: "new", code: Glibc.errno == EINVAL ? .invalid : .noMemory, errno: Glibc.errno)
        }
        self.mosq = m
        self.options = options
        // From here on deinit destroys `m` if an option below is refused.
        mosquitto_user_data_set(m, Unmanaged.passUnretained(self).toOpaque())
        mosquitto_connect_callback_set(m) { _, obj, rc in
            guard let obj else { return }
            Unmanaged<MQTTClient>.fromOpaque(obj).takeUnretainedValue().didConnect(rc)
        }
        mosquitto_disconnect_callback_set(m) { _, obj, rc in
            guard let obj else { return }
            Unmanaged<MQTTClient>.fromOpaque(obj).takeUnretainedValue().didDisconnect(rc)
        }
        mosquitto_message_callback_set(m) { _, obj, message in
            guard let obj, let message else { return }
            Unmanaged<MQTTClient>.fromOpaque(obj).takeUnretainedValue().didReceive(message.pointee)
        }
        if options.version == .v5 {
            try check("protocol_version", mosquitto_int_option(m, MOSQ_OPT_PROTOCOL_VERSION, Int32(MQTT_PROTOCOL_V5)))
        }
        // Commands are small and latency matters: no Nagle delay on our side.
        try check("tcp_nodelay", mosquitto_int_option(m, MOSQ_OPT_TCP_NODELAY, 1))
        if let user = options.username {
            try check("username_pw_set", mosquitto_username_pw_set(m, user, options.password))
        }
        if let will = options.will {
            guard will.payload.count <= 268_435_455 else { throw .invalidArgument("the will payload is too large") }
            let rc = will.payload.withUnsafeBytes {
                mosquitto_will_set(m, will.topic, Int32(will.payload.count), $0.baseAddress, will.qos.rawValue, will.retain)
            }
            try check("will_set", rc)
        }
        if let ca = options.tlsCAFile {
            // libmosquitto checks the file itself, but only says "invalid"; say which file.
            guard access(ca, R_OK) == 0 else {
                let e = Glibc.errno
                throw .invalidArgument("cannot read the TLS CA file \(ca): " + (strerror(e).map { String(cString: $0) } ?? "errno \(e)"))
            }
            try check("tls_set", mosquitto_tls_set(m, ca, nil, nil, nil, nil))
        }
    }

    deinit {
        detach()
        mosquitto_destroy(mosq)
    }

    // MARK: Connection

    /// Starts connecting: resolves the host, opens a non-blocking socket and
    /// queues CONNECT. `onConnect` reports the broker's answer.
    public func connect() throws(MQTTError) {
        defer { syncLoop() }
        state = .connecting
        let rc = mosquitto_connect_async(mosq, options.host, Int32(options.port), Int32(options.keepalive))
        do {
            try check("connect to \(options.host):\(options.port)", rc)
            connectPending = true
        } catch {
            state = .disconnected
            connectPending = false
            throw error
        }
    }

    /// Connects again with the same options after `onDisconnect` (the owner paces this).
    public func reconnect() throws(MQTTError) {
        defer { syncLoop() }
        state = .connecting
        let rc = mosquitto_reconnect_async(mosq)
        do {
            try check("reconnect to \(options.host):\(options.port)", rc)
            connectPending = true
        } catch {
            state = .disconnected
            connectPending = false
            throw error
        }
    }

    /// Sends DISCONNECT (so the broker does not publish the will); `onDisconnect`
    /// follows with `.success` once it is written.
    public func disconnect() throws(MQTTError) {
        defer { syncLoop() }
        try check("disconnect", mosquitto_disconnect(mosq))
    }

    // MARK: The owner's poll loop

    /// The broker socket to poll, or -1 while there is no connection.
    public var socket: Int32 { mosquitto_socket(mosq) }

    /// Whether to poll for POLLOUT too: libmosquitto has bytes waiting to go
    /// out, or the TCP connect has not completed yet.
    public var wantsWrite: Bool { connectPending || mosquitto_want_write(mosq) }

    /// Reads and handles what the broker sent. A lost connection is reported
    /// through `onDisconnect`; the returned code is for logging.
    @discardableResult
    public func handleReadable() -> MosquittoCode {
        guard socket >= 0 else { return .noConnection }
        return drive { mosquitto_loop_read(mosq, 1) }
    }

    /// Writes what is queued. The first call after connecting also starts the
    /// TLS handshake, which libmosquitto only advances from its read path.
    @discardableResult
    public func handleWritable() -> MosquittoCode {
        guard socket >= 0 else { return .noConnection }
        if connectPending {
            connectPending = false
            let rc = drive { mosquitto_loop_read(mosq, 1) }
            guard rc == .success, socket >= 0 else { return rc }
        }
        return drive { mosquitto_loop_write(mosq, 1) }
    }

    /// Keepalive and retries (`mosquitto_loop_misc`); call about once a second.
    @discardableResult
    public func periodic() -> MosquittoCode {
        guard socket >= 0 else { return .noConnection }
        return drive { mosquitto_loop_misc(mosq) }
    }

    /// Runs one libmosquitto loop step on a live socket and makes sure a
    /// connection it ended is reported. libmosquitto 2.0.11 has a path that
    /// closes the socket without calling on_disconnect: while the TLS handshake
    /// is in progress, `mosquitto_loop_read` hands the step to SSL_connect, and
    /// when that fails for good (say the broker's certificate does not verify
    /// against our CA) it closes the socket and returns MOSQ_ERR_TLS, skipping
    /// the disconnect handling (and on_disconnect) its other errors get. Left
    /// alone the client would sit in `.connecting` with socket -1 forever, so
    /// report the loss here, with the step's code.
    private func drive(_ step: () -> Int32) -> MosquittoCode {
        defer { syncLoop() }
        let reported = disconnectsReported
        let rc = MosquittoCode(step())
        if socket < 0, disconnectsReported == reported, state == .connecting || state == .connected {
            didDisconnect(rc == .success ? MosquittoCode.connectionLost.rawValue : rc.rawValue)
        }
        return rc
    }

    // MARK: Messages

    /// Queues a PUBLISH; it goes out on the next `handleWritable()` (or at once
    /// when the socket takes it). Returns the message id.
    ///
    /// With `expirySeconds` on an MQTT 5 connection the broker drops the
    /// message (a retained one too) once it is that old, and forwards it with
    /// the time left (MQTT 5.0 section 3.3.2.3.3); on MQTT 3.1.1 it is ignored.
    @discardableResult
    public func publish(topic: String, payload: [UInt8], qos: MQTTQoS = .atMostOnce, retain: Bool = false,
                        expirySeconds: UInt32? = nil) throws(MQTTError) -> Int32 {
        defer { syncLoop() }
        guard payload.count <= 268_435_455 else {
            throw .invalidArgument("payload of \(payload.count) bytes is larger than MQTT allows")
        }
        try MQTTClient.checkText(topic, "topic")
        var mid: Int32 = 0
        let rc: Int32
        if let expirySeconds, options.version == .v5 {
            var props: OpaquePointer? = nil
            defer { mosquitto_property_free_all(&props) }
            try check("property_add_int32", mosquitto_property_add_int32(&props, Int32(MQTT_PROP_MESSAGE_EXPIRY_INTERVAL.rawValue), expirySeconds))
            rc = payload.withUnsafeBytes {
                mosquitto_publish_v5(mosq, &mid, topic, Int32(payload.count), $0.baseAddress, qos.rawValue, retain, props)
            }
        } else {
            rc = payload.withUnsafeBytes {
                mosquitto_publish(mosq, &mid, topic, Int32(payload.count), $0.baseAddress, qos.rawValue, retain)
            }
        }
        try check("publish to \(topic)", rc)
        return mid
    }

    /// Publishes UTF-8 text.
    @discardableResult
    public func publish(topic: String, text: String, qos: MQTTQoS = .atMostOnce, retain: Bool = false) throws(MQTTError) -> Int32 {
        try publish(topic: topic, payload: Array(text.utf8), qos: qos, retain: retain)
    }

    /// Queues a SUBSCRIBE for `topic` (wildcards allowed). Returns the message id.
    @discardableResult
    public func subscribe(topic: String, qos: MQTTQoS = .atMostOnce) throws(MQTTError) -> Int32 {
        defer { syncLoop() }
        try MQTTClient.checkText(topic, "topic")
        var mid: Int32 = 0
        try check("subscribe to \(topic)", mosquitto_subscribe(mosq, &mid, topic, qos.rawValue))
        return mid
    }

    // MARK: Serving from the event loop

    /// Serves this client from `loop`: its socket is watched (readable, and
    /// writable while libmosquitto has bytes to send or a connect is
    /// pending) and followed across reconnects, and libmosquitto's
    /// housekeeping (keepalive, retries) runs every second. The owner then
    /// only runs the loop; nothing here blocks.
    public func attach(to loop: EventLoop) {
        detach()
        self.loop = loop
        syncLoop()
        schedulePeriodic()
    }

    /// Stops serving from the loop (the connection stays as it is).
    public func detach() {
        if let loop {
            if let w = watchToken { loop.cancel(w) }
            if let t = periodicToken { loop.cancel(t) }
        }
        watchToken = nil; periodicToken = nil; watchedFD = -1
        loop = nil
    }

    private var loop: EventLoop?
    private var watchToken: EventLoop.Token?
    private var watchedFD: Int32 = -1
    private var periodicToken: EventLoop.Token?

    private func schedulePeriodic() {
        guard let loop else { return }
        periodicToken = loop.schedule(afterMs: 1000) { [weak self] in
            guard let self else { return }
            self.periodic()
            self.schedulePeriodic()
        }
    }

    /// Keeps the watch on the current socket with the current interest.
    private func syncLoop() {
        guard let loop else { return }
        let fd = socket
        var want: EventLoop.Events = .readable
        if wantsWrite { want.insert(.writable) }
        if fd != watchedFD {
            if let w = watchToken { loop.cancel(w) }
            watchToken = nil
            watchedFD = fd
            if fd >= 0 {
                watchToken = loop.watch(fd, want) { [weak self] ev in
                    guard let self else { return }
                    if !ev.isDisjoint(with: [.readable, .hangup]) { self.handleReadable() }
                    if ev.contains(.writable), self.socket >= 0 { self.handleWritable() }
                }
            }
        } else if let w = watchToken, loop.events(of: w) != want {
            loop.update(w, want)
        }
    }

    // MARK: Callbacks from libmosquitto

    private func didConnect(_ rc: Int32) {
        let ack = MQTTConnack(rc)
        connectPending = false
        state = ack.isAccepted ? .connected : .disconnected
        onConnect?(ack)
    }

    private func didDisconnect(_ rc: Int32) {
        var code = MosquittoCode(rc)
        // libmosquitto 2.0.21 with OpenSSL 3.5 (Debian 13) ends a TLS handshake
        // that failed for good in the loop (the broker's certificate does not
        // verify) with MOSQ_ERR_ERRNO and errno EPROTO, where 2.0.11 (Debian 12)
        // says MOSQ_ERR_TLS. Before any CONNACK on a TLS connection that is the
        // handshake's failure: say so.
        if code == .errno, Glibc.errno == EPROTO, options.tlsCAFile != nil, state == .connecting { code = .tls }
        disconnectsReported &+= 1
        state = .disconnected
        connectPending = false
        onDisconnect?(code)
    }

    private func didReceive(_ m: mosquitto_message) {
        let topic = m.topic.map { String(cString: $0) } ?? ""
        var payload: [UInt8] = []
        if let p = m.payload, m.payloadlen > 0 {
            payload = Array(UnsafeRawBufferPointer(start: p, count: Int(m.payloadlen)))
        }
        onMessage?(topic, payload, m.retain)
    }

    /// Strings go to libmosquitto as C strings: a NUL would silently cut them short.
    private static func checkText(_ s: String, _ what: String) throws(MQTTError) {
        if s.utf8.contains(0) { throw .invalidArgument("the \(what) contains a NUL byte") }
    }

    private func check(_ operation: String, _ rc: Int32) throws(MQTTError) {
        // MOSQ_ERR_CONN_PENDING (-1) means "connect in progress": not a failure.
        guard rc != MOSQ_ERR_SUCCESS.rawValue && rc != MOSQ_ERR_CONN_PENDING.rawValue else { return }
        throw .library(operation: operation, code: MosquittoCode(rc), errno: rc == MOSQ_ERR_ERRNO.rawValue ? Glibc.errno : 0)
    }
}
