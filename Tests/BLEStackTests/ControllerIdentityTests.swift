#if canImport(Glibc)
import Glibc
#endif
import Testing
@testable import BLEWire
@testable import BLETransport
@testable import BLEHCI
@testable import Attled

/// One identity per controller under one state directory, its lock, and the
/// controller's description remembered there (issue 28).
@Suite("Identity per controller")
struct ControllerIdentityTests {
    func tempDir() -> String { BondStoreTests().tempDir() }

    static func controller(bdaddr: String = "00 00 00 00 00 00", version: String = "00 0c 34 12 0c 5f 00 78 56") -> ScriptedController {
        HCIHostInitTests.controller(bdaddr: bdaddr, version: version)
    }

    static func identity(_ dir: String, _ key: String) -> ControllerIdentity {
        ControllerIdentity(identities: Identities(root: dir), controllerKey: key)
    }

    @Test("two controllers without public addresses, one state directory: two static addresses, two identities in the index")
    func twoControllersTwoAddresses() throws {
        let dir = tempDir()
        let a = try BLEStack(transport: Self.controller(), identity: Self.identity(dir, "tcp:127.0.0.1:1000"))
        let b = try BLEStack(transport: Self.controller(), identity: Self.identity(dir, "tcp:127.0.0.1:2000"))
        #expect(a.info.ownAddressSource == .stored && b.info.ownAddressSource == .stored)
        #expect(a.info.ownAddress != b.info.ownAddress)
        let entries = Identities(root: dir).entries()
        #expect(entries == [Identities.Entry(folder: ".", key: "tcp:127.0.0.1:1000"), Identities.Entry(folder: "id-2", key: "tcp:127.0.0.1:2000")])
        #expect(a.bonds?.directory == dir && b.bonds?.directory == dir + "/id-2")
        #expect(b.bonds?.keptStaticAddress() == b.info.ownAddress.address)
    }

    @Test("one controller twice at once: the second process finds the identity locked and takes its own; later runs take the first again")
    func lockedIdentity() throws {
        let dir = tempDir()
        let first = Self.identity(dir, "tcp:127.0.0.1:1000")
        let a = try BLEStack(transport: Self.controller(), identity: first)
        let second = Self.identity(dir, "tcp:127.0.0.1:1000")
        let b = try BLEStack(transport: Self.controller(), identity: second)
        #expect(a.info.ownAddress != b.info.ownAddress)
        #expect(first.entry?.folder == "." && second.entry?.folder == "id-2")
        // Both keyed by the same controller; both now free again.
        first.release(); second.release()
        let c = try BLEStack(transport: Self.controller(), identity: Self.identity(dir, "tcp:127.0.0.1:1000"))
        #expect(c.info.ownAddress == a.info.ownAddress)
        #expect(Identities(root: dir).entries().count == 2)
    }

    @Test("a controller opened again by the same process keeps its identity (its own lock does not stop it)")
    func reopenedKeepsIdentity() throws {
        let dir = tempDir()
        let id = Self.identity(dir, "hci0")
        let a = try BLEStack(transport: Self.controller(), identity: id)
        let b = try BLEStack(transport: Self.controller(), identity: id)
        #expect(a.info.ownAddress == b.info.ownAddress && id.entry?.folder == ".")
    }

    @Test("the state directory from before identities were kept becomes the first controller's: its address and bonds stay")
    func legacyStateIsTheFirstIdentity() throws {
        let dir = tempDir()
        let old = BondStore(directory: dir)
        let kept = try #require(old.localStaticAddress(make: HCIHost.makeStaticRandomAddress))
        let bond = Bond(identity: DeviceAddress(BDAddress("C0:11:22:33:44:55")!, .random), longTermKey: BondStoreTests.ltk, irk: nil,
                        lastAddress: DeviceAddress(BDAddress("C0:11:22:33:44:55")!, .random))
        try old.save(bond)
        let st = try BLEStack(transport: Self.controller(), identity: Self.identity(dir, "bus:pci0000:00/usb1/1-1/1-1:1.0"))
        #expect(st.info.ownAddress == DeviceAddress(kept, .random))
        #expect(st.bonds?.bond(for: bond.identity) == bond)
        let other = try BLEStack(transport: Self.controller(), identity: Self.identity(dir, "hci1"))
        #expect(other.info.ownAddress.address != kept && other.bonds?.bond(for: bond.identity) == nil)
    }

    @Test("controllers with public addresses are told apart by them, whatever transport reaches them")
    func publicAddressesAreIdentities() throws {
        let dir = tempDir()
        let a = try BLEStack(transport: Self.controller(bdaddr: "01 17 de 10 4c da"), identity: Self.identity(dir, "tcp:127.0.0.1:1000"))
        a.identity?.release()
        let b = try BLEStack(transport: Self.controller(bdaddr: "01 17 de 10 4c da"), identity: Self.identity(dir, "tcp:127.0.0.1:2000"))
        #expect(a.bonds?.directory == b.bonds?.directory)
        #expect(Identities(root: dir).entries() == [Identities.Entry(folder: ".", key: "public DA:4C:10:DE:17:01")])
    }

    // MARK: the controller's description

