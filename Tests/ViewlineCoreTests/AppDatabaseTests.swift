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

    @Test func usesWAL() async throws {
        let (database, _) = try temporaryDatabase()
        let mode = try await database.writer.read { db in try String.fetchOne(db, sql: "PRAGMA journal_mode") }
        #expect(mode == "wal")
    }
}
