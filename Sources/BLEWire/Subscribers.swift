/// The handlers of one kind of event, called in the order they subscribed;
/// the token `add` returns removes one. Every event source that fans out to
/// any number of owners (the HCI host, the Central, the device keeper, a
/// GATT server, attled serve) keeps one per kind of event. A handler added
/// while an event is delivered gets the next one; a handler removed while an
/// event is delivered (by an earlier handler) is not called for it.
public final class Subscribers<Event> {
    /// What `add` returns and `remove` takes.
    public struct Token: Hashable, Sendable { let id: Int }
    private var handlers: [(Token, (Event) -> Void)] = []
    private var last = 0
    /// Counts removals, so `emit` checks for them only when there were some.
    private var removals = 0

    public init() {}

    /// Adds `handler`, called with every event from now on.
    public func add(_ handler: @escaping (Event) -> Void) -> Token {
        last += 1
        let t = Token(id: last)
        handlers.append((t, handler))
        return t
    }

    /// Removes a handler; an unknown or spent token is ignored.
    public func remove(_ t: Token) {
        let before = handlers.count
        handlers.removeAll { $0.0 == t }
        if handlers.count != before { removals += 1 }
    }

    /// Removes every handler.
    public func removeAll() {
        if !handlers.isEmpty { removals += 1 }
        handlers.removeAll()
    }

    /// Calls every handler with `event`.
    public func emit(_ event: Event) {
        let snapshot = handlers, removalsBefore = removals
        for (t, h) in snapshot {
            if removals != removalsBefore, !handlers.contains(where: { $0.0 == t }) { continue }
            h(event)
        }
    }

    /// How many handlers there are (leak checks in tests).
    public var count: Int { handlers.count }
}
