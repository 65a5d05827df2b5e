@_exported import Attled
@_exported import LEDProfile

// The LED lamps on top of the library: what the facade knew of the LED app
// before (issue 20) lives here, so the facade knows no app.

extension Link {
    /// Finds the LED service and characteristics (see `LEDOperations.startDiscover`).
    /// - Returns: the resolved LED characteristics.
    /// - Throws: `GATTError`, `LEDOperations.Failure`, `ATTError`, `HCIError`.
    public func resolveLED(profile: LEDProfile? = nil, advertised: [BluetoothUUID] = []) throws -> ResolvedLED {
        try stack.host.wait(LEDOperations.startDiscover(gatt, profile: profile, advertised: advertised, deviceName: peer.description))
    }

    /// Writes a colour to an RGB LED and waits until it is written (Write
    /// Responses received, or Write Commands confirmed sent).
    /// - Throws: `GATTError`, `ATTError`, `HCIError`.
    public func setColour(_ rgb: RGB, on led: ResolvedLED) throws {
        _ = try stack.host.wait(LEDOperations.startSetColour(gatt, led, rgb))
    }

    /// Reads the colour of an RGB LED.
    /// - Returns: the colour.
    /// - Throws: `GATTError`, `ATTError`, `HCIError`.
    public func readColour(of led: ResolvedLED) throws -> RGB {
        try stack.host.wait(LEDOperations.startReadColour(gatt, led))
    }
}

extension DeviceFilter {
    /// A device advertising one of these profiles' LED services (default: all known).
    public static func led(_ profiles: [LEDProfile] = []) -> DeviceFilter {
        let ps = profiles.isEmpty ? LEDProfile.known : profiles
        let label = profiles.isEmpty ? "a known LED service (pycom, particle or harness)" : "the " + ps.map(\.name).joined(separator: " or ") + " LED service"
        return .anyService(ps.map(\.service), label: label)
    }
}
