import Foundation
import Testing
import ViewlineProtocol
import ViewlineTestSupport

#if canImport(Glibc)
    import Glibc
#endif

@Suite(.blocksItsThread) struct ServerLifecycleTests {
    @Test(arguments: [SIGTERM, SIGINT])
    func aSignalSaysByeToEveryClientAndExitsZero(_ signal: Int32) throws {
        let server = try startServer()
        let clients = try (0..<3).map { _ in try connect(server) }
        for client in clients { #expect(try client.command("ping").isOK) }
        server.signal(signal)
        for client in clients {
            // A loaded machine (the whole suite at once on 2 cores) may take seconds to drain.
            let bye = try client.read(until: { $0.type == "bye" }, timeout: .seconds(30)).last
            #expect(bye?["reason"] == "server shutting down")
            #expect(bye?["code"] == "shutdown")  // the session lives on: a client may resume it
            #expect(try client.isClosedByPeer())
        }
        #expect(try server.waitForExit() == 0)
    }

    /// The test harness holds each server's standard input open: a test process that
    /// crashes takes its servers with it instead of leaving them running.
    @Test func theEndOfStandardInputShutsTheServerDownAsSIGTERMDoes() throws {
        let server = try startServer()
        let client = try connect(server)
        #expect(try client.command("ping").isOK)
        server.endInput()
        let bye = try client.read(until: { $0.type == "bye" }, timeout: .seconds(30)).last
        #expect(bye?["code"] == "shutdown")
        #expect(try server.waitForExit(timeout: .seconds(30)) == 0)
    }

    @Test func aClientThatNeverReadsIsCutOffInsteadOfGrowingMemory() throws {
        let server = try startServer()
        let client = try connect(server)
        let other = try connect(server)
        // ~8000 help replies of ~4 KiB each, none of them read until the end.
        try client.sendRaw(Array(String(repeating: "help\n", count: 8000).utf8))
        #expect(try other.command("ping").isOK)  // others are unaffected meanwhile
        #expect(try client.isClosedByPeer(timeout: .seconds(60)))
        // Its backlog could not be sent, so it ends cut short, not with 8000 replies.
        #expect(client.received.count < 8000)
        #expect(try other.command("ping").isOK)
    }

    @Test func manyClientsAtOnceEachGetTheirOwnSession() throws {
        let server = try startServer()
        let clients = try (0..<40).map { _ in try LineClient(port: server.port) }
        var sessions = Set<String>()
        for client in clients { sessions.insert(try client.next()["session"]?.stringValue ?? "") }
        #expect(sessions.count == 40)
        for (index, client) in clients.enumerated() { try client.send("search q\(index)") }
        for client in clients { #expect(try client.read { $0.type == "reply" }.last?.isOK == true) }
    }
}

/// SIGTERM drains: not ready at once, what was sent before the signal is answered,
/// then `bye`.
@Suite(.blocksItsThread) struct DrainTests {
    @Test func everyCommandSentBeforeSIGTERMGetsItsReplyAndReadyzTurns503AtOnce() throws {
        let server = try startServer(["--metrics-port", "0", "--drain-seconds", "20"])
        let metrics = try #require(server.metricsPort)
        let client = try connect(server)
        // Log-ins hash a password each: 20 of them take a while to run.
        try client.sendRaw(Array(String(repeating: "login alice wonderland\n", count: 20).utf8))
        _ = try client.read(until: { $0.type == "reply" })  // the server is at it
        server.signal(SIGTERM)
        var readiness = 0
        let deadline = ContinuousClock.now + .seconds(5)
        while ContinuousClock.now < deadline {
            readiness = (try? WebSocketClient.get("/readyz", port: metrics).response.status) ?? 0
            if readiness == 503 { break }
        }
        #expect(readiness == 503)
        let rest = try client.read(until: { $0.type == "bye" }, timeout: .seconds(20))
        #expect(rest.filter { $0.type == "reply" && $0.isOK }.count == 19)
        #expect(rest.last?["reason"] == "server shutting down")
        #expect(try server.waitForExit() == 0)
    }
}
