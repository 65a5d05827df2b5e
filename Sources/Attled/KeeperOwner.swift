/// What an owner asks of the keeper for one device.
public struct Claim: Sendable {
    public enum Kind: Sendable {
        /// Connected whenever it is down (from the Filter Accept List where the
        /// controller has one), with backoff after failures.
        case keep
        /// Connected once: a failed attempt or a dropped link ends the claim
        /// (the device is `.gone`), as a one-shot job wants.
        case once
        /// Connected while the owner has work for it (`KeeperOwner.hasWork`),
        /// let go after `DeviceKeeper.Policy.onDemandIdleMs` without.
        case onDemand
    }

    /// The parameters a kept link moves to once quiet, and after how long.
    public struct Idle: Sendable {
        public var afterMs: Int
        public var parameters: ConnectionParameters
        public init(afterMs: Int, parameters: ConnectionParameters) {
            self.afterMs = afterMs
            self.parameters = parameters
        }
    }

    public var kind: Kind
    /// The parameters the link is made with (and goes back to on work).
    public var parameters: ConnectionParameters = .oneShot
    /// A kept link quiet for `idle.afterMs` moves to `idle.parameters`, and
    /// back to `parameters` when the owner is `busy` with it (nil: it stays).
    public var idle: Idle?

    public init(_ kind: Kind, parameters: ConnectionParameters = .oneShot, idle: Idle? = nil) {
        self.kind = kind
        self.parameters = parameters
        self.idle = idle
    }

    public static let keep = Claim(.keep)
    public static let once = Claim(.once)
    public static let onDemand = Claim(.onDemand)
}

/// One party that claims devices from a `DeviceKeeper`: a one-shot job, the
/// UI, the gateway, the Bluetooth proxy. Each hears only its own devices'
/// events (and the controller's), and the keeper arbitrates the controller's
/// slots between owners by `priority` (DeviceKeeper: "Slots").
public final class KeeperOwner {
    /// For log lines.
    public let name: String
    /// Owners of higher priority are served first when slots run short, and
    /// may take a slot held by a lower one (never one being set up).
    public let priority: Int
    /// Which devices heard it claims, and how (nil: not this owner's).
    public var wants: (DiscoveredDevice) -> Claim? = { _ in nil }
    /// Whether the owner has work for an on-demand device (connected for
    /// it, released only without it).
    public var hasWork: (KeptDevice) -> Bool = { _ in false }
    /// Whether the owner still looks for devices: the keeper scans while
    /// some owner does.
    public var scanWanted: () -> Bool = { true }
    /// At most this many links for this owner (nil: what the slots allow).
    public var maxLinks: Int?
    /// A kept device beyond the slots is connected on demand (true), or
    /// waits for a free slot (false: an app that keeps one device at a time).
    public var onDemandBeyondSlots = true
    /// Several targets on a controller that cannot scan while initiating:
    /// connects wait while the scan goes on (KeeperGather.swift); 0: at once.
    public var gatherMs = 0
    var subscribers = Subscribers<DeviceKeeper.Event>()
    /// Still served by its keeper (`DeviceKeeper.remove` ends that).
    public internal(set) var active = true

    init(name: String, priority: Int) {
        self.name = name
        self.priority = priority
    }

    /// Calls `handler` with every event of this owner's devices, and the
    /// controller's events, from now on.
    @discardableResult
    public func subscribe(_ handler: @escaping (DeviceKeeper.Event) -> Void) -> DeviceKeeper.Subscription {
        subscribers.add(handler)
    }

    public func cancel(_ s: DeviceKeeper.Subscription) { subscribers.remove(s) }
}
