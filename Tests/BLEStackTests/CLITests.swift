#if canImport(Glibc)
import Glibc
#endif
import Testing
@testable import BLEWire
@testable import BLETransport
@testable import BLEHCI
@testable import BLEGAP
@testable import BLEATT
@testable import BLEGATT
@testable import LEDProfile
@testable import AttledCLI
@testable import AttledLED

private func parse(_ line: String, env: [String: String] = [:]) throws -> Options {
    try Options.parse(line.split(separator: " ").map(String.init), environment: env)
}

/// The fields of Options that parsing sets, for comparing two parses.
private func summary(_ o: Options) -> String {
    "\(o.command) \(String(describing: o.transport)) \(String(describing: o.name)) \(String(describing: o.service)) \(String(describing: o.address)) "
        + "\(String(describing: o.led.rgb)) \(String(describing: o.value)) \(String(describing: o.characteristic)) \(String(describing: o.count)) "
        + "\(o.passive) \(o.json) \(o.quiet) \(o.trace) \(String(describing: o.timeoutMs)) \(o.files) \(String(describing: o.filter))"
}

@Suite("CLI options")
struct OptionsTests {
    @Test("--name CassarTech --rgb 255,0,0 sets the colour on the named device")
    func nameAndColour() throws {
        let o = try parse("--name CassarTech --rgb 255,0,0")
        #expect(o.command == .set)
        #expect(o.name == "CassarTech")
        #expect(o.led.rgb == RGB(255, 0, 0))
        #expect(o.transport == nil)
    }

    @Test("options before and after the subcommand mean the same", arguments: [
        ("--name X get", "get --name X"),
        ("-i hci1 --json scan --passive", "scan -i hci1 --passive --json"),
        ("--value 0103 send --name LED", "send --name LED --value 0103"),
        ("--filter att decode cap.btsnoop", "decode cap.btsnoop --filter att"),
    ])
    func optionOrder(a: String, b: String) throws {
        let x = try parse(a), y = try parse(b)
        #expect(summary(x) == summary(y))
        #expect(x.command != .set)
    }

    @Test("-i hci0 and --transport=SPEC select the transport")
    func transport() throws {
        #expect(try parse("-i hci0 --rgb red").transport == .userChannel(index: 0))
        #expect(try parse("--transport=tcp:127.0.0.1:9000 --rgb red").transport == .tcp(host: "127.0.0.1", port: 9000))
        #expect(try parse("--device unix:/tmp/x --rgb red").transport == .unix(path: "/tmp/x"))
    }

    @Test("ATTLED_TRANSPORT from the environment is used unless -i is given")
    func environment() throws {
        let env = ["ATTLED_TRANSPORT": "serial:/dev/ttyACM0,921600,rtscts"]
        #expect(try parse("--rgb red", env: env).transport == .serial(path: "/dev/ttyACM0", baud: 921600, rtscts: true))
        #expect(try parse("-i hci2 --rgb red", env: env).transport == .userChannel(index: 2))
        #expect(try parse("--rgb red", env: ["ATTLED_TRANSPORT": ""]).transport == nil)
        #expect(throws: UsageError.self) { try parse("--rgb red", env: ["ATTLED_TRANSPORT": "bogus"]) }
        // Fails when nothing is thrown, or something other than a UsageError naming the variable.
        // (Caught by hand: Swift 6.0's Testing does not return the error from #expect(throws:).)
        var e: UsageError?
        do { _ = try parse("--rgb red", env: ["ATTLED_TRANSPORT": "tcp:h:0"]) } catch let u as UsageError { e = u } catch {}
        #expect(e?.message.hasPrefix("ATTLED_TRANSPORT: ") == true)
    }

