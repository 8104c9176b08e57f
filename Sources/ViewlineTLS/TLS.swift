import NIOCore
import NIOSSL
import ViewlineKit

/// TLS for a `ViewlineServer`'s listeners (PROTOCOL §1: TLS 1.2 or newer), over
/// SwiftNIO SSL. Set it as `ServerConfiguration.tls`: the line listener then takes
/// TLS connections and the web listener serves https and wss.
///
/// ```swift
/// var configuration = ServerConfiguration()
/// configuration.tls = try TLS(certificateChainFile: "cert.pem", privateKeyFile: "key.pem")
/// ```
public struct TLS: TransportSecurity {
    private let context: NIOSSLContext

    /// TLS from a PEM certificate chain (the server's certificate first) and its PEM
    /// private key.
    ///
    /// - Throws: when a file cannot be read or parsed, or the key does not suit the
    ///   certificate.
    public init(certificateChainFile: String, privateKeyFile: String) throws {
        let chain = try NIOSSLCertificate.fromPEMFile(certificateChainFile).map { NIOSSLCertificateSource.certificate($0) }
        let privateKey = try NIOSSLPrivateKey(file: privateKeyFile, format: .pem)
        var configuration = TLSConfiguration.makeServerConfiguration(certificateChain: chain, privateKey: .privateKey(privateKey))
        configuration.minimumTLSVersion = .tlsv12
        try self.init(configuration: configuration)
    }

    /// TLS from a configuration of your own (client certificates, ciphers, ALPN).
    public init(configuration: TLSConfiguration) throws {
        context = try NIOSSLContext(configuration: configuration)
    }

    public func addServerHandlers(to pipeline: ChannelPipeline.SynchronousOperations) throws {
        try pipeline.addHandler(NIOSSLServerHandler(context: context))
    }
}
