import Foundation
import Synchronization
import Testing
import ViewlineKit
import ViewlinePersistence
import ViewlinePostgres
import ViewlineAppsPostgres
import ViewlineTestSupport

/// Application writes made for a session of a cluster take effect only while the node
/// holds that session's lease by the database's clock (``SessionFence``), on a real
/// PostgreSQL: a node that lost the session while a write was on its way writes nothing.
@Suite struct PostgresFenceTests {
    let zombie = ClusterNode(id: "n-zombie", address: "127.0.0.1:1")
    let successor = ClusterNode(id: "n-successor", address: "127.0.0.1:2")
    let session = "0123456789abcdef"

    func cluster() async throws -> (store: PostgresStore, directory: PostgresSessionDirectory) {
        let server = PostgresServer.shared
        let url = try PostgresURL(server.url(database: try server.createDatabase()))
        return (try await PostgresStore.connect(url), try await PostgresSessionDirectory.connect(url))
    }

    func record(owner: ClusterNode) -> SessionRecord {
        SessionRecord(lookup: session, secretDigest: Array(repeating: 7, count: 32), owner: owner.id, snapshot: "{}")
    }

    /// Runs `write` as `node` acting for the session; says whether the fence was refused.
    func acting(
        as node: ClusterNode, nodeTimeout: Duration = .seconds(30), isHeld: Bool = true, _ write: () async throws -> Void
    ) async throws -> Bool {
        let refusals = Atomic(0)
        let fence = SessionFence(
            session: session, node: node.id, nodeTimeout: nodeTimeout, isHeld: { isHeld }, refused: { refusals.add(1, ordering: .relaxed) })
        do {
            try await SessionFence.$current.withValue(fence) { try await write() }
        } catch is SessionFenced {
            #expect(refusals.load(ordering: .relaxed) == 1, "a refusal is reported to the node once")
            return true
        }
        #expect(refusals.load(ordering: .relaxed) == 0)
        return false
    }

    @Test func aNodeWhoseSessionWasClaimedWritesNothingForIt() async throws {
        let (store, directory) = try await cluster()
        _ = try await directory.renewLease(zombie, nodeTimeout: .seconds(30), recordsExpireAfter: .seconds(86_400))
        _ = try await directory.save([record(owner: zombie)])
        #expect(try await !acting(as: zombie) { try await store.setDraft(user: "alice", text: "one", at: Date()) })

        // The zombie's lease lapses (a pause, a slow link) and the successor claims the session…
        try await Task.sleep(for: .milliseconds(300))
        _ = try await directory.renewLease(successor, nodeTimeout: .seconds(30), recordsExpireAfter: .seconds(86_400))
        #expect(try await directory.claim(lookup: session, from: zombie.id, for: successor, nodeTimeout: .milliseconds(200)) != nil)
        // …then the zombie renews and, by its own clock, still holds its lease: the
        // database refuses every write it makes for the session all the same.
        _ = try await directory.renewLease(zombie, nodeTimeout: .seconds(30), recordsExpireAfter: .seconds(86_400))
        #expect(try await acting(as: zombie) { try await store.setDraft(user: "alice", text: "stale", at: Date()) })
        #expect(try await acting(as: zombie) { _ = try await store.insertSavedDraft(user: "alice", text: "stale", at: Date()) })
        #expect(try await acting(as: zombie) { try await store.deleteDraft(user: "alice") })
        #expect(try await acting(as: zombie) { try await store.storeUser("mallory", passwordHash: "x") })
        #expect(try await store.pendingDraft(user: "alice")?.text == "one")
        #expect(try await store.savedDrafts(user: "alice").isEmpty)
        #expect(try await store.passwordHashes()["mallory"] == nil)

        // The owner writes as before.
        #expect(try await !acting(as: successor) { _ = try await store.insertSavedDraft(user: "alice", text: "one", at: Date()) })
        #expect(try await !acting(as: successor) { try await store.deleteDraft(user: "alice", ifText: "one") })
        #expect(try await store.savedDrafts(user: "alice").map(\.text) == ["one"])
        #expect(try await store.pendingDraft(user: "alice") == nil)
        // Outside any session's work (a single node, the server's own jobs) nothing is fenced.
        try await store.setDraft(user: "alice", text: "two", at: Date())
        #expect(try await store.pendingDraft(user: "alice")?.text == "two")
    }

    @Test func aLeaseExpiredByTheDatabasesClockWritesNothingEvenBeforeAClaim() async throws {
        let (store, directory) = try await cluster()
        _ = try await directory.renewLease(zombie, nodeTimeout: .seconds(30), recordsExpireAfter: .seconds(86_400))
        // No record yet: the node's own lease decides.
        #expect(try await !acting(as: zombie, nodeTimeout: .seconds(30)) { try await store.setDraft(user: "bob", text: "one", at: Date()) })
        try await Task.sleep(for: .milliseconds(300))
        #expect(try await acting(as: zombie, nodeTimeout: .milliseconds(200)) { try await store.setDraft(user: "bob", text: "late", at: Date()) })
        // A node that knows its lease lapsed refuses without asking the database.
        #expect(try await acting(as: zombie, isHeld: false) { try await store.setDraft(user: "bob", text: "late", at: Date()) })
        #expect(try await store.pendingDraft(user: "bob")?.text == "one")
    }
}