    @Test("every option with a value", arguments: [""])
    func allOptions(_: String) throws {
        let o = try parse("listen --address C0:11:22:33:44:55,public --char red --count 3 --quiet --trace=hex --btsnoop /tmp/c.btsnoop --timeout 2.5 --connect-timeout 700 --att-timeout 900 --extended --profile pycom")
        #expect(o.command == .listen)
        #expect(o.address == DeviceAddress(BDAddress("C0:11:22:33:44:55")!, .public))
        #expect(o.characteristic == .colour(0))
        #expect(o.count == 3)
        #expect(o.quiet)
        #expect(o.trace == .hex)
        #expect(o.btsnoop == "/tmp/c.btsnoop")
        #expect(o.timeoutMs == 2500)
        #expect(o.connectTimeoutMs == 700)
        #expect(o.attTimeoutMs == 900)
        #expect(o.extendedScan)
        #expect(o.led.profile == .pycom)
        #expect(try parse("get --address C0:11:22:33:44:55").address?.type == .random)
        #expect(try parse("get --trace").trace == .decoded)
        #expect(try parse("send --value 0x0103").value == hex("01 03"))
        let cache = try parse("--no-cache --trust-cache --rgb red")
        #expect(cache.noCache && cache.trustCache)
    }

    @Test("custom RGB characteristics make an explicit profile")
    func customProfile() throws {
        let o = try parse("--service b4250400-fb4b-4746-b2b0-93f0e61122c6 --red 2a01 --green 2a02 --blue 2a03 --rgb 1,2,3")
        let p = try #require(o.explicitProfile)
        #expect(p.name == "custom")
        #expect(p.service == BluetoothUUID("b4250400-fb4b-4746-b2b0-93f0e61122c6"))
        #expect(p.requiredCharacteristics == [BluetoothUUID(uint16: 0x2A01), BluetoothUUID(uint16: 0x2A02), BluetoothUUID(uint16: 0x2A03)])
        #expect(try parse("--profile particle --rgb red").explicitProfile == .particle)
        #expect(try parse("--rgb red").explicitProfile == nil)
    }

    @Test("help and version stop parsing and need nothing else")
    func helpVersion() throws {
        #expect(try parse("-h").command == .help)
        #expect(try parse("get --name X --help").command == .help)
        #expect(try parse("--help --rgb 300").command == .help)
        #expect(try parse("help").command == .help)
        #expect(try parse("--version").command == .version)
    }

    @Test("usage errors throw UsageError", arguments: [
        "--rgb 300,0,0", "--bogus", "--red 2a01 --service 1800 --rgb red", "--red 2a01 --green 2a02 --rgb red",
        "--red 2a01 --green 2a02 --blue 2a03 --rgb red", "--profile pycom --red 2a01 --green 2a02 --blue 2a03 --service 1800 --rgb red",
        "send", "send --value", "send --value zz", "--name", "-i bogus --rgb red", "-i tcp:h:0 --rgb red", "get --rgb red", "",
        "decode", "decode a b", "decode a --filter xyz", "listen --count 0", "listen --count x", "get --timeout -1", "get --timeout x",
        "get --trace=foo", "get --address bad", "get --address C0:11:22:33:44:55,weird", "get --address C0:11:22:33:44:55,public,x",
        "get --profile x", "get foo", "--profile harness --rgb red", "get --service nonsense", "scan scan", "--name= --rgb red",
    ])
    func usageErrors(line: String) {
        #expect(throws: UsageError.self) { try parse(line) }
    }

    @Test("--char takes a handle, a 16- or 128-bit UUID, or a colour")
    func charForms() throws {
        #expect(try CharacteristicRef.parse("0x002a") == .handle(0x002a))
        #expect(try CharacteristicRef.parse("0X00FF") == .handle(0x00ff))
        // One to four digits, as gatttool reads a handle.
        #expect(try CharacteristicRef.parse("0x10") == .handle(0x0010))
        #expect(try CharacteristicRef.parse("0x2a") == .handle(0x002a))
        #expect(try CharacteristicRef.parse("0xf") == .handle(0x000f))
        #expect(try CharacteristicRef.parse("2a37") == .uuid(BluetoothUUID(uint16: 0x2a37)))
        #expect(try CharacteristicRef.parse("12345678-1234-1234-1234-123456789abc") == .uuid(BluetoothUUID("12345678-1234-1234-1234-123456789abc")!))
        #expect(try CharacteristicRef.parse("Blue") == .colour(2))
        for bad in ["0x0000", "0x0", "0x12345", "0x+1", "0x 1", "xyz", "", "0x"] {
            #expect(throws: UsageError.self) { try CharacteristicRef.parse(bad) }
        }
        #expect(CharacteristicRef.handle(0x2a).isGeneric && CharacteristicRef.uuid(BluetoothUUID(uint16: 0x2a37)).isGeneric)
        #expect(!CharacteristicRef.colour(1).isGeneric)
    }

