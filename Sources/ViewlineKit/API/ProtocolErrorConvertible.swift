/// An error that knows how it crosses the wire: a command that throws it fails with
/// its ``protocolError`` (code and message) instead of `internal_error`. Conform the
/// errors of a store or backend whose failures a client should tell apart.
public protocol ProtocolErrorConvertible: Error {
    /// The code and message the client gets for this error.
    var protocolError: ProtocolError { get }
}
