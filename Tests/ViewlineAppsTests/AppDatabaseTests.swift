import Foundation
import Testing
import ViewlinePersistence

/// The database on a temporary file, as the server uses it (pool, WAL).
@Suite struct AppDatabaseTests {
    func temporaryDatabase() throws -> (AppDatabase, String) {
        let path = NSTemporaryDirectory() + "viewline-test-\(UUID().uuidString).sqlite"
        return (try AppDatabase.open(path: path), path)
    }

    @Test func draftsSurviveReopening() async throws {
        let (database, path) = try temporaryDatabase()
        try await database.setDraft(user: "alice", text: "keep me", at: Date())
        let reopened = try AppDatabase.open(path: path)
        #expect(try await reopened.pendingDraft(user: "alice")?.text == "keep me")
        #expect(try await reopened.pendingDraft(user: "bob") == nil)
    }

    @Test func deletingOnlyIfTheTextIsUnchanged() async throws {
        let (database, _) = try temporaryDatabase()
        try await database.setDraft(user: "alice", text: "new", at: Date())
        #expect(try await database.deleteDraft(user: "alice", ifText: "old") == false)
        #expect(try await database.deleteDraft(user: "alice", ifText: "new") == true)
    }

    @Test func contactsApplyOnlyWhenTheDocumentChanges() async throws {
        let (database, _) = try temporaryDatabase()
        let ada = Contact(name: "Ada", phone: "1", address: "x")
        #expect(try await database.applyContacts([ada], document: "[1]", source: "s", at: Date()))
        #expect(try await !database.applyContacts([ada], document: "[1]", source: "s", at: Date()))
        #expect(try await database.contacts() == [ada])
    }

    @Test func everyChangeToTheContactsTableBumpsItsVersion() async throws {
        let (database, _) = try temporaryDatabase()
        let start = try await database.contactsSnapshot()
        #expect(start == ContactsSnapshot(version: 0, items: []))
        let ada = Contact(name: "Ada", phone: "1", address: "x")
        try await database.applyContacts([ada], document: "[1]", source: "s", at: Date())
        let afterSync = try await database.contactsSnapshot()
        #expect(afterSync.version > start.version && afterSync.items == [ada])
        try await database.updatePhone(name: "Ada", phone: "2")  // a writer that is not the sync
        let afterEdit = try await database.contactsSnapshot()
        #expect(afterEdit.version > afterSync.version && afterEdit.items.first?.phone == "2")
    }

    @Test func theObservationDeliversVersionedSnapshotsInOrder() async throws {
        let (database, _) = try temporaryDatabase()
        var snapshots = database.observeContacts().makeAsyncIterator()
        let first = try await snapshots.next()
        #expect(first?.items == [])
        try await database.applyContacts([Contact(name: "Ada", phone: "1", address: "x")], document: "[1]", source: "s", at: Date())
        var latest = first
        while latest?.items.isEmpty == true { latest = try await snapshots.next() }
        #expect(latest!.version > first!.version)
    }

    @Test func usesWAL() async throws {
        let (database, _) = try temporaryDatabase()
        let mode = try await database.writer.read { db in try String.fetchOne(db, sql: "PRAGMA journal_mode") }
        #expect(mode == "wal")
    }
}
