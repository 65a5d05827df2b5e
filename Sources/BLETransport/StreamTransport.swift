#if canImport(Glibc)
import Glibc
#endif
import BLEWire

/// H4 over a byte stream: a TCP or Unix socket, or a serial port. One framer
/// serves all three (Core Vol 4 Part A, UART transport layer).
public final class StreamTransport: HCITransport {
    public let name: String
    private var fd: Int32
    private let isSocket: Bool
    private var framer = H4Framer()
    private var ready: [HCIPacket] = []
    private var readyIndex = 0
    private var readBuffer = [UInt8](repeating: 0, count: 4096)

    /// Takes ownership of an open descriptor.
    public init(fd: Int32, name: String, isSocket: Bool) {
        self.fd = fd
        self.name = name
        self.isSocket = isSocket
    }

    deinit { close() }

    /// Writes the packet in H4 form, retrying short writes, EINTR and EAGAIN.
    /// - Throws: `TransportError.closedByPeer` when the transport is closed or the
    ///   peer went away (EPIPE, ECONNRESET, EIO); `TransportError.io` for other write errors.
    public func send(_ packet: HCIPacket) throws {
        guard fd >= 0 else { throw TransportError.closedByPeer(name) }
        let bytes = packet.h4
        var sent = 0
        while sent < bytes.count {
            let n = bytes.withUnsafeBytes { buf -> Int in
                let p = buf.baseAddress! + sent
                return isSocket ? Glibc.send(fd, p, bytes.count - sent, Int32(MSG_NOSIGNAL)) : Glibc.write(fd, p, bytes.count - sent)
            }
            if n < 0 {
                let e = errno
                if e == EINTR { continue }
                if e == EAGAIN {
                    var p = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
                    _ = poll(&p, 1, 1000)
                    continue
                }
                if e == EPIPE || e == ECONNRESET || e == EIO { throw TransportError.closedByPeer(name) }
                throw TransportError.io(name, operation: "write", errno: e)
            }
            sent += n
        }
    }

