import Testing
import BLEWire
@testable import AttledHomeAssistant
import LEDProfile
import AttledJSON

private func topics(_ prefix: String = "attled", _ discovery: String = "homeassistant") throws -> HATopics {
    try HATopics(topicPrefix: prefix, discoveryPrefix: discovery, gatewayID: "gw1")
}

private func device(_ id: String = "C0:FF:EE:00:11:22", name: String = "CassarTech", model: String = "pycom",
                    kind: HADevice.Kind = .light) throws -> HADevice {
    try HADevice(id: id, name: name, model: model, kind: kind)
}

/// The payload as a consumer sees it: serialised, then parsed back by our own parser.
private func wire(_ m: HAMessage) throws -> JSONValue { try JSONValue.parse(m.payloadBytes) }

private func command(_ text: String) throws(LightCommandError) -> LightCommand { try LightCommand.parse(text) }

/// The LightCommandError `text` is refused with; records an issue if it parses.
private func refusal(_ text: String, sourceLocation: SourceLocation = #_sourceLocation) -> LightCommandError? {
    do {
        let c = try LightCommand.parse(text)
        Issue.record("expected a refusal, parsed \(c)", sourceLocation: sourceLocation)
        return nil
    } catch { return error }
}

@Suite("Home Assistant: topics")
struct HATopicTests {
    @Test("defaults: attled/ for our tree, homeassistant/ for discovery, node from the address")
    func defaults() throws {
        let t = try HATopics()
        let d = try device()
        #expect(d.nodeID == "c0ffee001122")
        #expect(t.command(d) == "attled/c0ffee001122/set")
        #expect(t.state(d) == "attled/c0ffee001122/state")
        #expect(t.availability(d) == "attled/c0ffee001122/availability")
        #expect(t.gatewayAvailability == "attled/gateway/availability")
        #expect(t.homeAssistantStatus == "homeassistant/status")
        #expect(t.config(component: "light", d, object: "light") == "homeassistant/light/attled_c0ffee001122/light/config")
    }

    @Test("configured prefixes move every topic")
    func customPrefixes() throws {
        let t = try topics("home/leds", "ha")
        let d = try device()
        #expect(t.command(d) == "home/leds/c0ffee001122/set")
        #expect(t.gatewayAvailability == "home/leds/gw1/availability")
        #expect(t.homeAssistantStatus == "ha/status")
        #expect(HomeAssistant.lightConfig(d, topics: t).topic == "ha/light/attled_c0ffee001122/light/config")
    }

    @Test("prefixes MQTT or Home Assistant would not take are refused", arguments: ["", "a/+", "a/#", "/attled", "attled/", "a\u{0}b"])
    func badPrefix(prefix: String) throws {
        #expect(throws: HAError.self) { try HATopics(topicPrefix: prefix) }
        #expect(throws: HAError.self) { try HATopics(discoveryPrefix: prefix) }
    }

    @Test("ids keep only [a-z0-9_-]; an id with nothing left is refused")
    func ids() throws {
        #expect(try device("My Lamp #2!").nodeID == "mylamp2")
        #expect(throws: HAError.invalidID(":::")) { try HADevice(id: ":::", name: "n", model: "m", kind: .light) }
        #expect(throws: HAError.invalidID("--")) { try HATopics(gatewayID: "--") }
    }

    @Test("subscriptions: HA status, each light's command topic, each harness's two buttons")
    func subscriptions() throws {
        let t = try topics()
        let lamp = try device()
        let harness = try device("AA:BB:CC:DD:EE:FF", name: "Harness", model: "harness", kind: .harness)
        #expect(t.subscriptions([lamp, harness]) == [
            "homeassistant/status", "attled/c0ffee001122/set", "attled/aabbccddeeff/button1", "attled/aabbccddeeff/button2",
        ])
    }
}

