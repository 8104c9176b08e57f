import Foundation
import Logging
import ServiceLifecycle
import Testing
import ViewlineApps
import ViewlineKit
import ViewlinePersistence
import ViewlineTestSupport

/// Shutdown races, driven in process so they can be repeated quickly: a client
/// leaving while the server shuts down, and shutdown asked for twice at once. A
/// debug build traps if the event loops stop while a `bye` is still being written.
@Suite struct InProcessShutdownTests {
    func startServer(maximumOutputBytes: Int = 1 << 20, drainTimeout: Duration = .seconds(10)) async throws -> (ViewlineServer, Task<Void, any Error>)
    {
        var configuration = ServerConfiguration()
        configuration.port = 0
        configuration.drainTimeout = drainTimeout
        configuration.maximumOutputBytes = maximumOutputBytes
        var apps = SeedApps.Configuration()
        apps.demoUsers = true
        let faults = FaultInjector()
        let server = try ViewlineServer(
            apps: SeedApps.all, services: try await SeedApps.liveServices(apps, store: SQLiteStore.inMemory(), faults: faults), faults: faults,
            configuration: configuration, logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }))
        let running = Task { try await server.run() }
        _ = try await server.listeningAddress
        return (server, running)
    }

    @Test(.timeLimit(.minutes(1))) func aClientLeavingDuringShutdownAndTwoShutdownsAtOnce() async throws {
        for _ in 0..<25 {
            let (server, running) = try await startServer()
            var leaving: LineClient? = try LineClient(port: server.localAddress.port)
            let staying = try LineClient(port: server.localAddress.port)
            #expect(try leaving?.command("ping").isOK == true)
            #expect(try staying.command("ping").isOK)
            leaving = nil  // closes its socket while the server starts shutting down
            async let first: Void = server.shutdown()
            async let second: Void = server.shutdown(reason: "again")
            _ = await (first, second)
            try await running.value
            // Exactly one of the two shutdowns says bye, whichever came first.
            let byes = try staying.read { $0.type == "bye" }.filter { $0.type == "bye" }
            #expect(byes.count == 1)
            #expect(["server shutting down", "again"].contains(byes.first?["reason"]?.stringValue ?? ""))
            #expect(try staying.isClosedByPeer())
            await server.shutdown()  // after the end: nothing left to do
        }
    }

    @Test(.timeLimit(.minutes(1))) func aClientThatStoppedReadingCannotHoldShutdownUp() async throws {
        let (server, running) = try await startServer(maximumOutputBytes: 256 << 20, drainTimeout: .seconds(4))
        let stalled = try LineClient(port: server.localAddress.port)
        _ = try stalled.next()
        // 15 MB of `help` replies it never reads: under the cut-off (256 MiB here),
        // over what the socket buffers take.
        try stalled.sendRaw(Array(String(repeating: "help\n", count: 3000).utf8))
        try await Task.sleep(for: .milliseconds(500))
        let started = ContinuousClock.now
        await server.shutdown()
        try await running.value
        // The drain (4 s here) and one bye timeout (2 s) at most, however much it left
        // unread; a debug build beside other suites may spend the whole drain on its
        // 3,000 commands. Bounded, not timed: a client that could hold shutdown up
        // would hold it past the test's minute, so the bound leaves a loaded machine
        // five times the 6 s.
        #expect(ContinuousClock.now - started < .seconds(30))
    }
}

/// A remote draft store that ignores cancellation, as a database call that ends only
/// at its own deadline does: each call returns a minute after it began.
private struct DeafRemoteStore: RemoteDraftStore {
    func save(user: String, text: String) async throws -> SavedDraft {
        await Self.aMinute()
        return SavedDraft(user: user, text: text, savedAt: Date())
    }
    func saved(user: String) async throws -> [SavedDraft] {
        await Self.aMinute()
        return []
    }
    static func aMinute() async {
        await withCheckedContinuation { continuation in
            DispatchQueue.global().asyncAfter(deadline: .now() + 60) { continuation.resume() }
        }
    }
}

