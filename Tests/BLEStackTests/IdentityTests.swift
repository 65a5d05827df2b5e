#if canImport(Glibc)
import Glibc
#endif
import Testing
@testable import BLEWire
@testable import BLEHCI
@testable import Attled

/// Our own identity across runs, and bonds found however the device shows up
/// (issue: every controller, bonds that last).
@Suite("Own identity and bond lookup")
struct IdentityTests {
    /// A fresh directory (the bond store tests' helper).
    func tempDir() -> String { BondStoreTests().tempDir() }

    /// Our identity for a controller known by `key`, under the state directory `dir`.
    static func identity(_ dir: String, key: String = "tcp:127.0.0.1:9000") -> ControllerIdentity {
        ControllerIdentity(identities: Identities(root: dir), controllerKey: key)
    }

    /// The initialisation script of HCIHostInitTests with a version reply of our choosing.
    static func controller(bdaddr: String = "00 00 00 00 00 00", version: String = "00 0c 34 12 0c 5f 00 78 56") -> ScriptedController {
        HCIHostInitTests.controller(bdaddr: bdaddr, version: version)
    }

    func setRandomAddress(_ ctl: ScriptedController) throws -> [UInt8] {
        let sent = try ctl.sent.map { try HCICommand.decode($0.bytes) }
        return try #require(sent.last { $0.opcode == HCI.LESetRandomAddress.opcode }).parameters
    }

    @Test("with no public address, two stacks on one state directory use the same static random address, kept 0600")
    func sameAddressAcrossRuns() throws {
        let dir = tempDir() + "/state"
        let first = Self.controller()
        let a = try BLEStack(transport: first, identity: Self.identity(dir))
        // The next run, once the first has let its identity go.
        a.identity?.release()
        let second = Self.controller()
        let b = try BLEStack(transport: second, identity: Self.identity(dir))
        #expect(a.info.ownAddress == b.info.ownAddress)
        #expect(a.info.ownAddress.type == .random && a.info.ownAddress.address.randomAddressKind == .static)
        #expect(a.info.ownAddressSource == .stored && b.info.ownAddressSource == .stored)
        #expect(try setRandomAddress(first) == setRandomAddress(second))
        var st = stat()
        #expect(stat(dir + "/local-address", &st) == 0 && st.st_mode & 0o777 == 0o600)
        // Without a store every run makes its own (the old behaviour, for library users who want it).
        let third = try BLEStack(transport: Self.controller())
        #expect(third.info.ownAddressSource == .generated && third.info.ownAddress != a.info.ownAddress)
    }

