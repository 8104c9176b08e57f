import NIOCore

/// What wraps every accepted connection (line and web listeners) before the server
/// reads it: TLS, as the `ViewlineTLS` product provides it.
///
/// ViewlineKit itself carries no TLS library, so a package that serves plain TCP
/// (behind a TLS-terminating proxy, or on loopback) never builds one; a server that
/// terminates TLS itself adds `ViewlineTLS` and sets ``ServerConfiguration/tls``:
///
/// ```swift
/// import ViewlineTLS
/// configuration.tls = try TLS(certificateChainFile: "cert.pem", privateKeyFile: "key.pem")
/// ```
public protocol TransportSecurity: Sendable {
    /// Adds the server side of the secure channel to a just-accepted connection's
    /// pipeline, before any of the server's handlers. Runs on the channel's event loop.
    func addServerHandlers(to pipeline: ChannelPipeline.SynchronousOperations) throws
}
