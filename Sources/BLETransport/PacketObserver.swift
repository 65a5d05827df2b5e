import BLEWire

/// Sees every packet that crosses between the transport and the HCI layer,
/// in both directions, with a monotonic timestamp: the one tap the tracer
/// and capture writer hang on. Observers must not throw into the data path.
public protocol PacketObserver: AnyObject {
    func observe(_ packet: HCIPacket, direction: Direction, at time: Instant)
}