    @Test("the second initialisation of a controller sends Reset, Read Local Version, Read BD_ADDR and the event masks only")
    func descriptionRemembered() throws {
        let dir = tempDir()
        let first = Self.controller(bdaddr: "01 17 de 10 4c da")
        let a = try BLEStack(transport: first, identity: Self.identity(dir, "tcp:x"))
        #expect(first.sentOpcodes == [0x0C03, 0x1001, 0x1009, 0x1002, 0x2003, 0x2002, 0x0C01, 0x2001])
        #expect(!a.info.recalled)
        a.identity?.release()
        let second = Self.controller(bdaddr: "01 17 de 10 4c da")
        let b = try BLEStack(transport: second, identity: Self.identity(dir, "tcp:x"))
        #expect(second.sentOpcodes == [0x0C03, 0x1001, 0x1009, 0x0C01, 0x2001])
        #expect(b.info.recalled)
        #expect(b.info.supportedCommands == a.info.supportedCommands && b.info.leFeatures == a.info.leFeatures)
        #expect(b.info.aclBuffers == a.info.aclBuffers && b.host.aclTotalPackets == a.host.aclTotalPackets)
        #expect(second.unexpected.isEmpty)
    }

    @Test("another firmware (a different Read Local Version) is read again in full, and remembered anew")
    func newFirmwareReadAgain() throws {
        let dir = tempDir()
        let a = try BLEStack(transport: Self.controller(bdaddr: "01 17 de 10 4c da"), identity: Self.identity(dir, "tcp:x"))
        a.identity?.release()
        let updated = Self.controller(bdaddr: "01 17 de 10 4c da", version: "00 0d 35 12 0d 5f 00 79 56")
        let b = try BLEStack(transport: updated, identity: Self.identity(dir, "tcp:x"))
        #expect(!b.info.recalled && updated.sentOpcodes.contains(0x1002))
        b.identity?.release()
        let again = Self.controller(bdaddr: "01 17 de 10 4c da", version: "00 0d 35 12 0d 5f 00 79 56")
        let c = try BLEStack(transport: again, identity: Self.identity(dir, "tcp:x"))
        #expect(c.info.recalled && !again.sentOpcodes.contains(0x1002))
    }

    @Test("a description round-trips through its text; damaged text is not trusted", arguments: [
        "", "attled-controller 2\n", "attled-controller 1\nversion 0c\n", "attled-controller 1\nacl 0 0\n", "attled-controller 1\nbogus 1\n",
    ])
    func descriptionText(_ damaged: String) {
        let d = ControllerDescription(version: LocalVersion(hciVersion: 12, hciRevision: 0x1234, lmpVersion: 12, manufacturer: 0x5f, lmpSubversion: 0x5678),
                                      publicAddress: BDAddress("DA:4C:10:DE:17:01")!, supportedCommands: (0..<64).map { UInt8($0) },
                                      leFeatures: 0x1234_5678_9abc_def0, aclBuffers: BufferSize(aclLength: 251, aclPackets: 8),
                                      leStates: LEStates(rawValue: 0x3ff_ffff_ffff))
        #expect(ControllerDescription(text: d.text) == d)
        var none = d; none.leStates = nil
        #expect(ControllerDescription(text: none.text) == none)
        #expect(ControllerDescription(text: damaged) == nil)
    }

    // MARK: the controller's key

    @Test("hciN's key: the USB serial number when the kernel shows one, else its bus path, else the index; stream transports: the spec")
    func controllerKeys() throws {
        let sys = tempDir()
        func mk(_ p: String) { _ = mkdir(p, 0o755) }
        func write(_ p: String, _ text: String) {
            let fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0o644); _ = SystemIO.writeAll(fd, Array(text.utf8)); close(fd)
        }
        for p in ["/class", "/class/bluetooth", "/devices", "/devices/usb1", "/devices/usb1/1-1", "/devices/usb1/1-1/1-1:1.0",
                  "/devices/platform", "/devices/platform/uart0"] { mk(sys + p) }
        write(sys + "/devices/usb1/1-1/serial", "00E04C239987\n")
        write(sys + "/devices/usb1/1-1/idVendor", "0bda\n")
        write(sys + "/devices/usb1/1-1/idProduct", "8771\n")
        mk(sys + "/class/bluetooth/hci0"); symlink(sys + "/devices/usb1/1-1/1-1:1.0", sys + "/class/bluetooth/hci0/device")
        mk(sys + "/class/bluetooth/hci1"); symlink(sys + "/devices/platform/uart0", sys + "/class/bluetooth/hci1/device")
        #expect(TransportSpec.userChannel(index: 0).controllerKey(sysfs: sys) == "usb:0bda:8771:00E04C239987")
        #expect(TransportSpec.userChannel(index: 1).controllerKey(sysfs: sys) == "bus:platform/uart0")
        #expect(TransportSpec.userChannel(index: 2).controllerKey(sysfs: sys) == "hci2")
        #expect(TransportSpec.tcp(host: "127.0.0.1", port: 9000).controllerKey(sysfs: sys) == "tcp:127.0.0.1:9000")
        #expect(TransportSpec.serial(path: "/dev/ttyACM0", baud: 1_000_000, rtscts: true).controllerKey(sysfs: sys) == "serial:/dev/ttyACM0,1000000,rtscts")
    }
}
