import Foundation
import Testing
import ViewlineTestSupport

/// The server over TLS with a certificate made at test time (openssl CLI), driven
/// by the `viewline` client.
@Suite(.blocksItsThread) struct TLSTests {
    /// A self-signed certificate for 127.0.0.1 and localhost, and its key.
    static func makeCertificate() throws -> (certificate: String, key: String) {
        let made = try TestCertificate.make()
        return (made.certificate, made.key)
    }

    /// Runs `viewline` with `arguments` and `input` as its script; returns what it printed.
    static func client(_ arguments: [String], input: String) throws -> (output: String, status: Int32) {
        let process = Process()
        process.executableURL = ServerProcess.productsDirectory.appendingPathComponent("viewline")
        process.arguments = arguments
        process.environment = ["NO_COLOR": "1", "HOME": NSTemporaryDirectory()]
        let stdin = Pipe(), stdout = Pipe()
        process.standardInput = stdin
        process.standardOutput = stdout
        process.standardError = stdout
        try process.run()
        stdin.fileHandleForWriting.write(Data(input.utf8))
        try stdin.fileHandleForWriting.close()
        let output = String(decoding: stdout.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return (output, process.terminationStatus)
    }

    /// `openssl s_client` forced to one TLS version, sending `ping`: what it printed.
    static func openssl(version: String, port: Int) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        // SECLEVEL=0 lets the client offer the old versions at all (Debian's default refuses them).
        process.arguments = ["s_client", "-connect", "127.0.0.1:\(port)", "-\(version)", "-cipher", "DEFAULT:@SECLEVEL=0", "-quiet"]
        let stdin = Pipe(), stdout = Pipe()
        process.standardInput = stdin
        process.standardOutput = stdout
        process.standardError = stdout
        try process.run()
        // `quit` makes the server close the connection, which ends s_client.
        stdin.fileHandleForWriting.write(Data("ping\nquit\n".utf8))
        try stdin.fileHandleForWriting.close()
        let output = String(decoding: stdout.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return output
    }

    @Test func tls12IsTheOldestVersionAccepted() throws {
        let (certificate, key) = try Self.makeCertificate()
        let server = try startServer(["--tls-cert", certificate, "--tls-key", key])
        for old in ["tls1", "tls1_1"] {
            let output = try Self.openssl(version: old, port: server.port)
            #expect(!output.contains("welcome") && output.contains("protocol version"), "\(old): \(output)")
        }
        #expect(try Self.openssl(version: "tls1_2", port: server.port).contains("\"pong\":true"))
    }

    @Test func aFlowRunsOverTLSAndUntrustedCertificatesAreRefused() throws {
        let (certificate, key) = try Self.makeCertificate()
        let server = try startServer(["--tls-cert", certificate, "--tls-key", key])
        let port = String(server.port)
        let run = try Self.client(["--port", port, "--ca", certificate], input: "search pizza\nlogin alice wonderland\n")
        #expect(run.status == 0, "\(run.output)")
        #expect(run.output.contains("query: pizza 18 results"))
        #expect(run.output.contains("user: alice"))
        // Without trusting the certificate, the client refuses the server.
        let refused = try Self.client(["--port", port, "--tls"], input: "ping\n")
        #expect(refused.status != 0 && refused.output.contains("not trusted"))
        // A plain-text client gets no welcome, and the server goes on serving.
        let plain = try LineClient(port: server.port)
        try plain.send("ping")
        #expect((try? plain.next(timeout: .milliseconds(500))) == nil)
        #expect(try Self.client(["--port", port, "--ca", certificate], input: "ping\n").output.contains("pong"))
    }

    @Test func listeningBeyondLoopbackWithoutTLSWarns() throws {
        let log = temporaryPath("server.log")
        _ = try ServerProcess(["--db", ":memory:", "--host", "0.0.0.0"], logFile: log)
        usleep(100_000)
        let text = try String(contentsOfFile: log, encoding: .utf8)
        #expect(text.contains("without TLS"))
    }
}
