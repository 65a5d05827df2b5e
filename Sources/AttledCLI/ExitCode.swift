import Attled
import AttledLED
import BLEWire
import BLETransport
import BLEHCI
import BLEGAP
import BLEATT
import BLEGATT

/// Process exit codes; each failure class has its own (README lists them).
public enum ExitCode: Int32, Sendable {
    case ok = 0
    case failure = 1
    case deviceNotFound = 3
    case connectionFailed = 4
    case notFound = 5
    case attError = 6
    case linkLost = 7
    case security = 8
    case usage = 64
    case dataError = 65
    case unavailable = 69
    case ioError = 74
    case busy = 75
    case controller = 76
    case permission = 77
    case sigint = 130
    case sigterm = 143
}

/// A failure of a run: the message to print and the exit code.
public struct RunError: Error, Sendable {
    public var message: String
    public var code: ExitCode
    public init(_ message: String, _ code: ExitCode) { self.message = message; self.code = code }
}

/// Maps any error from the stack to a message and an exit code.
public func classify(_ error: Error) -> RunError {
    switch error {
    case let e as RunError: return e
    case let e as UsageError: return RunError(e.message, .usage)
    case let e as TransportError: return classifyTransport(e)
    case let e as HCIError:
        switch e {
        case .transport(let t):
            if case .closedByPeer = t { return RunError(t.description, .ioError) }
            return classifyTransport(t)
        case .interrupted(let s): return RunError("interrupted", s == SignalWatch.terminate ? .sigterm : .sigint)
        case .commandFailed, .commandTimeout, .hardwareError, .malformed, .closed: return RunError(e.description, .controller)
        }
    case let e as GAPError: return RunError(e.description, .connectionFailed)
    case let e as ACLDrainTimeout: return RunError(e.description, .linkLost)
    case let e as SecurityError: return RunError(e.description, .security)
    case let e as BondStoreError: return RunError(e.description, .security)
    case let e as SecuringError: return RunError(message(e), .security)
    case let e as StackError:
        switch e { case .notFound: return RunError(e.description, .deviceNotFound) }
    case let e as LEDOperations.Failure:
        switch e {
        case .noLEDService: return RunError(e.description + "; describe it with --service --red --green --blue", .notFound)
        case .notResolved: return RunError(e.description, .notFound)
        case .emptyValue: return RunError(e.description, .attError)
        }
    case let e as ATTError:
        switch e {
        case .errorResponse: return RunError(e.description, .attError)
        case .timeout, .disconnected, .bearerClosed: return RunError(e.description, .linkLost)
        case .unexpectedResponse, .malformedResponse, .tooLong: return RunError(e.description, .attError)
        }
    case let e as GATTError:
        switch e {
        case .ambiguous: return RunError(e.description + "; name one by handle (--char 0xHHHH) or narrow with --service UUID", .notFound)
        case .noSuchHandle: return RunError(e.description + " (see 'attled gatt' for the handles)", .notFound)
        case .serviceNotFound, .characteristicNotFound, .noClientConfiguration: return RunError(e.description, .notFound)
        case .notPermitted, .prepareWriteMismatch: return RunError(e.description, .attError)
        case .discoveryStalled, .malformed: return RunError(e.description, .attError)
        case .valueTooLong: return RunError(e.description, .usage)
        }
    case let e as WireError: return RunError(e.description, .dataError)
    default: return RunError("\(error)", .failure)
    }
}

/// A refusal of the security policy as the command line says it: the
/// option that set the rule, and how to get past it.
func message(_ e: SecuringError) -> String {
    switch e {
    case let .bondForgotten(cause, identity, rule):
        return "\(cause); \(rule == .keepForgottenBond ? "--no-repair" : "--no-pair") forbids pairing again: run without it, or remove the bond with 'attled bonds --remove \(identity.address)'"
    case .pairingNotAllowed(let reason):
        return "\(reason); drop --no-pair to pair with it"
    }
}

func classifyTransport(_ e: TransportError) -> RunError {
    switch e {
    case .invalidSpec: return RunError(e.description, .usage)
    case .noBluetoothInKernel, .noSuchAdapter, .refused, .unreachable, .deviceMissing: return RunError(e.description, .unavailable)
    case .adapterBusy: return RunError(e.description, .busy)
    case .permissionDenied: return RunError(e.description, .permission)
    case .closedByPeer, .io, .corruptStream: return RunError(e.description, .ioError)
    }
}
