/// The handlers of one kind of event, called in the order they subscribed;
/// the token `add` returns removes one. Every event source that fans out to
/// any number of owners (the device keeper, a GATT server, attled serve)
/// keeps one. A handler added or removed while an event is delivered takes
/// effect from the next event.
public struct Subscribers<Event> {
    /// What `add` returns and `remove` takes.
    public struct Token: Hashable, Sendable { let id: Int }
    private var handlers: [(Token, (Event) -> Void)] = []
    private var last = 0

    public init() {}

    /// Adds `handler`, called with every event from now on.
    public mutating func add(_ handler: @escaping (Event) -> Void) -> Token {
        last += 1
        let t = Token(id: last)
        handlers.append((t, handler))
        return t
    }

    /// Removes a handler; an unknown or spent token is ignored.
    public mutating func remove(_ t: Token) { handlers.removeAll { $0.0 == t } }

    /// Calls every handler with `event`.
    public func emit(_ event: Event) { for (_, h) in handlers { h(event) } }

    /// How many handlers there are (leak checks in tests).
    public var count: Int { handlers.count }
}
