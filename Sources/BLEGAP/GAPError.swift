import BLEWire
import BLEHCI

/// Failures of scanning and connecting.
public enum GAPError: Error, Equatable, Sendable, CustomStringConvertible {
    /// No connection within the deadline (the attempt was cancelled).
    case connectTimeout(DeviceAddress, ms: Int)
    /// LE Connection Complete reported a failure.
    case connectFailed(DeviceAddress, HCIStatus)
    /// The attempt was abandoned (`Central.abortConnects`, or the central closed) before it completed.
    case connectAborted(DeviceAddress)
    /// No connection within the deadline, and the controller acknowledged LE Create
    /// Connection Cancel without ending the attempt (no LE Connection Complete):
    /// it may still connect later, and refuse other connects until then.
    case connectCancelUnconfirmed(DeviceAddress, ms: Int)
    /// Advertising as asked is impossible (why).
    case advertisingUnsupported(String)

    public var description: String {
        switch self {
        case let .connectTimeout(a, ms):
            return "could not connect to \(a) within \(ms) ms: the device is out of range, not advertising as connectable, or already connected to another central"
        case let .connectFailed(a, st):
            return "connection to \(a) failed: \(st)"
        case let .connectAborted(a):
            return "the connection attempt to \(a) was abandoned"
        case let .advertisingUnsupported(why):
            return "cannot advertise: \(why)"
        case let .connectCancelUnconfirmed(a, ms):
            return "could not connect to \(a) within \(ms) ms, and the controller acknowledged LE Create Connection Cancel "
                + "but never ended the attempt (no LE Connection Complete): it may still connect when the device advertises, "
                + "and refuse other connections until then (stock Bumble controllers do this; HCI Reset ends it on one that follows the specification)"
        }
    }
}
