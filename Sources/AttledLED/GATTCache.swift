#if canImport(Glibc)
import Glibc
#endif
import BLEWire
import BLEGATT
import LEDProfile
import BLETransport

/// What a run learned about a device, kept between runs so a warm run can
/// write straight to the LED characteristics (and connect without scanning).
///
/// Files, under `$XDG_CACHE_HOME/attled/` (else `/var/cache/attled/` as root,
/// else `~/.cache/attled/`):
/// - `gatt-AA-BB-CC-DD-EE-FF-random`: one device's LED service and characteristics,
///   and its GATT Database Hash (or that it has none), read in the connection
///   that discovered them; plain text, one record per line.
/// - `names`: which address each advertised name resolved to.
///
/// No warm run trusts an entry unchecked (except with `--trust-cache`): a
/// device with a Database Hash (0x2B2A) has it read at the cached handle and
/// compared (one round trip); one without has its characteristic declarations
/// in the cached service range read again and compared field for field. A
/// Service Changed indication whose range overlaps the cached service
/// invalidates the entry, and any ATT error on a cached handle falls back to
/// discovery in the same connection.
public struct GATTCache: Sendable {
    public struct Entry: Equatable, Sendable {
        public var profile: String
        public var service: Service
        public var characteristics: [Characteristic]
        /// Handle and value of the Database Hash; nil when not yet known.
        public var hashHandle: UInt16?
        public var hash: [UInt8]?
        /// True once a run found that the device has no Database Hash.
        public var noHash = false
        /// Whether the LED characteristics need an encrypted link (found by
        /// reading one back once, for devices written with Write Commands,
        /// which a protected characteristic drops without an error); nil: not known.
        public var needsEncryption: Bool? = nil
    }

    public let directory: String

    public init(directory: String) { self.directory = directory }

    /// The cache directory for this process, or nil when none can be made.
    public static func defaultDirectory(_ env: [String: String]) -> String {
        if let x = env["XDG_CACHE_HOME"], !x.isEmpty { return x + "/attled" }
        if getuid() == 0 { return "/var/cache/attled" }
        if let h = env["HOME"], !h.isEmpty { return h + "/.cache/attled" }
        return "/tmp/attled-cache-\(getuid())"
    }

    public func path(_ a: DeviceAddress) -> String {
        directory + "/gatt-" + a.address.description.replacingColons() + "-" + (a.type.isRandom ? "random" : "public")
    }

    // MARK: GATT entries

    public func load(_ a: DeviceAddress) -> Entry? {
        guard let text = readFile(path(a)) else { return nil }
        var profile: String? = nil, service: Service? = nil
        var chars: [Characteristic] = []
        var hashHandle: UInt16? = nil, hash: [UInt8]? = nil, noHash = false, needsEncryption: Bool? = nil
        let lines = text.split(separator: "\n").map { $0.split(separator: " ").map(String.init) }
        guard lines.first == ["attled-gatt-cache", "1"] else { return nil }
        for f in lines.dropFirst() {
            switch f.first {
            case "profile" where f.count == 2: profile = f[1]
            case "service" where f.count == 4:
                guard let u = BluetoothUUID(f[1]), let s = UInt16(f[2]), let en = UInt16(f[3]) else { return nil }
                service = Service(uuid: u, start: s, end: en)
            case "char" where f.count == 6:
                guard let u = BluetoothUUID(f[1]), let d = UInt16(f[2]), let p = UInt8(f[3]), let v = UInt16(f[4]), let en = UInt16(f[5]) else { return nil }
                chars.append(Characteristic(declarationHandle: d, properties: CharacteristicProperties(rawValue: p), valueHandle: v, uuid: u, end: en))
            case "hash" where f.count == 3:
                guard let h = UInt16(f[1]), let v = Hex.parse(f[2]) else { return nil }
                hashHandle = h; hash = v
            case "nohash": noHash = true
            case "security" where f.count == 2 && (f[1] == "encrypted" || f[1] == "open"): needsEncryption = f[1] == "encrypted"
            default: return nil // unknown or damaged: ignore the whole entry
            }
        }
        guard let p = profile, let s = service, !chars.isEmpty else { return nil }
        return Entry(profile: p, service: s, characteristics: chars, hashHandle: hashHandle, hash: hash, noHash: noHash, needsEncryption: needsEncryption)
    }

    public func save(_ a: DeviceAddress, _ e: Entry) {
        var lines = ["attled-gatt-cache 1", "profile \(e.profile)", "service \(e.service.uuid.long) \(e.service.start) \(e.service.end)"]
        for c in e.characteristics {
            lines.append("char \(c.uuid.long) \(c.declarationHandle) \(c.properties.rawValue) \(c.valueHandle) \(c.end)")
        }
        if let h = e.hashHandle, let v = e.hash { lines.append("hash \(h) \(Hex.string(v, separator: ""))") }
        if e.noHash { lines.append("nohash") }
        if let n = e.needsEncryption { lines.append("security \(n ? "encrypted" : "open")") }
        writeFile(path(a), lines.joined(separator: "\n") + "\n")
    }

    public func remove(_ a: DeviceAddress) { unlink(path(a)) }

    // MARK: names

    public func address(forName name: String) -> DeviceAddress? {
        guard let text = readFile(directory + "/names") else { return nil }
        for line in text.split(separator: "\n") {
            let f = line.split(separator: "\t").map(String.init)
            if f.count == 3, f[0] == name, let a = BDAddress(f[1]) {
                return DeviceAddress(a, f[2] == "public" ? .public : .random)
            }
        }
        return nil
    }

    public func remember(name: String, _ a: DeviceAddress) {
        guard !name.contains("\t"), !name.contains("\n") else { return }
        var keep: [String] = []
        if let text = readFile(directory + "/names") {
            keep = text.split(separator: "\n").map(String.init).filter { !$0.hasPrefix(name + "\t") }
        }
        keep.append("\(name)\t\(a.address)\t\(a.type.isRandom ? "random" : "public")")
        writeFile(directory + "/names", keep.suffix(256).joined(separator: "\n") + "\n")
    }

    public func forget(name: String) {
        guard let text = readFile(directory + "/names") else { return }
        let keep = text.split(separator: "\n").map(String.init).filter { !$0.hasPrefix(name + "\t") }
        writeFile(directory + "/names", keep.joined(separator: "\n") + (keep.isEmpty ? "" : "\n"))
    }

    // MARK: files

    func readFile(_ p: String) -> String? {
        SystemIO.readFile(p).map { String(decoding: $0, as: UTF8.self) }
    }

    /// Writes atomically (temporary file, then rename; not flushed to the
    /// disk); failures are silent: the cache only ever saves time.
    func writeFile(_ p: String, _ text: String) {
        makeDirectories(directory)
        try? SystemIO.writeFileAtomically(p, Array(text.utf8), mode: 0o644, durable: false)
    }

    func makeDirectories(_ d: String) {
        var path = ""
        for part in d.split(separator: "/") {
            path += "/" + part
            mkdir(path, 0o755)
        }
    }
}

extension String {
    fileprivate func replacingColons() -> String { String(map { $0 == ":" ? "-" : $0 }) }
}
