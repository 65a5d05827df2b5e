#if canImport(Glibc)
import Glibc
#endif
import CBluetooth
import BLEWire

/// The Linux HCI user channel: `socket(AF_BLUETOOTH, SOCK_RAW, BTPROTO_HCI)`
/// bound with `HCI_CHANNEL_USER` to hciN. It gives attled exclusive use of the
/// adapter, bypassing the kernel's own Bluetooth stack; the adapter must be
/// down to bind, so an adapter that is up is brought down (HCIDEVDOWN) and
/// brought back up (HCIDEVUP) when attled closes it. Each read and write
/// carries one whole packet, preceded by its H4 indicator byte.
public final class UserChannelTransport: HCITransport {
    public let name: String
    private let index: UInt16
    private var fd: Int32
    private let restoreUp: Bool
    private var buffer = [UInt8](repeating: 0, count: 1100)

    init(fd: Int32, index: UInt16, restoreUp: Bool) {
        self.fd = fd
        self.index = index
        self.restoreUp = restoreUp
        self.name = "hci\(index)"
    }

    deinit { close() }

    /// How long to retry a bind that fails with EBUSY right after bringing the
    /// adapter down (the kernel may still be finishing its own work on it).
    public static let busyRetryMs = 3000

    /// Opens the user channel on hci`index`.
    public static func open(index: UInt16) throws -> UserChannelTransport {
        let name = "hci\(index)"
        let fd = socket(attled_AF_BLUETOOTH, Int32(SOCK_RAW.rawValue) | Int32(SOCK_CLOEXEC.rawValue), attled_BTPROTO_HCI)
        if fd < 0 {
            let e = errno
            switch e {
            case EAFNOSUPPORT, EPROTONOSUPPORT, EINVAL: throw TransportError.noBluetoothInKernel
            case EPERM, EACCES: throw TransportError.permissionDenied(name, operation: "socket")
            default: throw TransportError.io(name, operation: "socket(AF_BLUETOOTH)", errno: e)
            }
        }
        // Is the adapter there, and is it up?
        var info = hci_dev_info()
        info.dev_id = index
        if ioctl(fd, attled_HCIGETDEVINFO, &info) != 0 {
            let e = errno
            _ = Glibc.close(fd)
            if e == ENODEV { throw TransportError.noSuchAdapter(name) }
            if e == EPERM || e == EACCES { throw TransportError.permissionDenied(name, operation: "HCIGETDEVINFO") }
            throw TransportError.io(name, operation: "HCIGETDEVINFO", errno: e)
        }
        let wasUp = (info.flags & 1) != 0 // HCI_UP is bit 0 of the device flags
        if wasUp {
            if ioctl(fd, attled_HCIDEVDOWN, Int32(index)) != 0 {
                let e = errno
                _ = Glibc.close(fd)
                if e == EPERM || e == EACCES { throw TransportError.permissionDenied(name, operation: "HCIDEVDOWN") }
                if e == EBUSY { throw TransportError.adapterBusy(name) }
                throw TransportError.io(name, operation: "HCIDEVDOWN", errno: e)
            }
        }
        var addr = sockaddr_hci()
        addr.hci_family = sa_family_t(attled_AF_BLUETOOTH)
        addr.hci_dev = index
        addr.hci_channel = UInt16(attled_HCI_CHANNEL_USER)
        let deadline = Instant.now().adding(ms: busyRetryMs)
        while true {
            let rc = withUnsafePointer(to: &addr) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(fd, $0, socklen_t(MemoryLayout<sockaddr_hci>.size))
                }
            }
            if rc == 0 { break }
            let e = errno
            // Right after HCIDEVDOWN the kernel may still hold the device briefly.
            if e == EBUSY && wasUp && Instant.now() < deadline {
                var p = pollfd(fd: -1, events: 0, revents: 0)
                _ = poll(&p, 0, 50)
                continue
            }
            _ = Glibc.close(fd)
            if wasUp { bringUp(index) }
            switch e {
            case EBUSY, EALREADY: throw TransportError.adapterBusy(name)
            case ENODEV: throw TransportError.noSuchAdapter(name)
            case EPERM, EACCES: throw TransportError.permissionDenied(name, operation: "bind HCI_CHANNEL_USER")
            case ERFKILL: throw TransportError.unreachable(name, reason: "blocked by rfkill: run 'rfkill unblock bluetooth'")
            default: throw TransportError.io(name, operation: "bind HCI_CHANNEL_USER", errno: e)
            }
        }
        return UserChannelTransport(fd: fd, index: index, restoreUp: wasUp)
    }

    /// HCIDEVUP on a fresh control socket; best effort.
    @discardableResult
    static func bringUp(_ index: UInt16) -> Bool {
        let ctl = socket(attled_AF_BLUETOOTH, Int32(SOCK_RAW.rawValue) | Int32(SOCK_CLOEXEC.rawValue), attled_BTPROTO_HCI)
        guard ctl >= 0 else { return false }
        defer { _ = Glibc.close(ctl) }
        // The kernel may need a moment after the user channel closes; retry briefly.
        let deadline = Instant.now().adding(ms: 2000)
        while true {
            if ioctl(ctl, attled_HCIDEVUP, Int32(index)) == 0 || errno == EALREADY { return true }
            if errno != EBUSY || Instant.now() >= deadline { return false }
            var p = pollfd(fd: -1, events: 0, revents: 0)
            _ = poll(&p, 0, 50)
        }
    }

    public func send(_ packet: HCIPacket) throws {
        guard fd >= 0 else { throw TransportError.closedByPeer(name) }
        let bytes = packet.h4
        while true {
            let n = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress!, $0.count) }
            if n == bytes.count { return }
            if n < 0 && errno == EINTR { continue }
            let e = n < 0 ? errno : EIO
            if e == ENODEV || e == ENETDOWN { throw TransportError.closedByPeer(name) }
            throw TransportError.io(name, operation: "write", errno: e)
        }
    }

    public func receive(timeoutMs: Int, wakeFD: Int32) throws -> ReceiveResult {
        guard fd >= 0 else { throw TransportError.closedByPeer(name) }
        let deadline = Instant.now().adding(ms: timeoutMs)
        while true {
            var fds = [pollfd(fd: fd, events: Int16(POLLIN), revents: 0),
                       pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0)]
            let r = poll(&fds, wakeFD >= 0 ? 2 : 1, Int32(clamping: Instant.now().msUntil(deadline)))
            if r < 0 {
                if errno == EINTR { return .woken }
                throw TransportError.io(name, operation: "poll", errno: errno)
            }
            if wakeFD >= 0 && fds[1].revents != 0 { return .woken }
            if fds[0].revents != 0 {
                let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress!, $0.count) }
                if n < 0 {
                    let e = errno
                    if e == EINTR || e == EAGAIN { continue }
                    if e == ENODEV || e == ENETDOWN || e == EIO { throw TransportError.closedByPeer(name) }
                    throw TransportError.io(name, operation: "read", errno: e)
                }
                if n == 0 { throw TransportError.closedByPeer(name) }
                if n >= 1 {
                    return .packet(HCIPacket(HCIPacketType(rawValue: buffer[0]), Array(buffer[1..<n])))
                }
            }
            if Instant.now() >= deadline { return .timeout }
        }
    }

    public func close() {
        guard fd >= 0 else { return }
        _ = Glibc.close(fd)
        fd = -1
        if restoreUp { Self.bringUp(index) }
    }
}
