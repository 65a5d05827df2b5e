import BLEWire
import BLETransport

/// Failures below GAP: the controller or the transport.
public enum HCIError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The controller rejected a command.
    case commandFailed(HCIOpcode, HCIStatus)
    /// No Command Complete or Command Status arrived before the deadline.
    case commandTimeout(HCIOpcode, ms: Int)
    /// The controller reported a hardware error and must be reset.
    case hardwareError(UInt8)
    /// The link to the controller failed.
    case transport(TransportError)
    /// SIGINT or SIGTERM arrived.
    case interrupted(signal: Int32)
    /// A controller's answer could not be decoded.
    case malformed(HCIOpcode, WireError)
    /// The host was closed (`HCIHost.close`) while the operation was pending.
    case closed

    public var description: String {
        switch self {
        case let .commandFailed(op, st):
            return "the controller rejected \(op.name) (0x\(Hex.int(op.rawValue, width: 4))): \(st)"
        case let .commandTimeout(op, ms):
            return "the controller did not answer \(op.name) (0x\(Hex.int(op.rawValue, width: 4))) within \(ms) ms: it may not support it, or it has stopped responding (unplug/reset it)"
        case let .hardwareError(c):
            return "the controller reported Hardware Error 0x\(Hex.int(c, width: 2)): reset or replug it and retry"
        case let .transport(e):
            return e.description
        case let .interrupted(s):
            return "interrupted by signal \(s)"
        case let .malformed(op, e):
            return "malformed answer to \(op.name): \(e)"
        case .closed:
            return "the Bluetooth host was closed while the operation was pending"
        }
    }
}
