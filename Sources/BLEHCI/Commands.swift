import BLEWire
import BLETransport

/// An HCI command packet: opcode and parameters (Core Vol 4 Part E 5.4.1).
public struct HCICommand: Hashable, Sendable {
    public var opcode: HCIOpcode
    public var parameters: [UInt8]
    /// A command from its opcode and already-encoded parameters.
    public init(_ opcode: HCIOpcode, _ parameters: [UInt8] = []) {
        self.opcode = opcode
        self.parameters = parameters
    }

    /// Bytes after the H4 indicator: opcode (LE16), parameter length, parameters.
    public var encoded: [UInt8] {
        var w = ByteWriter(capacity: 3 + parameters.count)
        w.u16(opcode.rawValue)
        w.u8(UInt8(truncatingIfNeeded: parameters.count))
        w.append(parameters)
        return w.bytes
    }

    public var packet: HCIPacket { HCIPacket(.command, encoded) }

    /// Parses a command packet (for the tracer and for tests).
    /// - Throws: `WireError` if the parameters are shorter than their length byte or followed by extra bytes.
    public static func decode(_ bytes: [UInt8]) throws -> HCICommand {
        var r = ByteReader(bytes)
        let op = HCIOpcode(rawValue: try r.u16("opcode"))
        let len = Int(try r.u8("parameter length"))
        let params = try r.bytes(len, "parameters")
        try r.expectEnd("command \(op)")
        return HCICommand(op, params)
    }
}

// MARK: - Link control, controller and baseband, informational, status (7.1-7.5)

extension HCI {
    /// Disconnect (7.1.6): handle and reason.
    public struct Disconnect: HCIDeclaredCommand {
        public static let declaration = HCICommandDeclaration(0x0406, "Disconnect")
        public var handle: UInt16
        public var reason: HCIStatus
        /// A disconnect of connection `handle`, by default as the user ending it.
        public init(handle: UInt16, reason: HCIStatus = .remoteUserTerminated) { self.handle = handle; self.reason = reason }
        public init() { self.init(handle: 0) }
        public mutating func fields(_ f: inout some HCIFieldWalker) throws {
            try f.u16("Connection_Handle", "Handle", &handle)
            try f.code("Reason", "Reason", &reason)
        }
    }

    /// Set Event Mask (7.3.1).
    public struct SetEventMask: HCIDeclaredCommand {
        public static let declaration = HCICommandDeclaration(0x0C01, "Set Event Mask")
        public var mask: UInt64
        public init(mask: UInt64) { self.mask = mask }
        public init() { self.init(mask: 0) }
        public mutating func fields(_ f: inout some HCIFieldWalker) throws {
            try f.u64("Event_Mask", "Mask", &mask, secret: false, HCIShow.h64)
        }
    }

    /// Reset (7.3.2).
    public struct Reset: HCIDeclaredCommand {
        public static let declaration = HCICommandDeclaration(0x0C03, "Reset")
        public init() {}
        public mutating func fields(_ f: inout some HCIFieldWalker) throws {}
    }

    /// Read Local Version Information (7.4.1).
    public struct ReadLocalVersion: HCIDeclaredCommand {
        public static let declaration = HCICommandDeclaration(0x1001, "Read Local Version Information")
        public static var returnParameters: (any HCIReturnParameters.Type)? { LocalVersion.self }
        public init() {}
        public mutating func fields(_ f: inout some HCIFieldWalker) throws {}
    }

    /// Read Local Supported Commands (7.4.2): 64 octets of command bits.
    public struct ReadLocalSupportedCommands: HCIDeclaredCommand {
        public static let declaration = HCICommandDeclaration(0x1002, "Read Local Supported Commands")
        public init() {}
        public mutating func fields(_ f: inout some HCIFieldWalker) throws {}
    }

    /// Read Local Supported Features (7.4.3): 8 octets of LMP feature bits.
    public struct ReadLocalSupportedFeatures: HCIDeclaredCommand {
        public static let declaration = HCICommandDeclaration(0x1003, "Read Local Supported Features")
        public init() {}
        public mutating func fields(_ f: inout some HCIFieldWalker) throws {}
    }

    /// Read Buffer Size (7.4.5).
    public struct ReadBufferSize: HCIDeclaredCommand {
        public static let declaration = HCICommandDeclaration(0x1005, "Read Buffer Size")
        public static var returnParameters: (any HCIReturnParameters.Type)? { BufferSize.BREDR.self }
        public init() {}
        public mutating func fields(_ f: inout some HCIFieldWalker) throws {}
    }

