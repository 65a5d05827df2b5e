/// One device the keeper looks after, for the owner that claimed it.
public final class KeptDevice {
    /// Where the keeper stands with the device; the link lives in the states
    /// that have one. Changed only by `DeviceKeeper.set` (logged, emitted).
    public enum State {
        /// Heard, no link: connected as soon as the keeper can.
        case wanted
        /// No link; no attempt before `until` (after a failure or a drop).
        case backingOff(until: Instant)
        /// A connection attempt is under way.
        case connecting
        /// The link is up; the owner is setting it up (security, discovery).
        case settingUp(Link)
        /// The owner set the link up.
        case ready(Link)
        /// An on-demand device without a link: connected when there is work.
        case idleOnDemand
        /// A link being let go (on demand, idle; or its slot given to a higher priority).
        case releasing(Link)
        /// Not tried again (a one-shot claim: its attempt failed or its link dropped).
        case gone

        /// The state without its data.
        public var phase: Phase {
            switch self {
            case .wanted: return .wanted
            case .backingOff: return .backingOff
            case .connecting: return .connecting
            case .settingUp: return .settingUp
            case .ready: return .ready
            case .idleOnDemand: return .idleOnDemand
            case .releasing: return .releasing
            case .gone: return .gone
            }
        }

        /// The link, in the states that have one.
        public var link: Link? {
            switch self {
            case let .settingUp(l), let .ready(l), let .releasing(l): return l
            default: return nil
            }
        }
    }

    /// `State` without its data, for comparisons and log lines.
    public enum Phase: String, Sendable {
        case wanted, backingOff = "backing off", connecting, settingUp = "setting up", ready
        case idleOnDemand = "idle (on demand)", releasing, gone
    }

    /// Kept (reconnected whenever it is down), or connected only for work.
    public enum Mode: Sendable { case kept, onDemand }

    public let address: DeviceAddress
    /// The owner whose claim it is (its events go to that owner alone).
    public let owner: KeeperOwner
    /// What the owner asked for.
    public internal(set) var claim: Claim
    /// Its advertised name, once heard.
    public internal(set) var name: String?
    /// The service UUIDs it advertises.
    public internal(set) var advertised: [BluetoothUUID] = []
    public internal(set) var state: State = .wanted
    public internal(set) var mode: Mode
    /// The link while it is up.
    public var link: Link? { state.link }
    public var phase: Phase { state.phase }
    /// Connection attempts since the last ready link.
    public internal(set) var attempts = 0
    /// When its link was last made ready (nil: never: not yet kept).
    public internal(set) var connectedAt: Instant?
    /// When its link last went down (the accept list waits for the longest-gone first).
    public internal(set) var downAt: Instant?
    var backoff: Backoff
    /// The on-demand release, or the kept link's move to its idle parameters.
    var quietTimer: HostToken?
    /// The link has the claim's idle parameters (not those it was made with).
    var atIdleParameters = false
    /// The owner gave its set-up up (`setupFailed`): the drop that follows backs off.
    var setupRefused = false
    /// Its owner gave it up (`DeviceKeeper.release`): forgotten once its link is down.
    var released = false
    /// Its own connect timeout (`DeviceKeeper.reach`), instead of the claim's.
    var connectTimeoutMs: Int?
    /// Reached at an address remembered from before (`reach(remembered:)`):
    /// not answering there forgets it rather than backing off.
    var atRememberedAddress = false

    /// Its place in the order of adoption (the next attempt goes to the longest wanted).
    let order: Int

    init(address: DeviceAddress, owner: KeeperOwner, claim: Claim, backoff: Backoff, order: Int = 0) {
        self.address = address
        self.owner = owner
        self.claim = claim
        self.mode = claim.kind == .onDemand ? .onDemand : .kept
        self.backoff = backoff
        self.order = order
        if claim.kind == .onDemand { state = .idleOnDemand }
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
