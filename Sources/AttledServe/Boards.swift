import BLEWire
import BLEGATT
import BLEGATTServer
import AttledJSON
import LEDProfile

/// The three boards attled drives, as `attled serve --profile` plays them:
/// each one's LED service as data, in the shape `attled gatt --json
/// --values` prints (properties, value sizes), after the GAP service (the
/// name) and the GATT service (Service Changed, Client Supported Features,
/// Database Hash). The layout, handle for handle: 0x0001 GAP (Device Name
/// 0x0003, Appearance 0x0005), 0x0006 GATT (Service Changed 0x0008 and its
/// CCCD 0x0009, Client Supported Features 0x000B, Database Hash 0x000D),
/// 0x000E the LED service, each characteristic a declaration and a value
/// (pycom, particle: red 0x0010, green 0x0012, blue 0x0014; harness:
/// command 0x0010, button 0x0012 and its CCCD 0x0013).
public enum Boards {
    /// The LED service of each board (`attled gatt --json --values` shape;
    /// `max_length` is the value size the firmware takes).
    public static let ledService: [String: String] = [
        "pycom": """
        [{"uuid": "36353433-3231-3039-3837-363534333231", "primary": true, "characteristics": [
          {"uuid": "36353433-3231-3039-3837-363534336261", "properties": ["read", "write"], "value": "00", "max_length": 1, "descriptors": []},
          {"uuid": "36353433-3231-3039-3837-363534336262", "properties": ["read", "write"], "value": "00", "max_length": 1, "descriptors": []},
          {"uuid": "36353433-3231-3039-3837-363534336263", "properties": ["read", "write"], "value": "00", "max_length": 1, "descriptors": []}]}]
        """,
        "particle": """
        [{"uuid": "b4250400-fb4b-4746-b2b0-93f0e61122c6", "primary": true, "characteristics": [
          {"uuid": "b4250401-fb4b-4746-b2b0-93f0e61122c6", "properties": ["read", "write-without-response"], "value": "00", "max_length": 1, "descriptors": []},
          {"uuid": "b4250402-fb4b-4746-b2b0-93f0e61122c6", "properties": ["read", "write-without-response"], "value": "00", "max_length": 1, "descriptors": []},
          {"uuid": "b4250403-fb4b-4746-b2b0-93f0e61122c6", "properties": ["read", "write-without-response"], "value": "00", "max_length": 1, "descriptors": []}]}]
        """,
        "harness": """
        [{"uuid": "19b10010-e8f2-537e-4f6c-d104768a1214", "primary": true, "characteristics": [
          {"uuid": "19b10011-e8f2-537e-4f6c-d104768a1214", "properties": ["read", "write"], "value": "00", "max_length": 1, "descriptors": []},
          {"uuid": "19b10012-e8f2-537e-4f6c-d104768a1214", "properties": ["read", "notify"], "value": "00", "max_length": 1, "descriptors": []}]}]
        """,
    ]

    /// The board's whole database: GAP with `name`, GATT, its LED service;
    /// `secure` puts the LED characteristics (and so their CCCDs) behind encryption.
    /// - Throws: `GATTJSONError` (never for the built-in boards), `GATTDatabaseError`.
    public static func database(_ profile: LEDProfile, name: String, secure: Bool = false) throws -> GATTServerDatabase {
        guard let text = ledService[profile.name] else { throw GATTJSONError("board \(profile.name)", "not a built-in board") }
        let doc: JSONValue
        do { doc = try JSONValue.parse(text) } catch { throw GATTJSONError("board \(profile.name)", "\(error)") }
        var led = try GATTJSON.services(doc)
        if secure {
            for s in led.indices { for c in led[s].characteristics.indices {
                led[s].characteristics[c].permissions = led[s].characteristics[c].effectivePermissions.union(.encrypted)
            } }
        }
        return try GATTServerDatabase(services: [StandardServices.gap(name: name), StandardServices.gatt()] + led)
    }
}
