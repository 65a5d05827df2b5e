import Testing
@testable import BLEWire
@testable import BLETransport
@testable import BLEHCI
@testable import BLEGAP
@testable import Attled
@testable import AttledLED
@testable import AttledCLI

/// The HCI commands of a whole one-shot job (`attled --name Lamp1 --rgb
/// 1,2,3`: Session, TargetRunner, the keeper) on a scripted controller with a
/// scripted pycom lamp: what a controller met for the first time is sent,
/// then what one whose description is remembered is sent. Each command on a
/// slow controller costs ~45 ms (Root Canal), so the list is the job's
/// critical path; the integration test counts the same from Root Canal's own
/// record (test_led.py).
@Suite("A one-shot job: the HCI commands it sends, cold and warm")
struct ColdJobTests {
    /// The job on a fresh scripted controller; its commands' opcodes.
    static func job(stateDir: String) throws -> [UInt16] {
        let ctl = HCIHostInitTests.controller(bdaddr: "00 00 00 00 00 00")
        // Lists nothing optional: no extended scanning, no accept list, no LE states.
        ctl.expect(h4("01 02 10 00"), reply: [Ev.complete(HCI.ReadLocalSupportedCommands.opcode, [UInt8](repeating: 0, count: 65))])
        ctl.autoCompleteACL = true
        ctl.when(command: LEScanParameters.opcode, reply: [Ev.complete(LEScanParameters.opcode)])
        ctl.when(command: HCI.LESetScanEnable.opcode, reply: [Ev.complete(HCI.LESetScanEnable.opcode), KeeperTests.report(KeeperTests.lamp, "Lamp1")], once: true)
        ctl.when(command: HCI.LESetScanEnable.opcode, reply: [Ev.complete(HCI.LESetScanEnable.opcode)])
        ctl.when(command: LECreateConnection.opcode, reply: [Ev.status(LECreateConnection.opcode), KeeperTests.connected(KeeperTests.lamp, handle: 1)])
        ctl.when(command: HCI.Disconnect.opcode, reply: [Ev.status(HCI.Disconnect.opcode), Ev.disconnected(handle: 1, reason: 0x16)])
        let server = ScriptedGATTServer.pycom(0, 0, 0)
        ctl.respond = { server.answer($0) }
        let s = Session(try Options.parse(["--name", "Lamp1", "--rgb", "1,2,3", "--no-cache"]),
                        environment: ["XDG_STATE_HOME": stateDir, "XDG_CACHE_HOME": stateDir])
        try s.makeStack(ctl)
        s.stack?.host.interruptible = false
        try TargetRunner(s).run()
        s.cleanup()
        #expect(server.value(0x0003) == [1] && server.value(0x0005) == [2] && server.value(0x0007) == [3], "the lamp was set")
        #expect(ctl.unexpected.isEmpty, "unanswered: \(ctl.unexpected.map { Hex.string($0.h4) })")
        return ctl.sentOpcodes
    }

    @Test("cold: Reset, the version and address, the description (commands, LE features, buffers), the event masks, the random address, one scan, one connect, Disconnect: nothing else (no data length, no PHY, no scan restarted); warm: the description is not read again")
    func coldThenWarm() throws {
        let dir = try GATTCacheTests.tempDirectory()
        defer { GATTCacheTests.removeAll(dir) }
        let run: [UInt16] = [0x200B, 0x200C, 0x200C, 0x200D, 0x0406]  // scan params, enable, disable, connect, disconnect
        let cold = try Self.job(stateDir: dir)
        #expect(cold == [0x0C03, 0x1001, 0x1009, 0x1002, 0x2003, 0x2002, 0x0C01, 0x2001, 0x2005] + run,
                "\(cold.map { Hex.int($0, width: 4) })")
        let warm = try Self.job(stateDir: dir)
        #expect(warm == [0x0C03, 0x1001, 0x1009, 0x0C01, 0x2001, 0x2005] + run, "\(warm.map { Hex.int($0, width: 4) })")
    }
}
