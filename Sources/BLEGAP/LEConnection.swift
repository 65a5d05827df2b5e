import BLEWire
import BLEHCI

/// A live LE connection as GAP sees it.
public final class LEConnection {
    public let handle: UInt16
    public let peer: DeviceAddress
    /// `.peripheral` for a connection made to us while we advertised.
    public let role: HCIRole
    /// 1.25 ms units.
    public internal(set) var interval: UInt16
    public internal(set) var latency: UInt16
    /// 10 ms units.
    public internal(set) var supervisionTimeout: UInt16
    public internal(set) var isConnected = true
    public internal(set) var disconnectReason: HCIStatus?
    public let connectedAt: Instant
    /// LL payload octets each way (27 until an LE Data Length Change says more).
    public internal(set) var txOctets: UInt16 = 27
    public internal(set) var rxOctets: UInt16 = 27
    /// PHYs each way (1: 1M, 2: 2M, 3: Coded), from LE PHY Update Complete.
    public internal(set) var txPHY: UInt8 = 1
    public internal(set) var rxPHY: UInt8 = 1
    /// What was asked of the controller at connect ("data length 251, 2M PHY"), nil when nothing.
    public internal(set) var airRequest: String?
    /// Called when the data length or the PHY changed.
    public var onAirChange: (() -> Void)?
    /// Run once at Disconnection Complete.
    var whenDisconnected: [() -> Void] = []

    /// Runs `handler` once when the connection ends, with the reason, before
    /// the Central's subscribers hear of it: the connection's owner (the
    /// facade's `Link`) tears its layers down here, in its own order.
    public func whenEnded(_ handler: @escaping (HCIStatus?) -> Void) {
        whenDisconnected.append { [unowned self] in handler(self.disconnectReason) }
    }

    init(_ cc: LEConnectionComplete) {
        handle = cc.handle; peer = cc.peer; role = cc.role
        interval = cc.interval; latency = cc.latency; supervisionTimeout = cc.supervisionTimeout
        connectedAt = Instant.now()
    }

    /// Connection interval in microseconds.
    public var intervalMicroseconds: UInt64 { UInt64(interval) * 1250 }

    /// ", asking data length 251, 2M PHY" for the connect line; "" when nothing was asked.
    public var airRequestSuffix: String { airRequest.map { ", asking \($0)" } ?? "" }
    /// "data length 251/251 octets, PHY 2M/2M" (TX/RX) as the link has them now.
    public var airDescription: String {
        let phy = txPHY == rxPHY ? LEPHYUpdateComplete.name(txPHY) : "\(LEPHYUpdateComplete.name(txPHY))/\(LEPHYUpdateComplete.name(rxPHY))"
        let len = txOctets == rxOctets ? "\(txOctets)" : "\(txOctets)/\(rxOctets)"
        return "data length \(len) octets, PHY \(phy)"
    }
}
