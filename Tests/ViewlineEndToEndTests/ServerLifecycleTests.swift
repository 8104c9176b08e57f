import Foundation
import Testing
import ViewlineProtocol
import ViewlineTestSupport

#if canImport(Glibc)
import Glibc
#endif

@Suite struct ServerLifecycleTests {
    @Test(arguments: [SIGTERM, SIGINT])
    func aSignalSaysByeToEveryClientAndExitsZero(_ signal: Int32) throws {
        let server = try startServer()
        let clients = try (0..<3).map { _ in try connect(server) }
        for client in clients { #expect(try client.command("ping").isOK) }
        server.signal(signal)
        for client in clients {
            let bye = try client.read { $0.type == "bye" }.last
            #expect(bye?["reason"] != nil)
            #expect(try client.isClosedByPeer())
        }
        #expect(try server.waitForExit() == 0)
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
