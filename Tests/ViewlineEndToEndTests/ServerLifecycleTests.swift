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
