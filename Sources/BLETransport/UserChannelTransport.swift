#if canImport(Glibc)
import Glibc
#endif
import CBluetooth
import BLEWire

/// The Linux HCI user channel: `socket(AF_BLUETOOTH, SOCK_RAW, BTPROTO_HCI)`
/// bound with `HCI_CHANNEL_USER` to hciN. It gives attled exclusive use of the
/// adapter, bypassing the kernel's own Bluetooth stack. Each read and write
/// carries one whole packet, preceded by its H4 indicator byte.
///
/// What the kernel does (net/bluetooth/hci_sock.c, hci_core.c; seen in the
/// kernel test, Tools/kernelvm):
/// - The bind fails with EBUSY while the adapter is up and owned by the kernel
///   (brought up by HCIDEVUP, bluetoothd or mgmt), and while the kernel is
///   still running its own setup or power-up sequence on it (HCI_SETUP,
///   HCI_INIT). An adapter the kernel powered only for its setup (auto-off)
///   is reported down and can be bound.
/// - HCIDEVDOWN fails with EBUSY only when another process holds the user
///   channel; a second bind then fails with EBUSY (adapter up) or EUSERS.
/// - HCIGETDEVINFO needs no privilege; HCIDEVDOWN, HCIDEVUP and the bind need
///   CAP_NET_ADMIN (EPERM).
/// - Closing the user channel closes the adapter (down): bringing it back up
///   (HCIDEVUP, which reruns the kernel's setup) is the tool's job.
/// So `open` brings an up adapter down, retries EBUSY for a bounded time
/// (bringing the adapter down again if the kernel brought it up meanwhile),
/// and `close` brings it up again if `open` brought it down. Session calls
/// `close` on every way out: success, errors, SIGINT and SIGTERM.
public final class UserChannelTransport: HCITransport {
    public let name: String
    private let index: UInt16
    private var fd: Int32
    private var restoreUp: Bool
    /// The adapter index (N of hciN).
    public var adapterIndex: UInt16 { index }
    /// The bound user-channel socket (-1 once closed).
    public var socketFD: Int32 { fd }
    /// Where a problem `close` cannot throw goes (default: stderr, "warning: ...").
    public var onWarning: (String) -> Void = { SystemIO.writeAll(2, Array("warning: \($0)\n".utf8)) }
    private var buffer = [UInt8](repeating: 0, count: 1100)

    init(fd: Int32, index: UInt16, restoreUp: Bool) {
        self.fd = fd
        self.index = index
        self.restoreUp = restoreUp
        self.name = "hci\(index)"
    }

    deinit { close() }

    /// How long to retry a bind that fails with EBUSY while the kernel still
    /// works on the adapter (its setup or a power-up in progress).
    public static let busyRetryMs = 5000
    /// HCI_UP, bit 0 of the device flags.
    static let flagUp: UInt32 = 1 << 0
    /// HCI_INIT, bit 1: the kernel is running its init sequence.
    static let flagInit: UInt32 = 1 << 1

    /// Opens the user channel on hci`index`.
    /// - Throws: `TransportError` (`.noBluetoothInKernel`, `.noSuchAdapter`,
    ///   `.adapterBusy`, `.permissionDenied`, `.unreachable` for rfkill or a
    ///   still-busy adapter, `.io`).
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
        // Set once this process has brought the adapter down: from then on
        // every failure gives it back up before throwing.
        var broughtDown = false
        func failure(_ error: TransportError) -> TransportError {
            _ = Glibc.close(fd)
            if broughtDown { _ = bringUp(index) }
            return error
        }
        // The adapter's flags (HCIGETDEVINFO); is it there at all?
        func flags() throws -> UInt32 {
            var info = hci_dev_info()
            info.dev_id = index
            if ioctl(fd, attled_HCIGETDEVINFO, &info) != 0 {
                let e = errno
                switch e {
                case ENODEV: throw failure(.noSuchAdapter(name))
                case EPERM, EACCES: throw failure(.permissionDenied(name, operation: "HCIGETDEVINFO"))
                default: throw failure(.io(name, operation: "HCIGETDEVINFO", errno: e))
                }
            }
            return info.flags
        }
        func bringDown() throws {
            if ioctl(fd, attled_HCIDEVDOWN, Int32(index)) != 0 {
                let e = errno
                switch e {
                // The kernel refuses to close an adapter only while a user channel holds it.
                case EBUSY, EUSERS: throw failure(.adapterBusy(name))
                case EPERM, EACCES: throw failure(.permissionDenied(name, operation: "HCIDEVDOWN"))
                case ENODEV: throw failure(.noSuchAdapter(name))
                default: throw failure(.io(name, operation: "HCIDEVDOWN", errno: e))
                }
            }
            broughtDown = true
        }