    /// Returns a packet already framed, else reads and frames more bytes until a
    /// whole packet arrives, `wakeFD` becomes readable or `timeoutMs` passes.
    /// - Throws: `TransportError.closedByPeer` on end of stream or a lost device,
    ///   `TransportError.corruptStream` on a bad H4 indicator, `TransportError.io`
    ///   for other poll or read errors.
    public func receive(timeoutMs: Int, wakeFD: Int32) throws -> ReceiveResult {
        if let p = popReady() { return .packet(p) }
        guard fd >= 0 else { throw TransportError.closedByPeer(name) }
        let deadline = Instant.now().adding(ms: timeoutMs)
        while true {
            let readiness: SystemIO.Readiness
            do { readiness = try SystemIO.wait(fd, wakeFD: wakeFD, until: deadline) }
            catch { throw TransportError.io(name, operation: "poll", errno: error.code) }
            switch readiness {
            case .woken: return .woken
            case .timeout: return .timeout
            case .readable:
                let n = readBuffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress!, $0.count) }
                if n == 0 { throw TransportError.closedByPeer(name) }
                if n < 0 {
                    let e = errno
                    if e == EINTR || e == EAGAIN { continue }
                    if e == ECONNRESET || e == EIO { throw TransportError.closedByPeer(name) }
                    throw TransportError.io(name, operation: "read", errno: e)
                }
                framer.feed(readBuffer[0..<n])
                do {
                    ready.append(contentsOf: try framer.drain())
                } catch let e as WireError {
                    throw TransportError.corruptStream(name, reason: e.description)
                }
                if let p = popReady() { return .packet(p) }
            }
        }
    }

    private func popReady() -> HCIPacket? {
        guard readyIndex < ready.count else { return nil }
        let p = ready[readyIndex]
        readyIndex += 1
        if readyIndex == ready.count { ready.removeAll(keepingCapacity: true); readyIndex = 0 }
        return p
    }

    /// Closes the descriptor; later sends throw `TransportError.closedByPeer`, as do
    /// receives once packets already framed are consumed. Safe to call twice.
    public func close() {
        if fd >= 0 { _ = Glibc.close(fd); fd = -1 }
    }

    // MARK: opening

    /// Connects to `tcp:HOST:PORT`, failing within `timeoutMs`.
    /// - Throws: `TransportError.unreachable` (host not resolved, or timeout),
    ///   `TransportError.refused`, or `TransportError.io` for other connect failures.
    public static func tcp(host: String, port: UInt16, name: String, timeoutMs: Int = 3000) throws -> StreamTransport {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var res: UnsafeMutablePointer<addrinfo>? = nil
        let rc = getaddrinfo(host, String(port), &hints, &res)
        guard rc == 0, let first = res else {
            throw TransportError.unreachable(name, reason: "cannot resolve host '\(host)'")
        }
        defer { freeaddrinfo(res) }
        var lastErrno: Int32 = ECONNREFUSED
        var ai: UnsafeMutablePointer<addrinfo>? = first
        while let a = ai {
            ai = a.pointee.ai_next
            let fd = socket(a.pointee.ai_family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            if fd < 0 { lastErrno = errno; continue }
            if connectWithTimeout(fd, a.pointee.ai_addr, a.pointee.ai_addrlen, timeoutMs, &lastErrno) {
                var one: Int32 = 1
                setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
                return StreamTransport(fd: fd, name: name, isSocket: true)
            }
            _ = Glibc.close(fd)
        }
        if lastErrno == ECONNREFUSED { throw TransportError.refused(name, errno: lastErrno) }
        if lastErrno == ETIMEDOUT { throw TransportError.unreachable(name, reason: "no answer within \(timeoutMs) ms") }
        throw TransportError.io(name, operation: "connect", errno: lastErrno)
    }

    private static func connectWithTimeout(_ fd: Int32, _ addr: UnsafeMutablePointer<sockaddr>?, _ len: socklen_t,
                                           _ timeoutMs: Int, _ err: inout Int32) -> Bool {
        let flags = fcntl(fd, F_GETFL)
        _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK)
        defer { _ = fcntl(fd, F_SETFL, flags) }
        if connect(fd, addr, len) == 0 { return true }
        guard errno == EINPROGRESS else { err = errno; return false }
        var p = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
        let r = poll(&p, 1, Int32(clamping: timeoutMs))
        if r <= 0 { err = ETIMEDOUT; return false }
        var soErr: Int32 = 0
        var l = socklen_t(MemoryLayout<Int32>.size)
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &soErr, &l)
        if soErr != 0 { err = soErr; return false }
        return true
    }

    /// Connects to a Unix stream socket at `path`.
    /// - Throws: `TransportError.invalidSpec` for a path too long for `sun_path`,
    ///   `.deviceMissing`, `.refused`, `.permissionDenied` or `.io`.
    public static func unix(path: String, name: String) throws -> StreamTransport {
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        let cap = MemoryLayout.size(ofValue: addr.sun_path)
        let pathBytes = Array(path.utf8)
        guard !pathBytes.isEmpty, pathBytes.count < cap else {
            throw TransportError.invalidSpec(name, reason: "socket path must be 1 to \(cap - 1) bytes")
        }
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            for (i, b) in pathBytes.enumerated() { raw[i] = b }
        }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw TransportError.io(name, operation: "socket", errno: errno) }
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        if rc != 0 {
            let e = errno
            _ = Glibc.close(fd)
            switch e {
            case ENOENT: throw TransportError.deviceMissing(name)
            case ECONNREFUSED: throw TransportError.refused(name, errno: e)
            case EACCES, EPERM: throw TransportError.permissionDenied(name, operation: "connect")
            default: throw TransportError.io(name, operation: "connect", errno: e)
            }
        }
        return StreamTransport(fd: fd, name: name, isSocket: true)
    }

    /// Opens a serial port in raw mode (8N1, no echo), at `baud`, with
    /// optional RTS/CTS flow control.
    /// - Throws: `TransportError.deviceMissing`, `.permissionDenied`, `.adapterBusy`,
    ///   `.invalidSpec` (unsupported baud rate, or not a terminal) or `.io`.
    public static func serial(path: String, baud: Int, rtscts: Bool, name: String) throws -> StreamTransport {
        let fd = open(path, O_RDWR | O_NOCTTY | O_CLOEXEC | O_NONBLOCK)
        if fd < 0 {
            let e = errno
            switch e {
            case ENOENT, ENODEV, ENXIO: throw TransportError.deviceMissing(name)
            case EACCES, EPERM: throw TransportError.permissionDenied(name, operation: "open (add yourself to the dialout group, or use sudo)")
            case EBUSY: throw TransportError.adapterBusy(name)
            default: throw TransportError.io(name, operation: "open", errno: e)
            }
        }
        guard let speed = baudConstant(baud) else {
            _ = Glibc.close(fd)
            throw TransportError.invalidSpec(name, reason: "unsupported baud rate \(baud)")
        }
        var tio = termios()
        if tcgetattr(fd, &tio) != 0 {
            let e = errno
            _ = Glibc.close(fd)
            if e == ENOTTY { throw TransportError.invalidSpec(name, reason: "\(path) is not a terminal/serial device") }
            throw TransportError.io(name, operation: "tcgetattr", errno: e)
        }
        cfmakeraw(&tio)
        cfsetispeed(&tio, speed)
        cfsetospeed(&tio, speed)
        tio.c_cflag |= tcflag_t(CLOCAL | CREAD)
        if rtscts { tio.c_cflag |= tcflag_t(CRTSCTS) } else { tio.c_cflag &= ~tcflag_t(CRTSCTS) }
        // VMIN/VTIME: a read returns whatever is there (poll decides when to read).
        withUnsafeMutableBytes(of: &tio.c_cc) { cc in
            cc[Int(VMIN)] = 1
            cc[Int(VTIME)] = 0
        }
        if tcsetattr(fd, TCSANOW, &tio) != 0 {
            let e = errno
            _ = Glibc.close(fd)
            throw TransportError.io(name, operation: "tcsetattr", errno: e)
        }
        tcflush(fd, TCIOFLUSH)
        // Back to blocking writes; reads are gated by poll.
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK)
        return StreamTransport(fd: fd, name: name, isSocket: false)
    }

    static func baudConstant(_ b: Int) -> speed_t? {
        let table: [Int: Int32] = [
            9600: B9600, 19200: B19200, 38400: B38400, 57600: B57600, 115200: B115200,
            230400: B230400, 460800: B460800, 500000: B500000, 576000: B576000, 921600: B921600,
            1000000: B1000000, 1152000: B1152000, 1500000: B1500000, 2000000: B2000000,
            2500000: B2500000, 3000000: B3000000, 3500000: B3500000, 4000000: B4000000,
        ]
        return table[b].map { speed_t($0) }
    }
}
