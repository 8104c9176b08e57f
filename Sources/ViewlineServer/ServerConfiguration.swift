import Foundation

/// Everything `viewline-server`'s flags set.
public struct ServerConfiguration: Sendable {
    public var host = "127.0.0.1"
    public var port = 7878
    public var admin = false
    /// Artificial latency of every built-in backend call.
    public var backendLatency: Duration = .zero
    public var maximumLineBytes = 64 * 1024
    public var databasePath = "viewline.sqlite"
    public var usersFile: String?
    public var tokenLifetime: TimeInterval = 3600
    public var remoteContactsFile: String?

    public init() {}
}
