/// The kind of a random device address, from its two most significant bits
/// (Core Vol 6 Part B 1.3.2): static (0b11), resolvable private (0b01),
/// non-resolvable private (0b00); 0b10 is reserved.
public enum RandomAddressKind: String, Sendable, CaseIterable, CustomStringConvertible {
    case `static`
    case resolvable
    case nonResolvable = "non-resolvable"
    case reserved

    /// "static", "resolvable", "non-resolvable", "reserved" (as traces print it).
    public var description: String { rawValue }
}

extension BDAddress {
    /// What kind of random address this is, read as one (the type byte says whether it is random).
    public var randomAddressKind: RandomAddressKind {
        switch bytes[5] >> 6 {
        case 0b11: return .static
        case 0b01: return .resolvable
        case 0b00: return .nonResolvable
        default: return .reserved
        }
    }
}