    /// Read BD_ADDR (7.4.6).
    public struct ReadBDADDR: HCIDeclaredCommand {
        public static let declaration = HCICommandDeclaration(0x1009, "Read BD_ADDR")
        public static var returnParameters: (any HCIReturnParameters.Type)? { Return.self }
        public init() {}
        public mutating func fields(_ f: inout some HCIFieldWalker) throws {}

        /// The controller's public address.
        public struct Return: HCIReturnParameters {
            public var address = BDAddress(wire: [0, 0, 0, 0, 0, 0])
            public init() {}
            public mutating func fields(_ f: inout some HCIFieldWalker) throws {
                try f.address("BD_ADDR", "Address", &address) { "\($0)" }
            }
        }
    }

    /// Read RSSI (7.5.4): of a connection.
    public struct ReadRSSI: HCIDeclaredCommand {
        public static let declaration = HCICommandDeclaration(0x1405, "Read RSSI")
        public var handle: UInt16 = 0
        public init() {}
        public mutating func fields(_ f: inout some HCIFieldWalker) throws { try f.u16("Connection_Handle", "Handle", &handle) }
    }

    // MARK: LE controller commands without parameters, and the event masks

    /// LE Set Event Mask (7.8.1).
    public struct LESetEventMask: HCIDeclaredCommand {
        public static let declaration = HCICommandDeclaration(0x2001, "LE Set Event Mask")
        public var mask: UInt64
        public init(mask: UInt64) { self.mask = mask }
        public init() { self.init(mask: 0) }
        public mutating func fields(_ f: inout some HCIFieldWalker) throws {
            try f.u64("LE_Event_Mask", "Mask", &mask, secret: false, HCIShow.h64)
        }
    }

    /// LE Read Buffer Size (7.8.2).
    public struct LEReadBufferSize: HCIDeclaredCommand {
        public static let declaration = HCICommandDeclaration(0x2002, "LE Read Buffer Size")
        public static var returnParameters: (any HCIReturnParameters.Type)? { BufferSize.LE.self }
        public init() {}
        public mutating func fields(_ f: inout some HCIFieldWalker) throws {}
    }

    /// LE Read Local Supported Features (7.8.3): 8 octets of LE feature bits.
    public struct LEReadLocalSupportedFeatures: HCIDeclaredCommand {
        public static let declaration = HCICommandDeclaration(0x2003, "LE Read Local Supported Features")
        public init() {}
        public mutating func fields(_ f: inout some HCIFieldWalker) throws {}
    }

    /// LE Set Random Address (7.8.4).
    public struct LESetRandomAddress: HCIDeclaredCommand {
        public static let declaration = HCICommandDeclaration(0x2005, "LE Set Random Address")
        public var address: BDAddress
        public init(address: BDAddress) { self.address = address }
        public init() { self.init(address: BDAddress(wire: [0, 0, 0, 0, 0, 0])) }
        public mutating func fields(_ f: inout some HCIFieldWalker) throws {
            try f.address("Random_Address", "Address", &address) { "\($0) (\($0.randomAddressKind))" }
        }
    }

    /// LE Create Connection Cancel (7.8.13).
    public struct LECreateConnectionCancel: HCIDeclaredCommand {
        public static let declaration = HCICommandDeclaration(0x200E, "LE Create Connection Cancel")
        public init() {}
        public mutating func fields(_ f: inout some HCIFieldWalker) throws {}
    }
}

/// Event mask bits this host asks for (Core Vol 4 Part E 7.3.1 and 7.8.1).
public enum EventMasks {
    /// Disconnection Complete (bit 4), Encryption Change (7), Read Remote Version Complete (11),
    /// Hardware Error (15), Data Buffer Overflow (25), Encryption Key Refresh (47), LE Meta (61).
    public static let standard: UInt64 = (1 << 4) | (1 << 7) | (1 << 11) | (1 << 15) | (1 << 25) | (1 << 47) | (1 << 61)
    /// LE Connection Complete (0), Advertising Report (1), Connection Update Complete (2),
    /// Remote Features (3), Long Term Key Request (4), Data Length Change (6), Enhanced
    /// Connection Complete (9), PHY Update Complete (11), Extended Advertising Report (12),
    /// Channel Selection Algorithm (19). Long Term Key Request is in the controller's
    /// default mask (0x1F) too: a controller that honours the mask answers a central's
    /// encryption with a negative reply itself when it is off (Zephyr's does), so the
    /// peripheral role (`attled serve`) could never encrypt.
    public static let le: UInt64 = {
        // Bit by bit: Swift 6.0's type checker gives up on one ten-term expression.
        let bits: [UInt64] = [0, 1, 2, 3, 4, 6, 9, 11, 12, 19]
        return bits.reduce(UInt64(0)) { $0 | (UInt64(1) << $1) }
    }()
}
