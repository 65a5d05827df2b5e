#if canImport(Glibc)
import Glibc
#endif
import BLEWire

/// Why a listening socket could not be opened.
public enum ListenError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The host is not a numeric IPv4 or IPv6 address, or resolves to none.
    case badHost(String)
    /// socket, bind or listen failed with this errno (EADDRINUSE: the port is taken).
    case system(operation: String, host: String, port: UInt16, errno: Int32)

    public var description: String {
        switch self {
        case let .badHost(h): return "cannot listen on '\(h)': not an address of this machine (give an IPv4 or IPv6 address, or 0.0.0.0)"
        case let .system(op, h, p, e):
            let hint = e == EADDRINUSE ? ": another program listens on port \(p) (stop it, or choose another port)"
                : e == EACCES ? ": ports below 1024 need root or CAP_NET_BIND_SERVICE" : ""
            return "cannot listen on \(h):\(p): \(op) failed with \(errnoName(e))\(hint)"
        }
    }
}

/// A listening TCP socket, non-blocking, for a server on the event loop
/// (the proxy's API port). Connections are accepted as `TCPStream`s.
public final class TCPListener {
    public let fd: Int32
    /// The port bound (the one asked for, or the kernel's pick for port 0).
    public let port: UInt16
    public let host: String

    /// Binds `host:port` (numeric address; "0.0.0.0" or "::" for every
    /// interface) and listens.
    /// - Throws: `ListenError`.
    public init(host: String, port: UInt16) throws(ListenError) {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_flags = AI_NUMERICHOST | AI_PASSIVE
        var res: UnsafeMutablePointer<addrinfo>? = nil
        guard getaddrinfo(host, String(port), &hints, &res) == 0, let a = res else { throw .badHost(host) }
        defer { freeaddrinfo(res) }
        let fd = socket(a.pointee.ai_family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard fd >= 0 else { throw .system(operation: "socket", host: host, port: port, errno: errno) }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        guard bind(fd, a.pointee.ai_addr, a.pointee.ai_addrlen) == 0 else {
            let e = errno
            _ = Glibc.close(fd)
            throw .system(operation: "bind", host: host, port: port, errno: e)
        }
        guard listen(fd, 16) == 0 else {
            let e = errno
            _ = Glibc.close(fd)
            throw .system(operation: "listen", host: host, port: port, errno: e)
        }
        var ss = sockaddr_storage()
        var len = socklen_t(MemoryLayout<sockaddr_storage>.size)
        var bound = port
        withUnsafeMutablePointer(to: &ss) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa in
                if getsockname(fd, sa, &len) == 0 { bound = Self.port(of: sa) ?? port }
            }
        }
        self.fd = fd
        self.host = host
        self.port = bound
    }

    /// The next waiting connection (non-blocking, TCP_NODELAY), nil when none waits.
    public func accept() -> TCPStream? {
        var ss = sockaddr_storage()
        var len = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let c = withUnsafeMutablePointer(to: &ss) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.accept(fd, $0, &len) }
        }
        guard c >= 0 else { return nil }
        _ = fcntl(c, F_SETFL, fcntl(c, F_GETFL) | O_NONBLOCK)
        _ = fcntl(c, F_SETFD, FD_CLOEXEC)
        var one: Int32 = 1
        setsockopt(c, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        let peer = withUnsafeMutablePointer(to: &ss) { p in p.withMemoryRebound(to: sockaddr.self, capacity: 1) { Self.text(of: $0) } }
        return TCPStream(fd: c, peer: peer)
    }

    public func close() { _ = Glibc.close(fd) }

    static func port(of sa: UnsafePointer<sockaddr>) -> UInt16? {
        switch Int32(sa.pointee.sa_family) {
        case AF_INET: return sa.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin_port) }
        case AF_INET6: return sa.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin6_port) }
        default: return nil
        }
    }

    /// "HOST:PORT" of a socket address ("[v6]:PORT" for IPv6).
    static func text(of sa: UnsafePointer<sockaddr>) -> String {
        var host = [CChar](repeating: 0, count: Int(NI_MAXHOST))
        let len = socklen_t(Int32(sa.pointee.sa_family) == AF_INET6 ? MemoryLayout<sockaddr_in6>.size : MemoryLayout<sockaddr_in>.size)
        guard getnameinfo(sa, len, &host, socklen_t(host.count), nil, 0, NI_NUMERICHOST) == 0 else { return "?" }
        let h = String(decoding: host.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let p = port(of: sa).map(String.init) ?? "?"
        return Int32(sa.pointee.sa_family) == AF_INET6 ? "[\(h)]:\(p)" : "\(h):\(p)"
    }
}

/// One accepted TCP connection, non-blocking, with an output buffer: `send`
/// queues and writes what the socket takes; the rest goes out on `flush`
/// when the loop says the socket is writable (`wantsWrite`).
public final class TCPStream {
    public let fd: Int32
    /// The client's "HOST:PORT".
    public let peer: String
    private var output: [UInt8] = []
    private var outputStart = 0
    public private(set) var isClosed = false

    init(fd: Int32, peer: String) {
        self.fd = fd
        self.peer = peer
    }

    /// What one read gave.
    public enum ReadResult: Equatable {
        case data([UInt8])
        /// Nothing to read now.
        case wouldBlock
        /// The peer closed its side.
        case closed
        case failed(Int32)
    }

    /// Reads what is there, up to `max` bytes.
    public func read(max: Int = 16_384) -> ReadResult {
        var buf = [UInt8](repeating: 0, count: max)
        let n = buf.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, max) }
        if n > 0 { return .data(Array(buf[0..<n])) }
        if n == 0 { return .closed }
        let e = errno
        return e == EAGAIN || e == EWOULDBLOCK || e == EINTR ? .wouldBlock : .failed(e)
    }

    /// Bytes queued and not yet taken by the socket.
    public var pendingOutput: Int { output.count - outputStart }
    /// The loop should report the socket writable (output is waiting).
    public var wantsWrite: Bool { pendingOutput > 0 }

    /// Queues `bytes` and writes what the socket takes now.
    /// - Returns: false when the connection failed (it is closed then).
    @discardableResult
    public func send(_ bytes: [UInt8]) -> Bool {
        guard !isClosed else { return false }
        output += bytes
        return flush()
    }

    /// Writes queued output until the socket would block.
    /// - Returns: false when the connection failed (it is closed then).
    @discardableResult
    public func flush() -> Bool {
        while outputStart < output.count {
            let n = output.withUnsafeBytes { b in
                Glibc.send(fd, b.baseAddress! + outputStart, output.count - outputStart, Int32(MSG_NOSIGNAL))
            }
            if n > 0 { outputStart += n; continue }
            let e = errno
            if n < 0 && (e == EAGAIN || e == EWOULDBLOCK) { break }
            if n < 0 && e == EINTR { continue }
            close()
            return false
        }
        if outputStart == output.count { output.removeAll(keepingCapacity: true); outputStart = 0 }
        else if outputStart > 65_536 { output.removeFirst(outputStart); outputStart = 0 }
        return true
    }

    public func close() {
        guard !isClosed else { return }
        isClosed = true
        _ = Glibc.close(fd)
    }
}