    @Test("a damaged local-address file is replaced by a new static address, then kept")
    func damagedAddressFile() throws {
        let dir = tempDir()
        let fd = open(dir + "/local-address", O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        _ = SystemIO.writeAll(fd, Array("11:22:33:44:55:66\n".utf8)) // not static (top bits 00)
        close(fd)
        let store = BondStore(directory: dir)
        let a = try #require(store.localStaticAddress(make: HCIHost.makeStaticRandomAddress))
        #expect(a.randomAddressKind == .static)
        #expect(store.localStaticAddress(make: { Issue.record("made again"); return a }) == a)
    }

    @Test("--own-address wins over the controller's public address and the stored one")
    func givenAddressWins() throws {
        let ctl = Self.controller(bdaddr: "55 44 33 22 11 c0")
        let st = try BLEStack(transport: ctl, ownAddress: BDAddress("C1:02:03:04:05:06")!, identity: Self.identity(tempDir()))
        #expect(st.info.ownAddress == DeviceAddress(BDAddress("C1:02:03:04:05:06")!, .random))
        #expect(st.info.ownAddressSource == .given)
        #expect(try setRandomAddress(ctl) == [0x06, 0x05, 0x04, 0x03, 0x02, 0xC1])
    }

    @Test("a controller with a public address keeps using it and stores nothing")
    func publicAddressKept() throws {
        let dir = tempDir()
        let ctl = Self.controller(bdaddr: "55 44 33 22 11 c0")
        let st = try BLEStack(transport: ctl, identity: Self.identity(dir))
        #expect(st.info.ownAddress == DeviceAddress(BDAddress("C0:11:22:33:44:55")!, .public))
        #expect(!ctl.sentOpcodes.contains(0x2005))
        #expect(access(dir + "/local-address", F_OK) != 0)
    }

    @Test("a Zephyr controller's own static address (vendor Read Static Addresses) is used; other controllers get no vendor command")
    func zephyrStaticAddress() throws {
        // Company 0x05F1 (The Linux Foundation): Zephyr's controller.
        let ctl = Self.controller(version: "00 0c 34 12 0c f1 05 78 56")
        // Zephyr Read Supported Commands: octet 1 bit 0 (command bit 8) is Read Static Addresses.
        ctl.when(h4("01 02 fc 00"), reply: [Ev.complete(HCIOpcode(rawValue: 0xFC02), [0x00, 0x07, 0x01] + [UInt8](repeating: 0, count: 62))])
        // One address, C7:66:55:44:33:22, with its 16-byte IR.
        ctl.when(h4("01 09 fc 00"), reply: [Ev.complete(HCIOpcode(rawValue: 0xFC09), [0x00, 0x01] + hex("22 33 44 55 66 c7") + [UInt8](repeating: 0xAB, count: 16))])
        let dir = tempDir()
        let st = try BLEStack(transport: ctl, identity: Self.identity(dir))
        #expect(st.info.ownAddress == DeviceAddress(BDAddress("C7:66:55:44:33:22")!, .random))
        #expect(st.info.ownAddressSource == .controllerStatic)
        #expect(try setRandomAddress(ctl) == hex("22 33 44 55 66 c7"))
        #expect(access(dir + "/local-address", F_OK) != 0)
        #expect(ctl.unexpected.isEmpty)

        // The same script without the Linux Foundation's company id: no vendor command at all.
        let other = Self.controller()
        _ = try BLEStack(transport: other, identity: Self.identity(tempDir()))
        #expect(!other.sentOpcodes.contains(0xFC02) && !other.sentOpcodes.contains(0xFC09))
    }

    @Test("a Zephyr controller that does not list Read Static Addresses falls back to the stored address")
    func zephyrWithoutStaticAddresses() throws {
        let ctl = Self.controller(version: "00 0c 34 12 0c f1 05 78 56")
        ctl.when(h4("01 02 fc 00"), reply: [Ev.complete(HCIOpcode(rawValue: 0xFC02), [0x00, 0x07, 0x00] + [UInt8](repeating: 0, count: 62))])
        let st = try BLEStack(transport: ctl, identity: Self.identity(tempDir()))
        #expect(st.info.ownAddressSource == .stored)
        #expect(!ctl.sentOpcodes.contains(0xFC09))
    }

    // MARK: bonds

    static let ltk = BondStoreTests.ltk
    static let publicID = DeviceAddress(BDAddress("DA:4C:10:DE:17:01")!, .public)
    static let advertisedFrom = DeviceAddress(BDAddress("C5:11:22:33:44:55")!, .random)

    @Test("a bond is found by identity, by the address the device paired from, and by IRK")
    func lookups() throws {
        let store = BondStore(directory: tempDir())
        // The device advertised from a static random address and distributed its public address (Root Canal's Bumble peers do).
        let b = Bond(identity: Self.publicID, longTermKey: Self.ltk, irk: BondStoreTests.irk, lastAddress: Self.advertisedFrom)
        try store.save(b)
        #expect(store.bond(for: Self.publicID) == b)
        #expect(store.bond(for: Self.advertisedFrom) == b)
        // The same bytes as a public address are another device.
        #expect(store.bond(for: DeviceAddress(Self.advertisedFrom.address, .public)) == nil)
        #expect(store.bond(for: DeviceAddress(BDAddress("C5:11:22:33:44:56")!, .random)) == nil)
        let prand: [UInt8] = [0x01, 0x02, 0x43]
        let rpa = DeviceAddress(BDAddress(wire: try SMPCrypto.ah(irk: BondStoreTests.irk.bytes, prand: prand) + prand), .random)
        #expect(store.bond(for: rpa) == b)
    }

    @Test("removing a refused bond removes that bond only")
    func removeOnlyThatBond() throws {
        let store = BondStore(directory: tempDir())
        let refused = Bond(identity: Self.publicID, longTermKey: Self.ltk, irk: nil, lastAddress: Self.advertisedFrom)
        let otherID = DeviceAddress(BDAddress("DA:4C:10:DE:17:02")!, .public)
        let kept = Bond(identity: otherID, longTermKey: Self.ltk, irk: nil, lastAddress: DeviceAddress(BDAddress("C6:00:00:00:00:02")!, .random))
        try store.save(refused)
        try store.save(kept)
        #expect(store.remove(refused.identity) == refused)
        #expect(store.all() == [kept])
        #expect(store.bond(for: Self.advertisedFrom) == nil)
    }
}
