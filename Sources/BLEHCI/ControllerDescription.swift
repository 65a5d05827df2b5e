import BLEWire

/// What the initialisation reads about a controller that does not change
/// while it keeps its firmware: the commands it lists, its LE features and
/// states, its ACL buffers. Remembered per controller (`ControllerMemory`),
/// it spares the next initialisation four or five commands, which a slow
/// controller (a UART at a low baud rate, Root Canal's ~45 ms per command)
/// makes the largest part of a one-shot job.
///
/// It is trusted only for the controller it was read from: the same Read
/// Local Version Information (company, HCI and LMP versions and revisions:
/// a firmware update changes them) and the same Read BD_ADDR.
public struct ControllerDescription: Hashable, Sendable {
    public var version: LocalVersion
    public var publicAddress: BDAddress
    public var supportedCommands: [UInt8]
    public var leFeatures: UInt64
    public var aclBuffers: BufferSize
    /// LE_States (nil: the controller does not list LE Read Supported States).
    public var leStates: LEStates?

    public init(version: LocalVersion, publicAddress: BDAddress, supportedCommands: [UInt8], leFeatures: UInt64,
                aclBuffers: BufferSize, leStates: LEStates?) {
        self.version = version; self.publicAddress = publicAddress; self.supportedCommands = supportedCommands
        self.leFeatures = leFeatures; self.aclBuffers = aclBuffers; self.leStates = leStates
    }

    /// Whether this description was read from the controller that answered
    /// `version` and `publicAddress` now.
    public func describes(version v: LocalVersion?, publicAddress a: BDAddress) -> Bool {
        v == version && a == publicAddress
    }

    /// The lines of its file: `key value`, values in hex.
    public var text: String {
        let v = version
        var lines = ["attled-controller 1",
                     "version \(Hex.int(v.hciVersion, width: 2)) \(Hex.int(v.hciRevision, width: 4)) \(Hex.int(v.lmpVersion, width: 2)) \(Hex.int(v.manufacturer, width: 4)) \(Hex.int(v.lmpSubversion, width: 4))",
                     "address \(publicAddress)",
                     "commands \(Hex.string(supportedCommands, separator: ""))",
                     "le-features \(Hex.int(leFeatures, width: 16))",
                     "acl \(aclBuffers.aclLength) \(aclBuffers.aclPackets)"]
        if let s = leStates { lines.append("le-states \(Hex.int(s.rawValue, width: 16))") }
        return lines.joined(separator: "\n") + "\n"
    }

    /// Parses `text`; nil for anything else (a damaged file is read again from the controller).
    public init?(text: String) {
        let lines = text.split(separator: "\n").map { $0.split(separator: " ").map(String.init) }
        guard lines.first == ["attled-controller", "1"] else { return nil }
        var version: LocalVersion?, address: BDAddress?, commands: [UInt8]?, le: UInt64?, acl: BufferSize?, states: LEStates?
        for f in lines.dropFirst() {
            switch (f.first, f.count) {
            case ("version", 6):
                guard let a = UInt8(f[1], radix: 16), let b = UInt16(f[2], radix: 16), let c = UInt8(f[3], radix: 16),
                      let d = UInt16(f[4], radix: 16), let e = UInt16(f[5], radix: 16) else { return nil }
                version = LocalVersion(hciVersion: a, hciRevision: b, lmpVersion: c, manufacturer: d, lmpSubversion: e)
            case ("address", 2): address = BDAddress(f[1])
            case ("commands", 2): commands = Hex.parse(f[1])
            case ("le-features", 2): le = UInt64(f[1], radix: 16)
            case ("acl", 3):
                guard let l = UInt16(f[1]), let n = UInt16(f[2]), l > 0, n > 0 else { return nil }
                acl = BufferSize(aclLength: l, aclPackets: n)
            case ("le-states", 2):
                guard let s = UInt64(f[1], radix: 16) else { return nil }
                states = LEStates(rawValue: s)
            default: return nil
            }
        }
        guard let version, let address, let commands, commands.count == 64, let le, let acl else { return nil }
        self.init(version: version, publicAddress: address, supportedCommands: commands, leFeatures: le, aclBuffers: acl, leStates: states)
    }
}

/// Where the initialisation finds what it knows of a controller from
/// earlier runs, and keeps what it learns: the controller's description
/// and, for one without an address of its own, the host's static random
/// address. Asked once Read Local Version Information and Read BD_ADDR
/// have answered, so it can tell one controller from another.
public protocol ControllerMemory: AnyObject {
    /// What was remembered of the controller that answered `version` and
    /// `publicAddress` (nil: read it all). The memory may pick its identity here.
    func recall(version: LocalVersion?, publicAddress: BDAddress) -> ControllerDescription?
    /// Keeps what was read (the memory may fail silently: nothing depends on it).
    func remember(_ description: ControllerDescription)
    /// The kept static random address, for a controller with no public or
    /// static address of its own (made and kept on the first call); nil: none could be kept.
    func staticAddress() -> BDAddress?
}