    @Test("read, write and listen --char work on any GATT server; gatt --values")
    func genericCommands() throws {
        let r = try parse("read --name Hr --char 2a37 --service 180d")
        #expect(r.command == .read && r.isGeneric && r.characteristic == .uuid(BluetoothUUID(uint16: 0x2a37)))
        // --service is the GATT service here, not an advertising filter.
        #expect(r.scanService == nil)
        let w = try parse("write --address C0:11:22:33:44:55 --char 0x0010 --value 0102 --without-response")
        #expect(w.command == .write && w.value == [1, 2] && w.gattTool.withoutResponse && w.characteristic == .handle(0x10))
        #expect(try parse("listen --name X --char 0x0012").isGeneric)
        #expect(try !parse("listen --name X --char red").isGeneric)
        #expect(try parse("gatt --name X --values").gattTool.values)
        #expect(try parse("get --name X --service 180d").scanService == BluetoothUUID(uint16: 0x180d))
    }

    @Test("generic commands refuse what does not apply", arguments: [
        "read --name X", "read --name X --char red", "write --name X --char 0x0010", "write --name X --value 01",
        "write --name X --char red --value 01", "read --name X --char 0x0010 --without-response", "get --name X --values",
        "read --name X --name Y --char 0x0010", "gatt --name X --name Y", "write --name X --char 0x0000 --value 01",
    ])
    func genericUsage(line: String) {
        #expect(throws: UsageError.self) { try parse(line) }
    }

    @Test("gateway: --mqtt HOST[:PORT] and its options")
    func gatewayOptions() throws {
        let g = try parse("gateway --mqtt broker.lan:8883 --mqtt-user u --mqtt-password-file /run/pw --mqtt-tls-ca /etc/ca.pem --topic-prefix home --discovery-prefix ha --gateway-id gw2 --max-links 3 --name Lamp1")
        #expect(g.command == .gateway && g.gateway.mqttHost == "broker.lan" && g.gateway.mqttPort == 8883)
        #expect(g.gateway.mqttUser == "u" && g.gateway.mqttPasswordFile == "/run/pw" && g.gateway.mqttTLSCA == "/etc/ca.pem")
        #expect(g.gateway.topicPrefix == "home" && g.gateway.discoveryPrefix == "ha" && g.gateway.gatewayID == "gw2" && g.gateway.maxLinks == 3 && g.names == ["Lamp1"])
        let d = try parse("gateway --mqtt 127.0.0.1")
        #expect(d.gateway.mqttPort == 1883 && d.gateway.topicPrefix == "attled" && d.gateway.discoveryPrefix == "homeassistant" && d.gateway.maxLinks == nil)
        #expect(try parse("gateway --mqtt [::1]:1884").gateway.mqttHost == "::1")
    }

    @Test("gateway options are refused where they do not apply", arguments: [
        "gateway", "gateway --mqtt", "gateway --mqtt host:0", "gateway --mqtt host:x", "gateway --mqtt :1883",
        "--rgb red --mqtt host", "get --max-links 2", "gateway --mqtt h --mqtt-password-file /pw", "gateway --mqtt h --max-links 0",
    ])
    func gatewayUsage(line: String) {
        #expect(throws: UsageError.self) { try parse(line) }
    }

    @Test("pairing options: --pair, --no-pair, --no-repair, --trace=keys, bonds --remove")
    func pairingOptions() throws {
        #expect(try parse("--rgb red --pair").pair == .always)
        #expect(try parse("--rgb red --no-pair --no-repair").pair == .never)
        let t = try parse("get --trace=keys")
        #expect(t.trace == .decoded && t.traceKeys)
        let b = try parse("bonds --remove C0:11:22:33:44:55,public")
        #expect(b.command == .bonds && b.removeBond == DeviceAddress(BDAddress("C0:11:22:33:44:55")!, .public))
        for bad in ["--rgb red --pair --no-repair", "get --remove C0:11:22:33:44:55", "bonds --remove nonsense", "get --trace=key"] {
            #expect(throws: UsageError.self) { try parse(bad) }
        }
    }