@Suite("Home Assistant: discovery payloads")
struct HADiscoveryTests {
    @Test("light: JSON schema, rgb only, brightness, topics, unique id — field by field")
    func lightConfig() throws {
        let t = try topics()
        let d = try device()
        let m = HomeAssistant.lightConfig(d, topics: t)
        #expect(m.retain, "discovery configs are retained")
        #expect(m.topic == "homeassistant/light/attled_c0ffee001122/light/config")
        let p = try wire(m)
        #expect(p["name"] == .null, "null name: the entity is named after the device")
        #expect(p["unique_id"] == "attled_c0ffee001122_light")
        #expect(p["schema"] == "json")
        #expect(p["command_topic"] == "attled/c0ffee001122/set")
        #expect(p["state_topic"] == "attled/c0ffee001122/state")
        #expect(p["brightness"] == .bool(true))
        #expect(p["supported_color_modes"] == ["rgb"])
        #expect(p["availability_mode"] == "all")
        #expect(p["origin"]?["name"] == "attled")
        #expect(p.objectValue?.map(\.0) == [
            "name", "unique_id", "schema", "command_topic", "state_topic", "brightness", "supported_color_modes",
            "availability", "availability_mode", "json_attributes_topic", "device", "origin",
        ], "no field beyond the documented ones, in a stable order")
    }

    @Test("availability is the device's own topic (kept by its holder), with online/offline payloads; the holder record as attributes")
    func availability() throws {
        let p = try wire(HomeAssistant.lightConfig(try device(), topics: try topics()))
        let list = try #require(p["availability"]?.arrayValue)
        #expect(list.count == 1)
        #expect(list[0]["topic"] == "attled/c0ffee001122/availability")
        #expect(p["json_attributes_topic"] == "attled/c0ffee001122/holder")
        // A lone gateway's lamps go unavailable with it: its own availability too.
        let lone = try wire(HomeAssistant.lightConfig(try device(), topics: try topics(), lone: true))
        #expect(lone["availability"]?.arrayValue?.map { $0["topic"] } == ["attled/c0ffee001122/availability", "attled/gw1/availability"])
        #expect(lone["availability_mode"] == "all")
        for entry in list {
            #expect(entry["payload_available"] == "online")
            #expect(entry["payload_not_available"] == "offline")
        }
    }

    @Test("device block: identifiers, name, model, manufacturer attled, Bluetooth connection; no via_device (any gateway may hold it)")
    func deviceBlock() throws {
        let p = try wire(HomeAssistant.lightConfig(try device(), topics: try topics()))
        let dev = try #require(p["device"])
        #expect(dev["identifiers"] == ["attled_c0ffee001122"])
        #expect(dev["name"] == "CassarTech")
        #expect(dev["model"] == "pycom")
        #expect(dev["manufacturer"] == "attled")
        #expect(dev["via_device"] == nil)
        #expect(dev["connections"] == [["bluetooth", "c0:ff:ee:00:11:22"]])
        // An id that is not an address has no Bluetooth connection entry.
        let q = try wire(HomeAssistant.lightConfig(try device("lamp-1"), topics: try topics()))
        #expect(q["device"]?["connections"] == nil)
    }

    @Test("a name with quotes and non-ASCII text is escaped and survives")
    func nameEscaping() throws {
        let p = try wire(HomeAssistant.lightConfig(try device(name: "Kitchen \"Lamp\" ü\n"), topics: try topics()))
        #expect(p["device"]?["name"] == "Kitchen \"Lamp\" ü\n")
    }

    @Test("harness: two buttons pressing with PRESS, and a notification sensor, all on the same device")
    func harness() throws {
        let t = try topics()
        let d = try device("AA:BB:CC:DD:EE:FF", name: "Harness", model: "harness", kind: .harness)
        let ms = HomeAssistant.configs(d, topics: t)
        #expect(ms.map(\.topic) == [
            "homeassistant/button/attled_aabbccddeeff/button1/config",
            "homeassistant/button/attled_aabbccddeeff/button2/config",
            "homeassistant/sensor/attled_aabbccddeeff/notify/config",
        ])
        #expect(ms.allSatisfy { $0.retain })
        for (i, m) in ms.prefix(2).enumerated() {
            let p = try wire(m)
            #expect(p["name"] == .string("Button \(i + 1)"))
            #expect(p["unique_id"] == .string("attled_aabbccddeeff_button\(i + 1)"))
            #expect(p["command_topic"] == .string("attled/aabbccddeeff/button\(i + 1)"))
            #expect(p["payload_press"] == "PRESS")
            #expect(p["availability_mode"] == "all")
            #expect(p["availability"]?.arrayValue?.count == 1)
            #expect(p["json_attributes_topic"] == "attled/aabbccddeeff/holder")
            #expect(p["device"]?["identifiers"] == ["attled_aabbccddeeff"])
        }
        let s = try wire(ms[2])
        #expect(s["state_topic"] == "attled/aabbccddeeff/notify")
        #expect(s["unique_id"] == "attled_aabbccddeeff_notify")
        #expect(s["command_topic"] == nil)
        #expect(s["device"]?["model"] == "harness")
    }

    @Test("button presses map to the harness's bytes: 01/00 and 03/04, released after 400 ms")
    func buttons() throws {
        let t = try topics()
        let d = try device("AA:BB:CC:DD:EE:FF", kind: .harness)
        let press = Array("PRESS".utf8)
        #expect(HomeAssistant.buttonPress(topic: "attled/aabbccddeeff/button1", payload: press, device: d, topics: t) == .one)
        #expect(HomeAssistant.buttonPress(topic: "attled/aabbccddeeff/button2", payload: press, device: d, topics: t) == .two)
        #expect(HomeAssistant.buttonPress(topic: "attled/aabbccddeeff/button3", payload: press, device: d, topics: t) == nil)
        #expect(HomeAssistant.buttonPress(topic: "attled/aabbccddeeff/button1", payload: Array("press".utf8), device: d, topics: t) == nil)
        #expect([HarnessButton.one.pressByte, HarnessButton.one.releaseByte] == [0x01, 0x00])
        #expect([HarnessButton.two.pressByte, HarnessButton.two.releaseByte] == [0x03, 0x04])
        #expect(HarnessButton.holdMs == 400)
        #expect(HomeAssistant.notificationText([0x01]) == "01")
        #expect(HomeAssistant.notificationText([0xAB, 0x00, 0xFF]) == "ab00ff")
        #expect(HomeAssistant.notificationText([]) == "")
    }

    @Test("HA's birth message is exactly 'online'")
    func birth() throws {
        #expect(HomeAssistant.isBirth(Array("online".utf8)))
        #expect(!HomeAssistant.isBirth(Array("offline".utf8)))
        #expect(!HomeAssistant.isBirth(Array("online\n".utf8)))
    }
}

