import Foundation

/// A self-signed certificate for 127.0.0.1 and localhost and its key, made at test
/// time with the openssl CLI, in a directory of their own.
public struct TestCertificate: Sendable {
    /// The certificate (PEM): what a client trusts as its CA file.
    public let certificate: String
    /// The private key (PEM).
    public let key: String

    public struct Failure: Error {}

    public static func make() throws -> TestCertificate {
        let directory = NSTemporaryDirectory() + "viewline-tls-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let certificate = directory + "/cert.pem", key = directory + "/key.pem"
        let openssl = Process()
        openssl.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        openssl.arguments = [
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", certificate, "-days", "1",
            "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
        ]
        openssl.standardError = FileHandle.nullDevice
        try openssl.run()
        openssl.waitUntilExit()
        guard openssl.terminationStatus == 0 else { throw Failure() }
        return TestCertificate(certificate: certificate, key: key)
    }
}
