/// attled's version: `attled --version`, the Home Assistant discovery
/// `origin`, the gateway's device entry, the Debian packages.
public enum AttledVersion {
    public static let string = "0.1.0"
}
