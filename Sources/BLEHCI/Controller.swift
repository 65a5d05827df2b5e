import BLEWire
import BLETransport

/// What the initialisation sequence learned about the controller.
public struct ControllerInfo: Sendable {
    public var version: LocalVersion?
    public var publicAddress: BDAddress = .zero
    /// The address and type attled uses as its own: the public address, or a
    /// static random address when Read BD_ADDR returned all zeros.
    public var ownAddress: DeviceAddress = DeviceAddress(.zero, .public)
    /// Where `ownAddress` came from.
    public var ownAddressSource: OwnAddressSource = .publicAddress
    public var supportedCommands: [UInt8] = []
    public var leFeatures: UInt64 = 0
    public var aclBuffers = BufferSize(aclLength: 27, aclPackets: 1)
    /// LE_States (nil: not listed, or not answered).
    public var leStates: LEStates?
    /// The commands, features, buffers and states came from a `ControllerMemory`, not from the controller.
    public var recalled = false

    /// Read Local Supported Commands bit (Core Vol 4 Part E 6.27): octet, bit.
    public func supports(octet: Int, bit: Int) -> Bool {
        octet < supportedCommands.count && supportedCommands[octet] & (1 << UInt8(bit)) != 0
    }

    /// LE Set Extended Scan Parameters and Enable listed (octet 37 bits 5 and 6).
    public var supportsExtendedScanning: Bool { supports(octet: 37, bit: 5) && supports(octet: 37, bit: 6) }
    /// LE Extended Advertising in the LE features (bit 12).
    public var hasExtendedAdvertising: Bool { leFeatures & (1 << 12) != 0 }
    /// Extended advertising usable: LE Extended Advertising in the LE features
    /// and LE Set Advertising Set Random Address, Set Extended Advertising
    /// Parameters, Data, Scan Response Data and Enable listed (octet 36 bits
    /// 1-5), and LE Remove Advertising Set (octet 37 bit 0).
    public var supportsExtendedAdvertising: Bool {
        hasExtendedAdvertising && (1...5).allSatisfy { supports(octet: 36, bit: $0) } && supports(octet: 37, bit: 0)
    }
    /// LE Read Filter Accept List Size, Clear, Add and Remove listed (octet 26 bits 6-7, octet 27 bits 0-1).
    public var supportsAcceptList: Bool {
        supports(octet: 26, bit: 6) && supports(octet: 26, bit: 7) && supports(octet: 27, bit: 0) && supports(octet: 27, bit: 1)
    }
    /// LE Read Supported States listed (octet 28 bit 3).
    public var supportsReadSupportedStates: Bool { supports(octet: 28, bit: 3) }
    /// The controller scans and initiates at once (LE_States bit 22 or 23):
    /// scanning goes on beside a pending LE Create Connection.
    public var scansWhileInitiating: Bool { leStates.map { $0.activeScanWhileInitiating || $0.passiveScanWhileInitiating } ?? false }
    /// LE Set Data Length listed (octet 33 bit 6) and LE Data Packet Length Extension in the LE features (bit 5).
    public var supportsDataLength: Bool { supports(octet: 33, bit: 6) && leFeatures & (1 << 5) != 0 }
    /// LE Set PHY listed (octet 35 bit 6) and LE 2M PHY in the LE features (bit 8).
    public var supports2MPHY: Bool { supports(octet: 35, bit: 6) && leFeatures & (1 << 8) != 0 }
}

/// Where the host's own address came from (the trace's "own address" line says it).
public enum OwnAddressSource: String, Sendable {
    /// The controller's public address (Read BD_ADDR).
    case publicAddress = "public"
    /// Given by the caller (`--own-address`).
    case given = "given"
    /// The controller's own static address (Zephyr's vendor Read Static Addresses).
    case controllerStatic = "controller's static address"
    /// The static random address kept under the state directory (made once).
    case stored = "stored identity"
    /// Made up for this run only.
    case generated = "made for this run"
}

/// Zephyr's vendor HCI commands (Zephyr include/zephyr/bluetooth/hci_vs.h),
/// sent only to a controller whose Read Local Version Information names the
/// Linux Foundation (company 0x05F1), as Zephyr's own host does.
public enum ZephyrVendor {
    /// Company identifier of Zephyr's controller (The Linux Foundation).
    public static let manufacturer: UInt16 = 0x05F1
    /// Zephyr Read Supported Commands: status, 64 octets of command bits.
    public static let readSupportedCommands = HCIOpcode(rawValue: 0xFC02)
    /// Zephyr Read Static Addresses: status, count, then per address BD_ADDR (6) and IR (16).
    public static let readStaticAddresses = HCIOpcode(rawValue: 0xFC09)

    /// Whether the vendor command bits list Read Static Addresses (bit 8: octet 1, bit 0).
    public static func listsReadStaticAddresses(_ rp: [UInt8]) -> Bool { rp.count >= 3 && rp[2] & 0x01 != 0 }

    /// The first static random address in a Read Static Addresses reply, if any.
    public static func firstStaticAddress(_ rp: [UInt8]) -> BDAddress? {
        var r = ByteReader(rp)
        guard (try? r.u8("Status")) == 0, let n = try? r.u8("Num_Addresses"), n > 0,
              let raw = try? r.bytes(6, "BD_ADDR") else { return nil }
        let a = BDAddress(wire: raw)
        return a.randomAddressKind == .static ? a : nil
    }
}

