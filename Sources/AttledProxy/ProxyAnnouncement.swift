import Attled
import CAvahi

/// The proxy announced over mDNS as ESPHome nodes are (`_esphomelib._tcp`,
/// with the TXT records Home Assistant's ESPHome discovery reads), through
/// the local avahi-daemon. Home Assistant then offers to add it with no
/// configuration; without a daemon it is added by host and port.
final class ProxyAnnouncement {
    private let handle: OpaquePointer

    private init(_ handle: OpaquePointer) { self.handle = handle }

    /// The service type ESPHome's nodes announce.
    static let serviceType = "_esphomelib._tcp"

    /// The TXT records: what Home Assistant's ESPHome discovery reads (the
    /// MAC as 12 lowercase hex digits, the version, the friendly name, the
    /// encryption when a key is set).
    static func txt(_ c: ProxyConfig) -> [String] {
        var t = ["friendly_name=\(c.friendlyName ?? c.name)", "version=\(ProxyConfig.esphomeVersion)",
                 "mac=\(c.macAddress.map { Hex.int($0, width: 2) }.joined())", "platform=attled", "network=ethernet"]
        if c.key != nil { t.append("api_encryption=Noise_NNpsk0_25519_ChaChaPoly_SHA256") }
        return t
    }

    /// Starts the announcement.
    /// - Returns: it, or why it could not start (no libavahi-client, no daemon).
    static func start(_ c: ProxyConfig, port: UInt16) -> Result<ProxyAnnouncement, AnnouncementError> {
        let records = txt(c)
        var error = [CChar](repeating: 0, count: 256)
        let cStrings = records.map { strdupC($0) }
        defer { cStrings.forEach { free($0) } }
        var pointers: [UnsafePointer<CChar>?] = cStrings.map { UnsafePointer($0) }
        let h = pointers.withUnsafeMutableBufferPointer { buf in
            attled_mdns_publish(c.name, serviceType, port, buf.baseAddress, Int32(records.count), &error)
        }
        guard let h else { return .failure(AnnouncementError(reason: string(error))) }
        return .success(ProxyAnnouncement(h))
    }

    enum State { case starting, established(name: String), failed(String) }

    var state: State {
        switch attled_mdns_state(handle) {
        case Int32(ATTLED_MDNS_ESTABLISHED.rawValue):
            var n = [CChar](repeating: 0, count: 256)
            attled_mdns_name(handle, &n, 256)
            return .established(name: Self.string(n))
        case Int32(ATTLED_MDNS_FAILED.rawValue):
            var e = [CChar](repeating: 0, count: 256)
            attled_mdns_error(handle, &e, 256)
            return .failed(Self.string(e))
        default:
            return .starting
        }
    }

    func stop() { attled_mdns_stop(handle) }

    struct AnnouncementError: Error, CustomStringConvertible {
        let reason: String
        var description: String { reason }
    }

    private static func string(_ c: [CChar]) -> String {
        String(decoding: c.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    private static func strdupC(_ s: String) -> UnsafeMutablePointer<CChar> {
        let bytes = Array(s.utf8CString)
        let p = UnsafeMutablePointer<CChar>.allocate(capacity: bytes.count)
        p.initialize(from: bytes, count: bytes.count)
        return p
    }

    private static func free(_ p: UnsafeMutablePointer<CChar>) { p.deallocate() }
}
