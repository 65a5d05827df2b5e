/// A one-byte code the peer sends (an opcode, a status, an error code, a
/// reason): an open struct, so any byte survives decoding, printable by its
/// name. The declaration walkers of ATT, HCI and SMP read, write and print
/// their `code` fields through it.
public protocol ByteCode: CustomStringConvertible {
    var rawValue: UInt8 { get }
    init(rawValue: UInt8)
}
