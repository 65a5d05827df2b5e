import BLEWire
import BLEGATT
import BLEGATTServer
import LEDProfile

/// The LED a served database holds (a board, or a clone of one): found by
/// its profile's service and characteristics, its state followed through the
/// clients' writes. A harness notifies every command written to it on its
/// button characteristic, to the clients that subscribed, as the firmware does.
public final class ServedLED {
    public let led: ResolvedLED
    unowned let server: GATTServer

    /// What the LED shows now.
    public enum State: Equatable, Sendable {
        case colour(RGB)
        /// The harness's buttons, pressed or not.
        case buttons([Bool])
    }
    public private(set) var state: State
    /// The LED changed: its new state, the client that changed it.
    public var onChange: ((State, DeviceAddress) -> Void)?

    /// The LED of `server`'s database: the first known profile whose service it serves.
    /// - Returns: nil when the database has no LED service attled knows.
    public init?(server: GATTServer) {
        let db = server.database
        var found: ResolvedLED? = nil
        for g in db.groups {
            guard let p = LEDProfile.detect([g.type]) else { continue }
            let chars = db.characteristics.filter { $0.valueHandle > g.start && $0.valueHandle <= g.end }.map {
                Characteristic(declarationHandle: $0.declarationHandle, properties: $0.properties, valueHandle: $0.valueHandle, uuid: $0.uuid, end: $0.end)
            }
            if let r = try? ResolvedLED(profile: p, service: Service(uuid: g.type, start: g.start, end: g.end), characteristics: chars) { found = r; break }
        }
        guard let led = found else { return nil }
        self.led = led
        self.server = server
        state = led.rgb != nil ? .colour(RGB(0, 0, 0)) : .buttons([false, false])
        state = current()
        server.subscribe { [weak self] e in
            if case let .write(session, w) = e { self?.written(w, by: session.peer) }
        }
    }

    /// The state the database's values say.
    func current() -> State {
        if let rgb = led.rgb {
            let v = rgb.map { server.database[$0.valueHandle]?.value.first ?? 0 }
            return .colour(RGB(v[0], v[1], v[2]))
        }
        return state
    }

    private func written(_ w: GATTServer.Write, by peer: DeviceAddress) {
        if led.rgb?.contains(where: { $0.valueHandle == w.handle }) == true {
            let s = current()
            if s != state { state = s; onChange?(s, peer) }
            return
        }
        guard let cmd = led.command, cmd.valueHandle == w.handle, let byte = w.value.first else { return }
        // The firmware notifies each command on the button characteristic.
        if let n = led.notifier { server.update(n.valueHandle, [byte]) }
        guard case var .buttons(b) = state else { return }
        for button in HarnessButton.allCases {
            if byte == button.pressByte { b[button.rawValue - 1] = true }
            if byte == button.releaseByte { b[button.rawValue - 1] = false }
        }
        let new = State.buttons(b)
        if new != state { state = new; onChange?(new, peer) }
    }
}
