import Testing
@testable import BLEWire
@testable import BLEGATT
@testable import Attled
@testable import AttledCLI
@testable import AttledGateway
#if canImport(Glibc)
import Glibc
#endif

// The libraries say what failed in their own terms; the command line names
// the option that set it when it reports. Its lines are the ones it always
// printed (integration tests read them).
@Suite("The command line words library errors with its options")
struct CLIMessageTests {
    let identity = DeviceAddress(BDAddress("C0:11:22:33:44:55")!, .random)

    @Test("a forgotten bond the policy will not repair: the library names the rule, the command line the option and the bonds command")
    func forgottenBond() {
        let kept = SecuringError.bondForgotten(cause: "Key Missing", identity: identity, refusedBy: .keepForgottenBond)
        let never = SecuringError.bondForgotten(cause: "Key Missing", identity: identity, refusedBy: .neverPair)
        #expect(!kept.description.contains("--"))
        #expect(kept.description == "Key Missing; the security policy does not repair a forgotten bond, so the device is not paired with again (the bond of C0:11:22:33:44:55 (random) is kept)")
        #expect(classify(kept).message == "Key Missing; --no-repair forbids pairing again: run without it, or remove the bond with 'attled bonds --remove C0:11:22:33:44:55'")
        #expect(classify(never).message == "Key Missing; --no-pair forbids pairing again: run without it, or remove the bond with 'attled bonds --remove C0:11:22:33:44:55'")
        #expect(classify(kept).code == .security)
    }

    @Test("pairing needed but never allowed: the library says the policy never pairs, the command line to drop --no-pair")
    func pairingNotAllowed() {
        let e = SecuringError.pairingNotAllowed(reason: "the device needs pairing")
        #expect(e.description == "the device needs pairing; the security policy never pairs")
        #expect(classify(e).message == "the device needs pairing; drop --no-pair to pair with it")
    }

    @Test("an ambiguous UUID and a missing handle: the command line adds how to name a characteristic")
    func characteristicReferences() {
        let u = BluetoothUUID(uint16: 0x2A19)
        let e = GATTError.ambiguous(u, candidates: [.init(handle: 0x0012, service: BluetoothUUID(uint16: 0x180F)),
                                                    .init(handle: 0x0022, service: BluetoothUUID(uint16: 0x1810))])
        #expect(!e.description.contains("--"))
        #expect(classify(e).message == e.description + "; name one by handle (--char 0xHHHH) or narrow with --service UUID")
        #expect(classify(GATTError.noSuchHandle(0x0042)).message == "no characteristic has value handle 0x0042 (see 'attled gatt' for the handles)")
        #expect(classify(e).code == .notFound)
    }

    #if ATTLED_GATEWAY
    @Test("an unreadable MQTT password file: the library names the file, the command line the option")
    func passwordFile() {
        let e = GatewayError.passwordFileUnreadable(path: "/run/pw", errno: ENOENT)
        #expect(e.description == "cannot read the MQTT password file /run/pw: No such file or directory")
        #expect(GatewayRun.message(e) == "cannot read --mqtt-password-file /run/pw: No such file or directory")
    }
    #endif

    @Test("a library report's lines carry only its own prefix; the command line's console starts its lines with \"attled: \"")
    func reportPrefix() {
        var lines: [String] = []
        let plain = Report(prefix: "Lamp1: ", quiet: false)
        plain.output = { lines.append($0) }
        plain.progress("connected")
        #expect(lines == ["Lamp1: connected"])
        #expect(CLIConsole.prefix == "attled: ")
    }
}
