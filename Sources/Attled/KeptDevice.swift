/// One device the keeper looks after.
public final class KeptDevice {
    /// Where the keeper stands with the device.
    public enum State: Equatable, Sendable {
        /// Heard, no link: connected as soon as the keeper can.
        case wanted
        /// No link; no attempt before `until` (after a failure or a drop).
        case backingOff(until: Instant)
        /// A connection attempt is under way.
        case connecting
        /// The link is up; the owner is setting it up (security, discovery).
        case settingUp
        /// The owner set the link up.
        case ready
        /// An on-demand device without a link: connected when there is work.
        case idleOnDemand
        /// An on-demand link being let go.
        case releasing
        /// Not tried again (a policy without reconnection: its attempt failed or its link dropped).
        case gone
    }

    /// Kept (reconnected whenever it is down), or connected only for work.
    public enum Mode: Sendable { case kept, onDemand }

    public let address: DeviceAddress
    /// Its advertised name, once heard.
    public internal(set) var name: String?
    /// The service UUIDs it advertises.
    public internal(set) var advertised: [BluetoothUUID] = []
    public internal(set) var state: State = .wanted
    public internal(set) var mode: Mode = .kept
    /// The link while it is up.
    public internal(set) var link: Link?
    /// Connection attempts since the last ready link.
    public internal(set) var attempts = 0
    /// When its link was last made ready (nil: never: not yet kept).
    public internal(set) var connectedAt: Instant?
    /// When its link last went down (the accept list waits for the longest-gone first).
    public internal(set) var downAt: Instant?
    var backoff: Backoff
    var releaseTimer: HostToken?
    /// The owner gave its set-up up (`setupFailed`): the drop that follows backs off.
    var setupRefused = false
    /// Its own connect timeout (`DeviceKeeper.reach`), instead of the policy's.
    var connectTimeoutMs: Int?

    /// Its place in the order of adoption (the next attempt goes to the longest wanted).
    let order: Int

    init(address: DeviceAddress, backoff: Backoff, order: Int = 0) {
        self.address = address
        self.backoff = backoff
        self.order = order
    }

    /// "Name (address)" or the address, for log lines.
    public var label: String { name.map { "\($0) (\(address.address))" } ?? address.address.description }

    /// No connection attempt before this.
    var notBefore: Instant {
        if case let .backingOff(until) = state { return until }
        return .distantPast
    }
}

extension Instant {
    /// "in 1234 ms" from now, for log lines.
    public var msUntilNowString: String { "in \(Instant.now().msUntil(self)) ms" }
}
