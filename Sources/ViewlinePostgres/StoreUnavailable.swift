import PostgresNIO
import ViewlineKit

/// The database cannot be reached right now (down, restarting, unreachable): the
/// command that needed it fails with this; the next ones work again once it is back.
public struct StoreUnavailable: ProtocolErrorConvertible, CustomStringConvertible {
    /// The database that could not be reached.
    public let url: PostgresURL
    /// Why: the connection error, the deadline passed, or the server shutting down.
    public let underlying: any Error

    package init(url: PostgresURL, underlying: any Error) {
        self.url = url
        self.underlying = underlying
    }

    public var description: String {
        "the database at \(url.redacted) is unavailable (\(Self.reason(underlying)))"
    }

    /// `unavailable`, with the reason but not the URL (which names the database host).
    public var protocolError: ProtocolError {
        ProtocolError(.unavailable, "the database is unavailable (\(Self.reason(underlying))); try again")
    }

    private static func reason(_ error: any Error) -> String {
        guard let error = error as? PSQLError else { return "\(error)" }
        if let message = error.serverInfo?[.message] { return message }
        if let underlying = error.underlying { return "\(underlying)" }
        return "\(error.code)"
    }
}
