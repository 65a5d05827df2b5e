// json: the input is a JSON text as it comes off the network (an MQTT payload).
// JSONValue.parse must return a value or a JSONError, never trap, and a value
// must serialise to text that parses back to an equal value.
//
// ha-command: the input is a payload on a light's command topic.
// LightCommand.parse must return a command or a LightCommandError; a command's
// colour scaled by its brightness stays a colour, and the state it makes
// reports what it was given.
import BLEWire
import AttledHomeAssistant
import AttledJSON

func fuzzJSON(_ data: [UInt8]) {
    let value: JSONValue
    do { value = try JSONValue.parse(data) } catch { _ = error.description; return }
    let text = value.serialized
    let again: JSONValue
    do { again = try JSONValue.parse(text) } catch {
        require(false, "\(value) serialised as '\(text)', which is refused: \(error)")
        return
    }
    require(again == value, "'\(String(decoding: data, as: UTF8.self))' parses to \(value), serialised as '\(text)', which parses to \(again)")
}

func fuzzHACommand(_ data: [UInt8]) {
    let cmd: LightCommand
    do { cmd = try LightCommand.parse(data) } catch { _ = error.description; return }
    let before = LightState(on: true, colour: LightColour(1, 2, 3), brightness: 255)
    let after = before.applying(cmd)
    require(after.on == cmd.on, "state \(after) after \(cmd) is not \(cmd.on ? "ON" : "OFF")")
    if let b = cmd.brightness { require(after.brightness == b, "brightness \(b) not applied: \(after)") }
    if let c = cmd.colour {
        require(after.colour == c, "colour \(c) not applied: \(after)")
        let s = c.scaled(by: after.brightness)
        require(s.r <= c.r && s.g <= c.g && s.b <= c.b, "\(c) scaled by \(after.brightness) grew to \(s)")
    }
}