    @Test("usage error messages say what was wrong")
    func usageMessages() {
        func message(_ line: String) -> String? {
            do { _ = try parse(line); return nil } catch let e as UsageError { return e.message } catch { return nil }
        }
        #expect(message("--rgb 300,0,0") == "--rgb: '300' in '300,0,0' is not a number from 0 to 255")
        #expect(message("--bogus") == "unknown option '--bogus'")
        #expect(message("--red 2a01 --rgb red") == "--red, --green and --blue go together")
        #expect(message("send") == "send needs --value HEX")
    }
}

@Suite("Colours")
struct RGBTests {
    @Test("colour forms", arguments: [
        ("#ff0000", RGB(255, 0, 0)), ("ff0000", RGB(255, 0, 0)), ("FF8000", RGB(255, 128, 0)), ("red", RGB(255, 0, 0)),
        ("RED", RGB(255, 0, 0)), ("off", RGB(0, 0, 0)), (" 1, 2 ,3 ", RGB(1, 2, 3)), ("0,0,255", RGB(0, 0, 255)),
        ("255,255,255", RGB(255, 255, 255)), ("orange", RGB(255, 165, 0)),
    ])
    func forms(text: String, rgb: RGB) {
        guard case .success(let c) = RGB.parse(text) else { Issue.record("\(text) did not parse"); return }
        #expect(c == rgb)
    }

    @Test("non-colours are refused with a reason", arguments: ["300,0,0", "1,2", "1,2,3,4", "#ff00", "#gg0000", "", "a,b,c", "-1,0,0", "1,,3", "teal"])
    func refuses(text: String) {
        guard case .failure(let e) = RGB.parse(text) else { Issue.record("\(text) parsed"); return }
        #expect(!e.message.isEmpty)
    }

    @Test("colours print as numbers and #rrggbb")
    func printing() {
        #expect(RGB(255, 128, 0).hex == "#ff8000")
        #expect(RGB(255, 128, 0).description == "255,128,0 (#ff8000)")
    }
}

@Suite("LED profiles")
struct LEDProfileTests {
    @Test("profiles are found by name and by advertised service")
    func lookup() {
        #expect(LEDProfile.named("PYCOM") == .pycom)
        #expect(LEDProfile.named("nope") == nil)
        #expect(LEDProfile.detect([BluetoothUUID(uint16: 0x180F), BluetoothUUID("b4250400-fb4b-4746-b2b0-93f0e61122c6")!]) == .particle)
        #expect(LEDProfile.detect([BluetoothUUID("19b10010-e8f2-537e-4f6c-d104768a1214")!]) == .harness)
        #expect(LEDProfile.detect([]) == nil)
        #expect(LEDProfile.pycom.isRGB && !LEDProfile.harness.isRGB)
    }

    @Test("resolving a profile picks red, green, blue in order, or says which is missing")
    func resolve() throws {
        guard case let .rgb(r, g, b) = LEDProfile.pycom.shape else { Issue.record("pycom is not RGB"); return }
        let svc = Service(uuid: LEDProfile.pycom.service, start: 0x10, end: 0x1F)
        func c(_ h: UInt16, _ u: BluetoothUUID, _ p: CharacteristicProperties = [.read, .write]) -> Characteristic {
            Characteristic(declarationHandle: h, properties: p, valueHandle: h + 1, uuid: u, end: h + 1)
        }
        let chars = [c(0x15, b), c(0x11, r), c(0x13, g)]
        #expect(ResolvedLED.isComplete(.pycom, chars))
        let led = try ResolvedLED(profile: .pycom, service: svc, characteristics: chars)
        #expect(led.rgb?.map(\.valueHandle) == [0x12, 0x14, 0x16])
        #expect(!ResolvedLED.isComplete(.pycom, Array(chars.prefix(2))))
        #expect(throws: GATTError.characteristicNotFound(g, service: LEDProfile.pycom.service)) {
            try ResolvedLED(profile: .pycom, service: svc, characteristics: [c(0x11, r), c(0x15, b)])
        }
        let cmd = [c(0x11, BluetoothUUID(uint16: 0x2A56), .writeWithoutResponse), c(0x13, BluetoothUUID(uint16: 0x2A57), [.read, .notify])]
        #expect(ResolvedLED.isComplete(.harness, cmd))
        let h = try ResolvedLED(profile: .harness, service: svc, characteristics: cmd)
        #expect(h.command?.valueHandle == 0x12 && h.notifier?.valueHandle == 0x14)
        #expect(throws: GATTError.self) { try ResolvedLED(profile: .harness, service: svc, characteristics: [cmd[1]]) }
    }
}