        if try flags() & flagUp != 0 { try bringDown() }

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
            switch e {
            case EBUSY:
                let f = try flags()
                if Instant.now() >= deadline {
                    let what = f & flagInit != 0 ? "the kernel is still running its setup of the adapter"
                        : "the kernel did not release the adapter"
                    throw failure(.unreachable(name, reason: "still busy after \(busyRetryMs / 1000) s (\(what), flags 0x\(String(f, radix: 16))): retry in a moment, and see 'dmesg' if it persists"))
                }
                // Up again (the kernel or bluetoothd powered it on meanwhile):
                // bring it down again. Otherwise the kernel is still at work on
                // it (setup, power-up, close): wait a little.
                if f & flagUp != 0 {
                    try bringDown()
                } else {
                    var p = pollfd(fd: -1, events: 0, revents: 0)
                    _ = poll(&p, 0, 20)
                }
            case EUSERS, EALREADY: throw failure(.adapterBusy(name))
            case ENODEV: throw failure(.noSuchAdapter(name))
            case EPERM, EACCES: throw failure(.permissionDenied(name, operation: "bind HCI_CHANNEL_USER"))
            case ERFKILL: throw failure(.unreachable(name, reason: "blocked by rfkill: run 'rfkill unblock bluetooth'"))
            default: throw failure(.io(name, operation: "bind HCI_CHANNEL_USER", errno: e))
            }
        }
        return UserChannelTransport(fd: fd, index: index, restoreUp: broughtDown)
    }

    /// Hands the duty of bringing the adapter back up to someone else (a
    /// process that keeps CAP_NET_ADMIN when this one drops privileges).
    /// Returns true when there is something to restore.
    public func handOverRestore() -> Bool {
        defer { restoreUp = false }
        return restoreUp
    }

    /// HCIDEVUP on a fresh control socket. Returns nil on success, else the errno.
    /// The kernel reruns its setup of the adapter inside the ioctl.
    @discardableResult
    public static func bringUp(_ index: UInt16, retryMs: Int = 2000) -> Int32? {
        let ctl = socket(attled_AF_BLUETOOTH, Int32(SOCK_RAW.rawValue) | Int32(SOCK_CLOEXEC.rawValue), attled_BTPROTO_HCI)
        guard ctl >= 0 else { return errno }
        defer { _ = Glibc.close(ctl) }
        // Closing the user channel closes the adapter synchronously, but retry
        // EBUSY briefly in case the kernel is still at work on it.
        let deadline = Instant.now().adding(ms: retryMs)
        while true {
            if ioctl(ctl, attled_HCIDEVUP, Int32(index)) == 0 || errno == EALREADY { return nil }
            let e = errno
            if e != EBUSY || Instant.now() >= deadline { return e }
            var p = pollfd(fd: -1, events: 0, revents: 0)
            _ = poll(&p, 0, 50)
        }
    }

    /// Writes the packet in H4 form with one write, as the user channel requires.
    /// - Throws: `TransportError.closedByPeer` when closed or the adapter is gone
    ///   (ENODEV, ENETDOWN); `TransportError.io` for other errors or a short write.
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

    /// Waits for one packet (each read returns exactly one), `wakeFD`, or the timeout.
    /// - Throws: `TransportError.closedByPeer` when closed or the adapter is gone;
    ///   `TransportError.io` for other poll or read errors.
    public func receive(timeoutMs: Int, wakeFD: Int32) throws -> ReceiveResult {
        guard fd >= 0 else { throw TransportError.closedByPeer(name) }
        let deadline = Instant.now().adding(ms: timeoutMs)
        while true {
            let ready: SystemIO.Readiness
            do { ready = try SystemIO.wait(fd, wakeFD: wakeFD, until: deadline) }
            catch { throw TransportError.io(name, operation: "poll", errno: error.code) }
            switch ready {
            case .woken: return .woken
            case .timeout: return .timeout
            case .readable:
                let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress!, $0.count) }
                if n < 0 {
                    let e = errno
                    if e == EINTR || e == EAGAIN { continue }
                    if e == ENODEV || e == ENETDOWN || e == EIO { throw TransportError.closedByPeer(name) }
                    throw TransportError.io(name, operation: "read", errno: e)
                }
                if n == 0 { throw TransportError.closedByPeer(name) }
                return .packet(HCIPacket(HCIPacketType(rawValue: buffer[0]), Array(buffer[1..<n])))
            }
        }
    }

    /// Closes the user channel (the kernel closes the adapter with it) and
    /// brings the adapter back up if `open` brought it down.
    public func close() {
        guard fd >= 0 else { return }
        _ = Glibc.close(fd)
        fd = -1
        guard restoreUp, let e = Self.bringUp(index), e != ENODEV else { return }
        // Not silent: the adapter is left down, which other programs notice.
        onWarning("could not bring \(name) back up (HCIDEVUP: \(errnoName(e))); bring it up with 'hciconfig \(name) up' or 'bluetoothctl power on'")
    }
}
