import BLEWire

/// An HCI command opcode: OGF (6 bits) and OCF (10 bits) (Core Vol 4 Part E 5.4.1).
/// Open: any opcode parses and prints. Names come from the declarations (`HCI.commands`).
public struct HCIOpcode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt16
    /// Any 16-bit opcode, including undeclared ones.
    public init(rawValue: UInt16) { self.rawValue = rawValue }
    /// Packs an opcode group field (upper 6 bits) and command field (lower 10 bits; extra bits are masked off).
    public init(ogf: UInt16, ocf: UInt16) { rawValue = ogf << 10 | (ocf & 0x3FF) }
    public var ogf: UInt16 { rawValue >> 10 }
    public var ocf: UInt16 { rawValue & 0x3FF }

    public var name: String { HCI.commandTable[rawValue]?.declaration.name ?? (ogf == 0x3F ? "Vendor Command" : "Unknown Command") }
    public var description: String { "\(name) (0x\(Hex.int(rawValue, width: 4)))" }

    // The opcodes attled's code names, each its declaration's.
    public static let disconnect = HCI.Disconnect.opcode
    public static let setEventMask = HCI.SetEventMask.opcode
    public static let reset = HCI.Reset.opcode
    public static let readLocalVersion = HCI.ReadLocalVersion.opcode
    public static let readLocalSupportedCommands = HCI.ReadLocalSupportedCommands.opcode
    public static let readLocalSupportedFeatures = HCI.ReadLocalSupportedFeatures.opcode
    public static let readBufferSize = HCI.ReadBufferSize.opcode
    public static let readBDADDR = HCI.ReadBDADDR.opcode
    public static let leSetEventMask = HCI.LESetEventMask.opcode
    public static let leReadBufferSize = HCI.LEReadBufferSize.opcode
    public static let leReadLocalSupportedFeatures = HCI.LEReadLocalSupportedFeatures.opcode
    public static let leSetRandomAddress = HCI.LESetRandomAddress.opcode
    public static let leSetAdvertisingParameters = HCI.LESetAdvertisingParameters.opcode
    public static let leSetAdvertisingData = HCI.LESetAdvertisingData.opcode
    public static let leSetScanResponseData = HCI.LESetScanResponseData.opcode
    public static let leSetAdvertisingEnable = HCI.LESetAdvertisingEnable.opcode
    public static let leSetScanParameters = LEScanParameters.opcode
    public static let leSetScanEnable = HCI.LESetScanEnable.opcode
    public static let leCreateConnection = LECreateConnection.opcode
    public static let leCreateConnectionCancel = HCI.LECreateConnectionCancel.opcode
    public static let leReadFilterAcceptListSize = HCI.LEReadFilterAcceptListSize.opcode
    public static let leClearFilterAcceptList = HCI.LEClearFilterAcceptList.opcode
    public static let leAddDeviceToFilterAcceptList = HCI.LEAddDeviceToFilterAcceptList.opcode
    public static let leRemoveDeviceFromFilterAcceptList = HCI.LERemoveDeviceFromFilterAcceptList.opcode
    public static let leConnectionUpdate = LEConnectionUpdate.opcode
    public static let leReadRemoteFeatures = HCI.LEReadRemoteFeatures.opcode
    public static let leEnableEncryption = HCI.LEEnableEncryption.opcode
    public static let leLongTermKeyRequestReply = HCI.LELongTermKeyRequestReply.opcode
    public static let leLongTermKeyRequestNegativeReply = HCI.LELongTermKeyRequestNegativeReply.opcode
    public static let leReadSupportedStates = HCI.LEReadSupportedStates.opcode
    public static let leSetDataLength = HCI.LESetDataLength.opcode
    public static let leSetPHY = HCI.LESetPHY.opcode
    public static let leSetExtendedScanParameters = HCI.LESetExtendedScanParameters.opcode
    public static let leSetExtendedScanEnable = HCI.LESetExtendedScanEnable.opcode
    public static let leExtendedCreateConnection = HCI.LEExtendedCreateConnection.opcode
    public static let leSetAdvertisingSetRandomAddress = HCI.LESetAdvertisingSetRandomAddress.opcode
    public static let leSetExtendedAdvertisingParameters = HCI.LESetExtendedAdvertisingParameters.opcode
    public static let leSetExtendedAdvertisingData = HCI.LESetExtendedAdvertisingData.opcode
    public static let leSetExtendedScanResponseData = HCI.LESetExtendedScanResponseData.opcode
    public static let leSetExtendedAdvertisingEnable = HCI.LESetExtendedAdvertisingEnable.opcode
    public static let leRemoveAdvertisingSet = HCI.LERemoveAdvertisingSet.opcode
}
