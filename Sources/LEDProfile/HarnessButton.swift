/// The harness's two buttons and the 1-byte commands that press and release
/// them (written to its command characteristic), shared by the gateway and
/// the terminal UI.
public enum HarnessButton: Int, Sendable, Equatable, CaseIterable {
    case one = 1, two = 2
    public var pressByte: UInt8 { self == .one ? 0x01 : 0x03 }
    public var releaseByte: UInt8 { self == .one ? 0x00 : 0x04 }
    /// Milliseconds between the press and the release.
    public static let holdMs = 400
}