extension HCIHost {
    /// The controller initialisation sequence (PROTOCOL.md "Initialisation"):
    /// Reset, Read Local Version Information, Read BD_ADDR; then, unless
    /// `memory` remembers this controller (same version and address), Read
    /// Local Supported Commands, LE Read Local Supported Features, LE Read
    /// Buffer Size (Read Buffer Size when the LE size is 0) and LE Read
    /// Supported States (when listed); then Set Event Mask, LE Set Event Mask,
    /// and LE Set Random Address when the controller has no public address.
    /// Commands that are optional for a controller are tolerated when rejected.
    /// - Parameters:
    ///   - randomAddress: a static random address to use whatever the controller has (`--own-address`).
    ///   - memory: what earlier runs learnt of this controller, and the host's
    ///     kept static address for a controller with neither a public nor a
    ///     static address of its own; nil reads everything and makes an
    ///     address up for this run.
    /// - Throws: `HCIError` when a required command fails or times out, or the
    ///   transport fails; `WireError` when LE Read Buffer Size or Read Buffer Size
    ///   returns parameters too short to decode.
    public func initialise(randomAddress: BDAddress? = nil, memory: ControllerMemory? = nil) throws -> ControllerInfo {
        var info = ControllerInfo()
        try execute(HCI.Reset().command, timeoutMs: max(commandTimeoutMs, 3000))
        if let rp = try? execute(HCI.ReadLocalVersion().command) { info.version = try? LocalVersion.decode(rp) }
        let bd = try execute(HCI.ReadBDADDR().command)
        if bd.count >= 7 { info.publicAddress = BDAddress(wire: Array(bd[1..<7])) }
        if let known = memory?.recall(version: info.version, publicAddress: info.publicAddress),
           known.describes(version: info.version, publicAddress: info.publicAddress) {
            info.supportedCommands = known.supportedCommands
            info.leFeatures = known.leFeatures
            info.aclBuffers = known.aclBuffers
            info.leStates = known.leStates
            info.recalled = true
        } else {
            try readDescription(&info)
            if let v = info.version, info.supportedCommands.count == 64 {
                memory?.remember(ControllerDescription(version: v, publicAddress: info.publicAddress, supportedCommands: info.supportedCommands,
                                                       leFeatures: info.leFeatures, aclBuffers: info.aclBuffers, leStates: info.leStates))
            }
        }
        try execute(HCI.SetEventMask(mask: EventMasks.standard).command)
        try execute(HCI.LESetEventMask(mask: EventMasks.le).command)
        setACLBuffers(length: Int(info.aclBuffers.aclLength), packets: Int(info.aclBuffers.aclPackets))
        if let fixed = randomAddress {
            try execute(HCI.LESetRandomAddress(address: fixed).command)
            info.ownAddress = DeviceAddress(fixed, .random)
            info.ownAddressSource = .given
        } else if info.publicAddress.isZero {
            let (a, source): (BDAddress, OwnAddressSource)
            if let z = zephyrStaticAddress(info) { (a, source) = (z, .controllerStatic) }
            else if let kept = memory?.staticAddress() { (a, source) = (kept, .stored) }
            else { (a, source) = (Self.makeStaticRandomAddress(), .generated) }
            try execute(HCI.LESetRandomAddress(address: a).command)
            info.ownAddress = DeviceAddress(a, .random)
            info.ownAddressSource = source
        } else {
            info.ownAddress = DeviceAddress(info.publicAddress, .public)
        }
        return info
    }

    /// The reads a remembered description spares: the commands the
    /// controller lists, its LE features, its ACL buffers and its LE states.
    private func readDescription(_ info: inout ControllerInfo) throws {
        if let rp = try? execute(HCI.ReadLocalSupportedCommands().command), rp.count >= 65 { info.supportedCommands = Array(rp[1..<65]) }
        if let rp = try? execute(HCI.LEReadLocalSupportedFeatures().command), rp.count >= 9 {
            var r = ByteReader(Array(rp[1...])); info.leFeatures = (try? r.u64()) ?? 0
        }
        let le = try BufferSize.decodeLE(try execute(HCI.LEReadBufferSize().command))
        if le.aclLength == 0 || le.aclPackets == 0 {
            info.aclBuffers = try BufferSize.decodeBREDR(try execute(HCI.ReadBufferSize().command))
        } else {
            info.aclBuffers = le
        }
        if info.supportsReadSupportedStates, let rp = try? execute(HCI.LEReadSupportedStates().command) {
            info.leStates = try? LEStates.decode(Array(rp.dropFirst()))
        }
    }

    /// A Zephyr controller's own static address (kept in its FICR/flash, the
    /// same on every boot): Read Static Addresses, when its vendor command
    /// bits list it. Nil for any other controller (nothing is sent to it).
    private func zephyrStaticAddress(_ info: ControllerInfo) -> BDAddress? {
        guard info.version?.manufacturer == ZephyrVendor.manufacturer,
              let cmds = try? execute(HCICommand(ZephyrVendor.readSupportedCommands)),
              ZephyrVendor.listsReadStaticAddresses(cmds),
              let rp = try? execute(HCICommand(ZephyrVendor.readStaticAddresses)) else { return nil }
        return ZephyrVendor.firstStaticAddress(rp)
    }

    /// A static random address: two most significant bits 11, the rest random
    /// and neither all zeros nor all ones (Core Vol 6 Part B 1.3.2.1).
    public static func makeStaticRandomAddress() -> BDAddress {
        var g = SystemRandomNumberGenerator()
        while true {
            var b = (0..<6).map { _ in UInt8.random(in: 0...255, using: &g) }
            b[5] |= 0xC0
            let rest = b[0..<5] + [b[5] & 0x3F]
            if rest.allSatisfy({ $0 == 0 }) || (rest.allSatisfy({ $0 == 0xFF }) && b[5] & 0x3F == 0x3F) { continue }
            return BDAddress(wire: b)
        }
    }
}
