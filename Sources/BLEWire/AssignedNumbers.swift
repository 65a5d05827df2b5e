/// Names of the 16-bit UUIDs attled meets: GATT services, declarations,
/// descriptors and characteristics (Bluetooth Assigned Numbers 3.4, 3.5, 3.7, 3.8).
/// One table, used by the GATT layer, the CLI and the tracer.
public enum AssignedNumbers {
    /// 16-bit UUID -> its name in the Assigned Numbers document.
    public static let uuidNames: [UInt16: String] = [
        // Services (3.4)
        0x1800: "Generic Access", 0x1801: "Generic Attribute", 0x180A: "Device Information", 0x180F: "Battery",
        // Declarations (3.5)
        0x2800: "Primary Service", 0x2801: "Secondary Service", 0x2802: "Include", 0x2803: "Characteristic",
        // Descriptors (3.7)
        0x2900: "Characteristic Extended Properties", 0x2901: "Characteristic User Description",
        0x2902: "Client Characteristic Configuration", 0x2903: "Server Characteristic Configuration",
        0x2904: "Characteristic Presentation Format",
        // Characteristics (3.8)
        0x2A00: "Device Name", 0x2A01: "Appearance", 0x2A04: "Peripheral Preferred Connection Parameters",
        0x2A05: "Service Changed", 0x2A19: "Battery Level", 0x2A29: "Manufacturer Name String",
        0x2AA6: "Central Address Resolution", 0x2B29: "Client Supported Features", 0x2B2A: "Database Hash",
        0x2B3A: "Server Supported Features",
    ]
}

extension BluetoothUUID {
    /// The Assigned Numbers name of a 16-bit UUID attled knows ("Device Name"
    /// for 0x2A00), nil for any other UUID.
    public var assignedName: String? { uint16.flatMap { AssignedNumbers.uuidNames[$0] } }

    /// The name followed by the short form in parentheses when the UUID has an
    /// assigned name ("Device Name (2a00)"), else `description`: how the
    /// tracer prints a UUID.
    public var namedDescription: String {
        if let v = uint16, let n = AssignedNumbers.uuidNames[v] { return "\(n) (\(Hex.int(v, width: 4)))" }
        return description
    }
}
