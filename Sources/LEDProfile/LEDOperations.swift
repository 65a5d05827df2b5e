import BLEWire
import BLEHCI
import BLEATT
import BLEGATT

/// The LED jobs as GATT procedures over one link: find the LED service and
/// characteristics, write a colour, read it back. Event-driven (each returns
/// a `Future`), so several lamps are driven at once in one event loop.
public enum LEDOperations {
    /// Why an LED device could not be used.
    public enum Failure: Error, Equatable, Sendable, CustomStringConvertible {
        /// The device has none of the known LED services.
        case noLEDService(device: String)
        /// A characteristic returned an empty value where a byte was expected.
        case emptyValue(BluetoothUUID)
        /// A lamp's operation before its characteristics were resolved.
        case notResolved(device: String)

        public var description: String {
            switch self {
            case .noLEDService(let d):
                return "\(d) has none of the known LED services (pycom \(LEDProfile.pycom.service), particle \(LEDProfile.particle.service), harness \(LEDProfile.harness.service))"
            case .emptyValue(let u):
                return "characteristic \(u) returned an empty value"
            case .notResolved(let d):
                return "\(d): its LED characteristics are not resolved yet"
            }
        }
    }

    /// Discovers the LED service and its characteristics, stopping as soon as
    /// the profile's characteristics are known. With no `profile`, the one the
    /// device advertised, else each known service in turn. Exchanges the MTU
    /// only when that saves a round trip (several 128-bit declarations fit
    /// one Read By Type response at a large MTU, one at 23).
    /// - Returns: a future of the resolved characteristics; it fails with
    ///   `GATTError.serviceNotFound`, `Failure.noLEDService`, `ATTError`.
    public static func startDiscover(_ gatt: GATTClient, profile: LEDProfile?, advertised: [BluetoothUUID],
                                     deviceName: String) -> Future<ResolvedLED> {
        let chosen = profile ?? LEDProfile.detect(advertised)
        let found: Future<(LEDProfile, Service)>
        if let p = chosen {
            found = gatt.startDiscoverPrimaryService(uuid: p.service).map { s in
                guard let s else { throw GATTError.serviceNotFound(p.service) }
                return (p, s)
            }
        } else {
            var hit: (LEDProfile, Service)? = nil
            found = sequentially(LEDProfile.known) { p in
                guard hit == nil else { return .done }
                return gatt.startDiscoverPrimaryService(uuid: p.service).map { s in if let s { hit = (p, s) } }
            }.map {
                guard let h = hit else { throw Failure.noLEDService(device: deviceName) }
                return h
            }
        }
        return found.flatMap { (prof, svc) -> Future<ResolvedLED> in
            let b = gatt.bearer
            let wide = prof.requiredCharacteristics.filter { $0.uint16 == nil }.count
            let mtu: Future<Void> = (!b.mtuExchanged && (wide >= 2 || !prof.isRGB)) ? b.startExchangeMTU().map { _ in } : .done
            return mtu.flatMap { gatt.startDiscoverCharacteristics(of: svc) { ResolvedLED.isComplete(prof, $0) } }
                .map { try ResolvedLED(profile: prof, service: svc, characteristics: $0) }
        }
    }

    /// Writes `value` with the type the characteristic's properties call for:
    /// Write Request when it has `write`, else Write Command; done when it is
    /// (the Write Response, or the Write Command sent by the controller), or
    /// with `queued`, a Write Command as soon as it is queued (writes back to
    /// back, then `GATTClient.startSent`).
    /// - Returns: a future of whether a Write Request was used.
    public static func startWrite(_ gatt: GATTClient, _ c: Characteristic, _ value: [UInt8], queued: Bool = false) -> Future<Bool> {
        if c.properties.contains(.write) {
            return gatt.startWrite(c.valueHandle, value: value, withResponse: true).map { true }
        }
        if c.properties.contains(.writeWithoutResponse) {
            let f = queued ? gatt.startWrite(c.valueHandle, value: value, withResponse: false)
                           : gatt.startWriteDone(c.valueHandle, value: value, withResponse: false)
            return f.map { false }
        }
        return Future(error: GATTError.notPermitted(c.uuid, operation: "writes", properties: c.properties))
    }

    /// Writes red, green and blue, then waits until Write Commands, if any,
    /// were confirmed sent by the controller, so disconnecting cannot lose them.
    /// Write Commands go out back to back; a Write Request is sent only once
    /// the previous write succeeded, so when the device refuses the first one
    /// (Insufficient Encryption: the link must be paired first) nothing else
    /// has been sent and, after pairing, each value is written exactly once.
    /// ATT allows one outstanding request per bearer anyway (Core Vol 3 Part F
    /// 3.3.2), so chaining them costs no round trip.
    /// - Returns: a future of the write types used (true: Write Request).
    public static func startSetColour(_ gatt: GATTClient, _ led: ResolvedLED, _ rgb: RGB) -> Future<Set<Bool>> {
        guard let chars = led.rgb else {
            return Future(error: GATTError.characteristicNotFound(led.profile.requiredCharacteristics.first ?? led.profile.service, service: led.profile.service))
        }
        var kinds = Set<Bool>()
        // A Write Command's future completes as it is queued: the next write follows at once.
        return sequentially(Array(zip(chars, [rgb.r, rgb.g, rgb.b]))) { (c, v) -> Future<Void> in
            startWrite(gatt, c, [v], queued: true).map { kinds.insert($0); return () }
        }.flatMap { () -> Future<Set<Bool>> in
            guard kinds.contains(false) else { return Future(value: kinds) }
            return gatt.startSent().map { kinds }
        }
    }

    /// Reads red, green and blue (the first byte of each).
    /// - Returns: a future of the colour.
    public static func startReadColour(_ gatt: GATTClient, _ led: ResolvedLED) -> Future<RGB> {
        guard let chars = led.rgb else {
            return Future(error: GATTError.characteristicNotFound(led.profile.service, service: led.profile.service))
        }
        for c in chars where !c.properties.contains(.read) {
            return Future(error: GATTError.notPermitted(c.uuid, operation: "reads", properties: c.properties))
        }
        var v: [UInt8] = []
        return sequentially(chars) { c in
            gatt.startRead(c.valueHandle).map { bytes in
                guard let first = bytes.first else { throw Failure.emptyValue(c.uuid) }
                v.append(first)
            }
        }.map { RGB(v[0], v[1], v[2]) }
    }
}
