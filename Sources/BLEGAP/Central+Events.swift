import BLEWire
import BLEHCI

// The Central's events, for any number of subscribers (each with a token),
// and the adopters of connections nobody asked for.
extension Central {

    /// What the Central tells its subscribers.
    public enum Event {
        /// A device first heard (`isNew`) or whose merged data changed.
        case deviceUpdated(DiscoveredDevice, isNew: Bool)
        /// Every report of a device, after `deviceUpdated` when the data
        /// changed (a long-lived owner, such as the gateway, waits for a known
        /// device to be heard again).
        case deviceSeen(DiscoveredDevice)
        /// Every advertising report as received (an extended one's pieces
        /// joined), before it is merged into `devices`: for those that pass
        /// the raw data on (the Bluetooth proxy).
        case heard(HeardAdvertisement)
        /// An advertising report whose data was malformed (address, problems).
        case malformedAdvertisement(DeviceAddress, [String])
        /// A connection ended (after `connections` forgot it).
        case disconnected(LEConnection)
        /// A connection's parameters changed (LE Connection Update Complete,
        /// success): its interval, latency and supervision timeout are the new ones.
        case connectionUpdated(LEConnection)
    }

    /// One subscription or adopter (its `Subscribers` token); pass it to `cancel(_:)`.
    public struct Subscription: Hashable, Sendable {
        enum Kind: Hashable, Sendable {
            case events(Subscribers<Event>.Token)
            case adopter(Subscribers<Unrequested>.Token)
        }
        let kind: Kind
    }

    /// A connection nobody asked for, offered to the adopters in turn until one takes it.
    final class Unrequested {
        let connection: LEConnection
        var taken = false
        init(_ c: LEConnection) { connection = c }
    }

    /// Calls `handler` with every event, in subscription order, until cancelled.
    @discardableResult
    public func subscribe(_ handler: @escaping (Event) -> Void) -> Subscription {
        Subscription(kind: .events(subscribers.add(handler)))
    }

    /// Offers `handler` every connection that completed with no attempt
    /// waiting for it (for example one that completed after its attempt was
    /// cancelled and given up): the first adopter that returns true keeps
    /// it; when none does, it is disconnected.
    @discardableResult
    public func adoptUnrequested(_ handler: @escaping (LEConnection) -> Bool) -> Subscription {
        Subscription(kind: .adopter(adopters.add { offer in if !offer.taken { offer.taken = handler(offer.connection) } }))
    }

    /// Ends a subscription or an adopter; an unknown token is ignored.
    public func cancel(_ t: Subscription) {
        switch t.kind {
        case .events(let s): subscribers.remove(s)
        case .adopter(let s): adopters.remove(s)
        }
    }

    /// Offers `c` to the adopters; true when one took it.
    func offerToAdopters(_ c: LEConnection) -> Bool {
        let offer = Unrequested(c)
        adopters.emit(offer)
        return offer.taken
    }

    /// Live subscriptions and adopters, for leak checks in tests.
    public var subscriptionCount: Int { subscribers.count + adopters.count }

    /// A connection made to us (LE Connection Complete, Role 1: we were
    /// advertising): never a connection attempt's outcome. The Advertiser
    /// takes it; when none does, it is offered to the adopters, then disconnected.
    func incomingConnection(_ cc: LEConnectionComplete) {
        let c = LEConnection(cc)
        connections[cc.handle] = c
        askForAirParameters(c)
        if incoming?(c) == true || offerToAdopters(c) { return }
        host.enqueue(HCI.Disconnect(handle: c.handle, reason: .remoteUserTerminated).command) { _ in }
    }

    func publish(_ e: Event) { subscribers.emit(e) }

    /// Subscribes to device updates only (first heard, data changed).
    @discardableResult
    public func onDeviceUpdate(_ handler: @escaping (DiscoveredDevice, _ isNew: Bool) -> Void) -> Subscription {
        subscribe { if case let .deviceUpdated(d, isNew) = $0 { handler(d, isNew) } }
    }

    /// Subscribes to every report of a device.
    @discardableResult
    public func onDeviceSeen(_ handler: @escaping (DiscoveredDevice) -> Void) -> Subscription {
        subscribe { if case let .deviceSeen(d) = $0 { handler(d) } }
    }

    /// Subscribes to malformed advertising data.
    @discardableResult
    public func onMalformedAdvertisement(_ handler: @escaping (DeviceAddress, [String]) -> Void) -> Subscription {
        subscribe { if case let .malformedAdvertisement(a, p) = $0 { handler(a, p) } }
    }

    /// Subscribes to connections ending.
    @discardableResult
    public func onDisconnection(_ handler: @escaping (LEConnection) -> Void) -> Subscription {
        subscribe { if case let .disconnected(c) = $0 { handler(c) } }
    }
}

/// One advertising report's data as the controller gave it.
public struct HeardAdvertisement: Sendable, Equatable {
    public var address: DeviceAddress
    /// dBm; 127: not available.
    public var rssi: Int8
    /// The advertising data or scan response data, as received.
    public var data: [UInt8]
    public var isScanResponse: Bool
    public var connectable: Bool
}