@Suite("Exit codes")
struct ExitCodeTests {
    struct Other: Error {}

    static let cases: [(any Error, Int32)] = [
        (RunError("x", .deviceNotFound), 3),
        (UsageError("x"), 64),
        (TransportError.invalidSpec("x", reason: "r"), 64),
        (TransportError.noBluetoothInKernel, 69),
        (TransportError.noSuchAdapter("hci9"), 69),
        (TransportError.refused("tcp:h:1", errno: 111), 69),
        (TransportError.unreachable("tcp:h:1", reason: "r"), 69),
        (TransportError.deviceMissing("/dev/x"), 69),
        (TransportError.adapterBusy("hci0"), 75),
        (TransportError.permissionDenied("hci0", operation: "bind"), 77),
        (TransportError.closedByPeer("x"), 74),
        (TransportError.io("x", operation: "read", errno: 5), 74),
        (TransportError.corruptStream("x", reason: "r"), 74),
        (HCIError.transport(.closedByPeer("x")), 74),
        (HCIError.transport(.adapterBusy("hci0")), 75),
        (HCIError.transport(.permissionDenied("hci0", operation: "bind")), 77),
        (HCIError.interrupted(signal: 2), 130),
        (HCIError.interrupted(signal: 15), 143),
        (HCIError.commandFailed(HCI.Reset.opcode, .hardwareFailure), 76),
        (HCIError.commandTimeout(HCI.Reset.opcode, ms: 1), 76),
        (HCIError.hardwareError(1), 76),
        (HCIError.malformed(HCI.Reset.opcode, .invalid(field: "f", reason: "r")), 76),
        (GAPError.connectTimeout(DeviceAddress(.zero, .random), ms: 1), 4),
        (GAPError.connectFailed(DeviceAddress(.zero, .random), .connectionFailedToEstablish), 4),
        (ATTError.errorResponse(request: .writeRequest, handle: 1, code: .writeNotPermitted), 6),
        (ATTError.unexpectedResponse(request: .readRequest, received: .writeResponse), 6),
        (ATTError.malformedResponse(request: .readRequest, reason: "r"), 6),
        (ATTError.tooLong(request: .writeRequest, size: 30, mtu: 23), 6),
        (ATTError.timeout(request: .readRequest, handle: 1, ms: 1), 7),
        (ATTError.disconnected(reason: nil), 7),
        (ATTError.bearerClosed, 7),
        (GATTError.serviceNotFound(BluetoothUUID(uint16: 0x1800)), 5),
        (GATTError.characteristicNotFound(BluetoothUUID(uint16: 0x2A00), service: BluetoothUUID(uint16: 0x1800)), 5),
        (GATTError.noClientConfiguration(BluetoothUUID(uint16: 0x2A00)), 5),
        (GATTError.notPermitted(BluetoothUUID(uint16: 0x2A00), operation: "write", properties: .read), 6),
        (GATTError.discoveryStalled(procedure: "p", handle: 1), 6),
        (GATTError.malformed(procedure: "p", reason: "r"), 6),
        (WireError.truncated(field: "f", needed: 1, available: 0), 65),
        (Other(), 1),
    ]

    @Test("classify maps each error to its documented exit code", arguments: cases.indices)
    func classifies(i: Int) {
        let (error, code) = Self.cases[i]
        #expect(classify(error).code.rawValue == code, "\(error)")
    }

    @Test("the message is the error's own description")
    func messages() {
        #expect(classify(UsageError("bad")).message == "bad")
        #expect(classify(ATTError.bearerClosed).message == ATTError.bearerClosed.description)
        #expect(classify(HCIError.interrupted(signal: 2)).message == "interrupted")
    }

