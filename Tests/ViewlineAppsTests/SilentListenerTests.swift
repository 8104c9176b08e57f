import Foundation
import Testing
import ViewlineAppsPostgres
import ViewlinePersistence
import ViewlinePostgres
import ViewlineTestSupport

/// The contacts listener hears nothing on a silent link, and would miss every change
/// for good: its connection is probed, so a silent one is replaced and the table read
/// again within seconds.
@Suite(.timeLimit(.minutes(1))) struct SilentListenerTests {
    @Test func aListenerWhoseLinkGoesSilentHearsTheNextChangeWithinSeconds() async throws {
        let server = PostgresServer.shared
        let database = try await server.createDatabase()
        let direct = try PostgresURL(server.url(database: database))
        let writer = try await PostgresStore.connect(direct)
        let proxy = try TCPProxy(to: server.port)
        let proxied = try PostgresURL("postgres://postgres@127.0.0.1:\(proxy.port)/\(database)?sslmode=disable")
        let store = try await PostgresStore.connect(proxied, operationTimeout: .seconds(1))
        var snapshots = store.observeContacts().makeAsyncIterator()
        #expect(try await snapshots.next()?.items == [])
        proxy.silence()
        let ada = Contact(name: "Ada", phone: "1", address: "London")
        try await writer.applyContacts([ada], document: "[ada]", source: "s", at: Date())
        let start = ContinuousClock.now
        #expect(try await snapshots.next()?.items == [ada])
        #expect(ContinuousClock.now - start < .seconds(15))
    }
}