@Suite struct ShutdownBoundTests {
    @Test(.timeLimit(.minutes(2))) func aCommandAwaitingACallThatIgnoresCancellationDoesNotHoldShutdownUp() async throws {
        var configuration = ServerConfiguration()
        configuration.port = 0
        configuration.drainTimeout = .seconds(1)
        var apps = SeedApps.Configuration()
        apps.demoUsers = true
        let faults = FaultInjector()
        var services = try await SeedApps.liveServices(apps, store: SQLiteStore.inMemory(), faults: faults)
        services.remoteStore = DeafRemoteStore()
        let server = try ViewlineServer(
            apps: SeedApps.all, services: services, faults: faults, configuration: configuration,
            logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }))
        let running = Task { try await server.run() }
        let port = try await server.listeningAddress.port
        // The client's blocking reads run on a thread of their own: the in-process
        // server's tasks need the cooperative pool (two threads on a 2-core machine).
        let client = try await onItsOwnThread {
            let client = HandedOver(try LineClient(port: port))
            _ = try client.value.next()
            return client
        }
        let loggedIn = try await onItsOwnThread { try client.value.command("login alice wonderland", timeout: .seconds(60)).isOK }
        #expect(loggedIn)
        try await onItsOwnThread { try client.value.send("saved") }  // its reply waits a minute on the store
        try await Task.sleep(for: .milliseconds(200))
        let started = ContinuousClock.now
        await server.shutdown()
        try await running.value
        // `saved` is answered `unavailable` before the bye, and its connection is not
        // waited for past the drain (1 s), the bye (2 s) and the connections' last
        // work (2 s), not the store's minute: bounded, not timed (a loaded machine
        // gets five times that).
        let replies = try await onItsOwnThread { HandedOver(try client.value.read { $0.type == "bye" }) }.value
        #expect(replies.contains { $0.type == "reply" && $0["error"]?["code"]?.stringValue == "unavailable" })
        #expect(ContinuousClock.now - started < .seconds(25))
    }
}

/// The server as a swift-service-lifecycle `Service`: a `ServiceGroup`'s graceful
/// shutdown (what SIGTERM does to a group), or cancelling the task that runs it,
/// drains it and says `bye` to every client.
@Suite struct ServiceGroupTests {
    let logger = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })

    func makeServer(port: Int = 0) throws -> ViewlineServer {
        var configuration = ServerConfiguration()
        configuration.port = port
        return try ViewlineServer(
            apps: [Search.self],
            services: {
                var services = Services()
                services.places = PlacesServiceLive(latency: .zero)
                return services
            }(), configuration: configuration, logger: logger)
    }

    @Test(.timeLimit(.minutes(1))) func aGroupsGracefulShutdownTellsEveryClientByeAndEndsTheGroup() async throws {
        let server = try makeServer()
        let group = ServiceGroup(configuration: .init(services: [.init(service: server)], logger: logger))
        let running = Task { try await group.run() }
        let client = try LineClient(port: try await server.listeningAddress.port)
        #expect(try client.command("search thai").isOK)
        await group.triggerGracefulShutdown()
        try await running.value
        #expect(try client.read { $0.type == "bye" }.last?["code"]?.stringValue == "shutdown")
        #expect(try client.isClosedByPeer())
    }

    @Test(.timeLimit(.minutes(1))) func cancellingTheTaskThatRunsItShutsItDown() async throws {
        let server = try makeServer()
        let running = Task { try await server.run() }
        let client = try LineClient(port: try await server.listeningAddress.port)
        #expect(try client.command("ping").isOK)
        running.cancel()
        try await running.value
        #expect(try client.read { $0.type == "bye" }.last?["code"]?.stringValue == "shutdown")
        #expect(try client.isClosedByPeer())
    }

    @Test(.timeLimit(.minutes(1))) func makingAServerBindsNothingRunBindsAndSaysWhyItCouldNot() async throws {
        let first = try makeServer()
        let firstRunning = Task { try await first.run() }
        let port = try await first.listeningAddress.port
        // Another server for the same port is made (nothing is bound yet)...
        let second = try makeServer(port: port)
        #expect(second.localAddress.port == port && second.connectionCount == 0)
        // ...and its `run` says the port is taken, as does its `listeningAddress`.
        await #expect(throws: (any Error).self) { try await second.run() }
        await #expect(throws: (any Error).self) { _ = try await second.listeningAddress }
        // The first one still serves.
        let client = try LineClient(port: port)
        #expect(try client.command("ping").isOK)
        firstRunning.cancel()
        try await firstRunning.value
    }

    @Test(.timeLimit(.minutes(1))) func aServerShutDownBeforeItRanNeverListens() async throws {
        let server = try makeServer()
        await server.shutdown()
        await #expect(throws: ViewlineServer.ConfigurationError.self) { try await server.run() }
        await #expect(throws: ViewlineServer.ConfigurationError.self) { _ = try await server.listeningAddress }
    }
}
