import Foundation
import Logging
import Testing
import ViewlineApps
import ViewlineKit
import ViewlinePersistence
import ViewlineTestSupport

/// A connection's output backlog counts against its address's and the server's
/// output budgets only while the connection lives: however it ends, what it held
/// leaves the counts, or later clients would be cut off for output nobody holds.
@Suite struct OutputBacklogTests {
    func startServer() async throws -> (ViewlineServer, Task<Void, any Error>) {
        var configuration = ServerConfiguration()
        configuration.port = 0
        configuration.maximumOutputBytes = 256 << 20
        let faults = FaultInjector()
        let server = try ViewlineServer(
            apps: SeedApps.all,
            services: try await SeedApps.liveServices(SeedApps.Configuration(), store: SQLiteStore.inMemory(), faults: faults), faults: faults,
            configuration: configuration, logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }))
        let running = Task { try await server.run() }
        _ = try await server.listeningAddress
        return (server, running)
    }

    /// Polls `condition` for up to `seconds` (the loop counts and lets go on its own time).
    func eventually(_ seconds: Double = 10, _ condition: () -> Bool) async throws -> Bool {
        let deadline = ContinuousClock.now + .seconds(seconds)
        while ContinuousClock.now < deadline {
            if condition() { return true }
            try await Task.sleep(for: .milliseconds(20))
        }
        return condition()
    }

    @Test(.timeLimit(.minutes(1))) func aBackloggedConnectionThatEndsLeavesNothingCounted() async throws {
        let (server, running) = try await startServer()
        let counts = server.application.connections
        for ending in ["reset", "half-close, then reset"] {
            do {
                // `help` replies it never reads (about 12 KB each, 36 MB in all): past what
                // the socket buffers take, so the server holds a backlog for it.
                let stalled = try LineClient(port: server.localAddress.port, receiveBuffer: 2048)
                _ = try stalled.next()
                try stalled.sendRaw(Array(String(repeating: "help\n", count: 3000).utf8))
                #expect(try await eventually { counts.outputBacklog.connections == 1 }, "\(ending): a backlog is counted")
                if ending.hasPrefix("half-close") {
                    stalled.shutdownWrite()
                    try await Task.sleep(for: .milliseconds(300))
                }
            }  // closed with unread bytes: the kernel resets the connection
            #expect(try await eventually { counts.outputBacklog == (0, 0) }, "\(ending): \(counts.outputBacklog) left counted")
        }
        await server.shutdown()
        try await running.value
    }
}
