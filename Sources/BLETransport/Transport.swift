import BLEWire

/// What one wait on a transport produced.
public enum ReceiveResult: Sendable {
    case packet(HCIPacket)
    /// The timeout passed with nothing to read.
    case timeout
    /// The wake descriptor became readable (a signal arrived).
    case woken
}

/// Moves whole HCI packets between host and controller. Implementations:
/// `StreamTransport` (H4 over TCP, Unix socket, serial) and
/// `UserChannelTransport` (Linux HCI user channel).
public protocol HCITransport: AnyObject {
    /// Human name used in messages, e.g. "tcp:127.0.0.1:9000".
    var name: String { get }
    /// Sends one packet; throws `TransportError` when the link to the controller is gone.
    func send(_ packet: HCIPacket) throws
    /// Waits up to `timeoutMs` for the next packet. `wakeFD`, when not -1, is
    /// polled too so a signal can interrupt the wait.
    func receive(timeoutMs: Int, wakeFD: Int32) throws -> ReceiveResult
    /// Releases the transport (and, for the user channel, gives the adapter back).
    func close()
}

/// Failures of a transport, each with the remedy in its message.
public enum TransportError: Error, Equatable, Sendable, CustomStringConvertible {
    case invalidSpec(String, reason: String)
    case noBluetoothInKernel
    case noSuchAdapter(String)
    case adapterBusy(String)
    case permissionDenied(String, operation: String)
    case refused(String, errno: Int32)
    case unreachable(String, reason: String)
    case closedByPeer(String)
    case deviceMissing(String)
    case io(String, operation: String, errno: Int32)
    case corruptStream(String, reason: String)

    public var description: String {
        switch self {
        case let .invalidSpec(s, reason):
            return "invalid transport '\(s)': \(reason). Use hci0, serial:/dev/ttyACM0[,115200][,rtscts], tcp:HOST:PORT or unix:/path"
        case .noBluetoothInKernel:
            return "this kernel has no Bluetooth support (socket(AF_BLUETOOTH) is not available): load it with 'modprobe bluetooth', or use an H4 transport such as serial:/dev/ttyACM0 or tcp:HOST:PORT"
        case let .noSuchAdapter(s):
            return "\(s): no such Bluetooth adapter ('ls /sys/class/bluetooth' lists the adapters; choose one with -i hciN)"
        case let .adapterBusy(s):
            return "\(s) is busy: another program holds its HCI user channel (another attled, Bumble or a BlueZ proxy); stop it and retry"
        case let .permissionDenied(s, op):
            return "permission denied (\(op)) on \(s): run with sudo, or grant the capability once: sudo setcap cap_net_admin+ep $(command -v attled)"
        case let .refused(s, e):
            return "\(s): connection refused (\(errnoName(e))): is the controller (or its bridge) running and listening there?"
        case let .unreachable(s, reason):
            return "\(s): \(reason)"
        case let .closedByPeer(s):
            return "\(s): the controller closed the connection (the device was unplugged or the controller process exited)"
        case let .deviceMissing(s):
            return "\(s): no such device: check the path, that the controller is plugged in, and that you may open it"
        case let .io(s, op, e):
            return "\(s): \(op) failed: \(errnoName(e))"
        case let .corruptStream(s, reason):
            return "\(s): corrupt H4 stream: \(reason) (wrong baud rate or not an HCI controller?)"
        }
    }
}
