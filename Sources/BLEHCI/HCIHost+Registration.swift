import BLEWire
import BLETransport

// Registrations on the host: handlers for events, ACL, undecodable packets
// and closing, and timers; each returns a token that `cancel` takes.
extension HCIHost {
    /// Registers a handler for every decoded event (Command Complete/Status
    /// and Number Of Completed Packets reach it after the host used them).
    /// - Returns: the token that `cancel(_:)` takes.
    @discardableResult
    public func onEvent(_ h: @escaping (HCIEvent) -> Void) -> HostToken {
        HostToken(.event(eventHandlers.add(h)))
    }

    /// Registers a handler for every incoming ACL packet.
    /// - Returns: the token that `cancel(_:)` takes.
    @discardableResult
    public func onACL(_ h: @escaping (ACLPacket) -> Void) -> HostToken {
        HostToken(.acl(aclHandlers.add(h)))
    }

    /// Registers a handler for an event that failed to decode (it is otherwise ignored).
    /// - Returns: the token that `cancel(_:)` takes.
    @discardableResult
    public func onUndecodable(_ h: @escaping (HCIPacket, WireError) -> Void) -> HostToken {
        HostToken(.undecodable(undecodableHandlers.add { h($0.packet, $0.error) }))
    }

    /// Registers a handler called once when the host fails or is closed, with the error.
    /// - Returns: the token that `cancel(_:)` takes.
    @discardableResult
    public func onClose(_ h: @escaping (HCIError) -> Void) -> HostToken {
        HostToken(.close(closeHandlers.add(h)))
    }

    /// Runs `action` on the event loop (inside `pump`) once `due` has passed,
    /// never from inside this call, and not once the host has failed.
    /// - Returns: the token that `cancel(_:)` takes to stop it first.
    @discardableResult
    public func schedule(at due: Instant, _ action: @escaping () -> Void) -> HostToken {
        var token: EventLoop.Token?
        let t = loop.schedule(at: due) { [weak self] in
            guard let self else { return }
            if let token { self.timers.remove(token) }
            if self.failure == nil { action() }
        }
        token = t
        timers.insert(t)
        return HostToken(.timer(t))
    }

    /// Runs `action` inside `pump` after `ms` milliseconds.
    @discardableResult
    public func schedule(afterMs ms: Int, _ action: @escaping () -> Void) -> HostToken {
        schedule(at: Instant.now().adding(ms: ms), action)
    }

    /// Removes a handler or timer. Cancelling twice, or a token already spent, is harmless.
    public func cancel(_ t: HostToken) {
        switch t.registration {
        case .event(let s): eventHandlers.remove(s)
        case .acl(let s): aclHandlers.remove(s)
        case .undecodable(let s): undecodableHandlers.remove(s)
        case .close(let s): closeHandlers.remove(s)
        case .timer(let lt):
            loop.cancel(lt)
            timers.remove(lt)
        }
    }

    /// Removes several registrations.
    public func cancel(_ ts: [HostToken]) { for t in ts { cancel(t) } }

    /// Number of live registrations (handlers and timers), for leak checks in tests.
    public var registrationCount: Int {
        eventHandlers.count + aclHandlers.count + undecodableHandlers.count + closeHandlers.count + timers.count
    }
}
