/// This release of Viewline: the Swift package's version (CHANGELOG.md's headings,
/// the `v1.3.0` tag) and the server's name in `welcome` (`viewline/1.3`), which
/// PROTOCOL §9 maps to the protocol additions a client can use.
public enum ViewlineRelease {
    /// The package's semantic version.
    public static let version = "1.3.0"
    /// What a server says it is in `welcome.server` by default.
    public static let serverName = "viewline/1.3"
}
