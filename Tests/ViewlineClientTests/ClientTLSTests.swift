import Foundation
import Testing
import ViewlineClient
import ViewlineTestSupport

/// The Swift client over TLS, against a certificate made at test time (openssl CLI).
@Suite struct ClientTLSTests {
    @Test func aSessionRunsOverVerifiedTLSAndAnUntrustedServerIsRefused() async throws {
        let made = try TestCertificate.make()
        let (certificate, key) = (made.certificate, made.key)
        let server = try ServerProcess(["--db", ":memory:", "--demo", "--tls-cert", certificate, "--tls-key", key])
        let client = try await ViewlineClient.connect(
            to: .tcp(host: "localhost", port: server.port), options: .init(tls: .init(caFile: certificate)))
        #expect(try await client.send("login alice wonderland")["user"] == "alice")
        await client.close()
        // The system's roots do not know this certificate: no session starts.
        await #expect(throws: (any Error).self) {
            _ = try await ViewlineClient.connect(to: .tcp(host: "localhost", port: server.port), options: .init(tls: .init()))
        }
    }
}