@Suite("Home Assistant: light commands")
struct HALightCommandTests {
    @Test("HA's full command parses to on, brightness and colour")
    func fullCommand() throws {
        let c = try command(#"{"state":"ON","brightness":128,"color":{"r":200,"g":100,"b":50}}"#)
        #expect(c == LightCommand(on: true, brightness: 128, colour: LightColour(200, 100, 50)))
    }

    @Test("the other forms HA sends: OFF, bare ON, brightness only, colour only, transition and flash")
    func otherForms() throws {
        #expect(try command(#"{"state":"OFF"}"#) == LightCommand(on: false))
        #expect(try command(#"{"state":"ON"}"#) == LightCommand(on: true))
        #expect(try command(#"{"state":"ON","brightness":1}"#) == LightCommand(on: true, brightness: 1))
        #expect(try command(#"{"color":{"b":3,"g":2,"r":1},"state":"ON"}"#) == LightCommand(on: true, colour: LightColour(1, 2, 3)))
        #expect(try command(#"{"state":"OFF","transition":2.5}"#) == LightCommand(on: false, transition: 2.5))
        #expect(try command(#"{"state":"ON","flash":2}"#) == LightCommand(on: true, flash: 2))
        #expect(try command(#" {"state":"ON","brightness":255.0} "#).brightness == 255, "an integral number with .0 is accepted")
    }

    @Test("malformed commands are refused with a typed reason naming the field", arguments: [
        ("", LightCommandError.json(JSONError(offset: 0, reason: .unexpectedEnd(expected: "a value")))),
        ("ON", .json(JSONError(offset: 0, reason: .unexpectedByte(UInt8(ascii: "O"), expected: "a value")))),
        (#"{"state":"ON""#, .json(JSONError(offset: 13, reason: .unexpectedEnd(expected: "',' or '}'")))),
        (#"["ON"]"#, .notAnObject(got: "an array")),
        (#""ON""#, .notAnObject(got: "a string")),
        (#"{}"#, .missingField("state")),
        (#"{"brightness":10}"#, .missingField("state")),
        (#"{"state":"on"}"#, .outOfRange(field: "state", value: "\"on\"", allowed: "\"ON\" or \"OFF\"")),
        (#"{"state":true}"#, .wrongType(field: "state", expected: "\"ON\" or \"OFF\"", got: "a boolean")),
        (#"{"state":"ON","brightness":256}"#, .outOfRange(field: "brightness", value: "256", allowed: "0...255")),
        (#"{"state":"ON","brightness":-1}"#, .outOfRange(field: "brightness", value: "-1", allowed: "0...255")),
        (#"{"state":"ON","brightness":12.5}"#, .wrongType(field: "brightness", expected: "an integer 0...255", got: "12.5")),
        (#"{"state":"ON","brightness":"128"}"#, .wrongType(field: "brightness", expected: "an integer 0...255", got: "a string")),
        (#"{"state":"ON","brightness":1e300}"#, .wrongType(field: "brightness", expected: "an integer 0...255", got: "1e+300")),
        (#"{"state":"ON","color":[1,2,3]}"#, .wrongType(field: "color", expected: "an object {r,g,b}", got: "an array")),
        (#"{"state":"ON","color":{"r":1,"g":2}}"#, .missingField("color.b")),
        (#"{"state":"ON","color":{"r":1,"g":2,"b":3,"w":4}}"#, .unknownField("color.w")),
        (#"{"state":"ON","color":{"r":300,"g":2,"b":3}}"#, .outOfRange(field: "color.r", value: "300", allowed: "0...255")),
        (#"{"state":"ON","color":{"r":1,"g":null,"b":3}}"#, .wrongType(field: "color.g", expected: "an integer 0...255", got: "null")),
        (#"{"state":"ON","effect":"rainbow"}"#, .unknownField("effect")),
        (#"{"state":"ON","State":"OFF"}"#, .unknownField("State")),
        (#"{"state":"ON","state":"OFF"}"#, .json(JSONError(offset: 14, reason: .duplicateKey("state")))),
        (#"{"state":"ON","transition":-1}"#, .outOfRange(field: "transition", value: "-1.0", allowed: "0...3600")),
        (#"{"state":"ON","flash":"short"}"#, .wrongType(field: "flash", expected: "an integer", got: "a string")),
        (#"{"state":"ON","color":{"r":{"r":{"r":{"r":1}}}}}"#, .json(JSONError(offset: 37, reason: .tooDeep(limit: 4)))),
    ])
    func malformed(text: String, expected: LightCommandError) throws {
        #expect(refusal(text) == expected, "input: \(text)")
    }

    @Test("a payload over 1 KiB is refused before parsing")
    func tooLarge() throws {
        let big = #"{"state":"ON","transition":0"# + String(repeating: " ", count: 1100) + "}"
        #expect(refusal(big) == .tooLarge(bytes: big.utf8.count, limit: 1024))
    }

    @Test("refusals read as a log line that names the problem")
    func messages() throws {
        #expect(refusal(#"{"state":"ON","brightness":256}"#)?.description == "light command field \"brightness\" is 256, allowed 0...255")
        #expect(refusal(#"{"state":"ON","effect":"x"}"#)?.description == "light command has unknown field \"effect\"")
        #expect(refusal("{")?.description == "light command: JSON error at byte 1: input ends where a member name was expected")
    }

    @Test("every prefix of a valid command, and garbage bytes, are refused without trapping")
    func hostile() throws {
        let full = Array(#"{"state":"ON","brightness":128,"color":{"r":200,"g":100,"b":50},"transition":1}"#.utf8)
        for n in 0..<full.count {
            #expect(throws: LightCommandError.self) { try LightCommand.parse(Array(full[0..<n])) }
        }
        #expect(throws: LightCommandError.self) { try LightCommand.parse([0xFF, 0xFE, 0x00]) }
        #expect(throws: LightCommandError.self) { try LightCommand.parse(Array(repeating: UInt8(ascii: "["), count: 1000)) }
    }
}

@Suite("Home Assistant: light state and brightness scaling")
struct HALightStateTests {
    @Test("(200,100,50) at brightness 128 is written as (100,50,25)")
    func issueExample() throws {
        #expect(LightColour(200, 100, 50).scaled(by: 128) == LightColour(100, 50, 25))
    }

    @Test("scaling rounds to nearest for every channel and brightness value, and keeps the ends exact")
    func scalingExhaustive() throws {
        for c in 0...255 {
            for b in 0...255 {
                let got = LightColour(UInt8(c), 0, 0).scaled(by: UInt8(b)).r
                let want = (Double(c) * Double(b) / 255).rounded()
                if Double(got) != want {
                    Issue.record("\(c) × \(b) / 255 gave \(got), want \(want)")
                    return
                }
            }
        }
        #expect(LightColour(1, 2, 255).scaled(by: 255) == LightColour(1, 2, 255))
        #expect(LightColour(255, 255, 255).scaled(by: 0) == .black)
    }

    @Test("the reducer: set, OFF writes black and keeps the colour, bare ON restores it, brightness alone rescales")
    func reducer() throws {
        var s = LightState.initial
        #expect(!s.on && s.deviceColour == .black)

        s = s.applying(try command(#"{"state":"ON","brightness":128,"color":{"r":200,"g":100,"b":50}}"#))
        #expect(s.deviceColour == LightColour(100, 50, 25))
        #expect(s.stateJSON.serialized == #"{"state":"ON","color_mode":"rgb","brightness":128,"color":{"r":200,"g":100,"b":50}}"#)

        s = s.applying(try command(#"{"state":"OFF"}"#))
        #expect(s.deviceColour == .black)
        #expect(s.stateJSON.serialized == #"{"state":"OFF","color_mode":"rgb","brightness":128,"color":{"r":200,"g":100,"b":50}}"#)

        s = s.applying(try command(#"{"state":"ON"}"#))
        #expect(s.deviceColour == LightColour(100, 50, 25), "bare ON restores the last colour at the last brightness")

        s = s.applying(try command(#"{"state":"ON","brightness":255}"#))
        #expect(s.deviceColour == LightColour(200, 100, 50))

        s = s.applying(try command(#"{"state":"ON","color":{"r":0,"g":0,"b":255}}"#))
        #expect(s.deviceColour == LightColour(0, 0, 255))
        #expect(s.brightness == 255)
    }

    @Test("state read back on connect: black is off (ON then gives white), a colour is on at full brightness")
    func readBack() throws {
        let dark = LightState.readBack(.black)
        #expect(!dark.on)
        let on = try command(#"{"state":"ON"}"#)
        #expect(dark.applying(on).deviceColour == .white)
        let lit = LightState.readBack(LightColour(10, 20, 30))
        #expect(lit == LightState(on: true, colour: LightColour(10, 20, 30), brightness: 255))
        #expect(lit.deviceColour == LightColour(10, 20, 30))
    }

    @Test("the state message goes, retained, to the device's state topic")
    func stateMessage() throws {
        let m = LightState.readBack(LightColour(1, 2, 3)).stateMessage(try device(), topics: try topics())
        #expect(m.topic == "attled/c0ffee001122/state")
        #expect(m.retain)
        let p = try JSONValue.parse(m.payloadBytes)
        #expect(p["state"] == "ON")
        #expect(p["color_mode"] == "rgb")
        #expect(p["brightness"] == 255)
        #expect(p["color"] == ["r": 1, "g": 2, "b": 3])
    }
}

@Suite("Home Assistant: the gateway's own device")
struct HAGatewayDeviceTests {
    @Test("the gateway is a device of its own: a connectivity sensor on its availability topic, the version in origin; lamps' configs the same from every gateway")
    func gatewayDevice() throws {
        let topics = try HATopics(topicPrefix: "attled", discoveryPrefix: "homeassistant", gatewayID: "gw1")
        let m = HomeAssistant.gatewayConfig(topics: topics)
        #expect(m.topic == "homeassistant/binary_sensor/attled_gw1/connectivity/config")
        #expect(m.retain)
        let p = try JSONValue.parse(String(decoding: m.payloadBytes, as: UTF8.self))
        #expect(p["device_class"] == "connectivity" && p["entity_category"] == "diagnostic")
        #expect(p["state_topic"] == "attled/gw1/availability")
        #expect(p["payload_on"] == "online" && p["payload_off"] == "offline")
        #expect(p["unique_id"] == "attled_gw1_connectivity")
        #expect(p["device"]?["identifiers"] == ["attled_gw1"])
        #expect(p["device"]?["sw_version"] == .string(AttledVersion.string))
        #expect(p["origin"]?["sw_version"] == .string(AttledVersion.string))
        // A lamp's configs are the same bytes whichever gateway publishes them.
        let lamp = try HADevice(id: "c0:ff:ee:00:11:22", name: "Lamp", model: "pycom", kind: .light)
        let other = try HATopics(topicPrefix: "attled", discoveryPrefix: "homeassistant", gatewayID: "gw2")
        let light = try JSONValue.parse(String(decoding: HomeAssistant.lightConfig(lamp, topics: topics).payloadBytes, as: UTF8.self))
        #expect(HomeAssistant.lightConfig(lamp, topics: topics).payloadBytes == HomeAssistant.lightConfig(lamp, topics: other).payloadBytes)
        let harness = try HADevice(id: "c0:ff:ee:00:11:23", name: "H", model: "harness", kind: .harness)
        #expect(HomeAssistant.configs(harness, topics: topics).map(\.payloadBytes) == HomeAssistant.configs(harness, topics: other).map(\.payloadBytes))
        #expect(light["origin"] == p["origin"])
    }
}