    @Test("the help text documents the exit codes classify uses")
    func documented() {
        for code in [3, 4, 5, 6, 7, 64, 65, 69, 74, 75, 76, 77] { #expect(Usage.help.contains("\(code) "), "\(code)") }
        #expect(Usage.help.contains("130/143"))
    }
}

@Suite("GATT cache files")
struct GATTCacheTests {
    /// A fresh directory under /tmp, removed by the caller.
    static func tempDirectory() throws -> String {
        var template = Array("/tmp/attled-test-XXXXXX".utf8CString)
        let p = try #require(template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) })
        return String(cString: p)
    }

    static func removeAll(_ dir: String) {
        if let d = opendir(dir) {
            while let e = readdir(d) {
                let name = withUnsafeBytes(of: e.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
                if name != "." && name != ".." { unlink(dir + "/" + name) }
            }
            closedir(d)
        }
        rmdir(dir)
    }

    static let device = DeviceAddress(BDAddress("C0:11:22:33:44:55")!, .random)
    static let entry = GATTCache.Entry(
        profile: "pycom", service: Service(uuid: LEDProfile.pycom.service, start: 0x10, end: 0x1F),
        characteristics: [Characteristic(declarationHandle: 0x11, properties: [.read, .write], valueHandle: 0x12,
                                         uuid: BluetoothUUID("36353433-3231-3039-3837-363534336261")!, end: 0x12)],
        hashHandle: 0x0009, hash: hex("00 11 22 33 44 55 66 77 88 99 aa bb cc dd ee ff"), noHash: false)

    @Test("an entry saved is loaded back the same, from a file named after the address")
    func roundTrip() throws {
        let dir = try Self.tempDirectory()
        defer { Self.removeAll(dir) }
        let cache = GATTCache(directory: dir)
        #expect(cache.load(Self.device) == nil)
        cache.save(Self.device, Self.entry)
        #expect(cache.path(Self.device) == dir + "/gatt-C0-11-22-33-44-55-random")
        #expect(cache.load(Self.device) == Self.entry)
        cache.remove(Self.device)
        #expect(cache.load(Self.device) == nil)
    }

    @Test("a damaged or foreign cache file is ignored, never trusted", arguments: [
        "", "attled-gatt-cache 2\nprofile pycom\n",
        "attled-gatt-cache 1\nprofile pycom\nservice 1800 16 31\n",
        "attled-gatt-cache 1\nprofile pycom\nservice 1800 16 31\nchar 2a00 17 2 18\n",
        "attled-gatt-cache 1\nprofile pycom\nservice 1800 16 31\nchar 2a00 17 2 99999 18\n",
        "attled-gatt-cache 1\nprofile pycom\nservice 1800 16 31\nchar 2a00 17 2 18 18\nhash 9 zz\n",
        "attled-gatt-cache 1\nprofile pycom\nservice 1800 16 31\nchar 2a00 17 2 18 18\nsurprise\n",
        "\u{FF}\u{FE}garbage",
    ])
    func damaged(text: String) throws {
        let dir = try Self.tempDirectory()
        defer { Self.removeAll(dir) }
        let cache = GATTCache(directory: dir)
        cache.writeFile(cache.path(Self.device), text)
        #expect(cache.load(Self.device) == nil)
    }

    @Test("names resolve to the address remembered last; forget removes them")
    func names() throws {
        let dir = try Self.tempDirectory()
        defer { Self.removeAll(dir) }
        let cache = GATTCache(directory: dir)
        #expect(cache.address(forName: "LED") == nil)
        cache.remember(name: "LED", DeviceAddress(BDAddress("C0:11:22:33:44:55")!, .random))
        cache.remember(name: "Other", DeviceAddress(BDAddress("00:11:22:33:44:55")!, .public))
        cache.remember(name: "LED", DeviceAddress(BDAddress("C0:11:22:33:44:66")!, .random))
        #expect(cache.address(forName: "LED") == DeviceAddress(BDAddress("C0:11:22:33:44:66")!, .random))
        #expect(cache.address(forName: "Other") == DeviceAddress(BDAddress("00:11:22:33:44:55")!, .public))
        cache.forget(name: "LED")
        #expect(cache.address(forName: "LED") == nil)
        #expect(cache.address(forName: "Other") != nil)
        cache.remember(name: "bad\tname", DeviceAddress(BDAddress("C0:11:22:33:44:55")!, .random))
        #expect(cache.address(forName: "bad\tname") == nil)
    }
}
