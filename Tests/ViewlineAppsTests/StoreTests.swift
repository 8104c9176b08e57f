import Foundation
import Testing
import ViewlinePersistence

/// What every ``AppStore`` must do, run against SQLite and PostgreSQL alike: the
/// seed apps see no difference between them.
@Suite struct StoreTests {
    let ada = Contact(name: "Ada", phone: "1", address: "x")

    @Test(arguments: StoreEngine.allCases) func draftsSurviveReopening(_ engine: StoreEngine) async throws {
        let (store, reopen, _) = try await engine.makeStore()
        try await store.setDraft(user: "alice", text: "keep me", at: Date())
        let reopened = try await reopen()
        #expect(try await reopened.pendingDraft(user: "alice")?.text == "keep me")
        #expect(try await reopened.pendingDraft(user: "bob") == nil)
    }

    @Test(arguments: StoreEngine.allCases) func concurrentDraftsAreAllDurable(_ engine: StoreEngine) async throws {
        // Many sessions writing at once (SQLite commits them in groups): every write
        // that returned is there after reopening, and the last text of a user wins.
        let (store, reopen, _) = try await engine.makeStore()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for user in 0..<200 {
                group.addTask { try await store.setDraft(user: "user\(user)", text: "draft \(user)", at: Date()) }
            }
            try await group.waitForAll()
        }
        for round in 1...3 { try await store.setDraft(user: "user7", text: "round \(round)", at: Date()) }
        let reopened = try await reopen()
        for user in 0..<200 where user != 7 {
            #expect(try await reopened.pendingDraft(user: "user\(user)")?.text == "draft \(user)")
        }
        #expect(try await reopened.pendingDraft(user: "user7")?.text == "round 3")
    }

    @Test(arguments: StoreEngine.allCases) func aNewDraftReplacesTheOld(_ engine: StoreEngine) async throws {
        let (store, _, _) = try await engine.makeStore()
        try await store.setDraft(user: "alice", text: "one", at: Date())
        try await store.setDraft(user: "alice", text: "two", at: Date())
        #expect(try await store.pendingDraft(user: "alice")?.text == "two")
    }

    @Test(arguments: StoreEngine.allCases) func deletingOnlyIfTheTextIsUnchanged(_ engine: StoreEngine) async throws {
        let (store, _, _) = try await engine.makeStore()
        try await store.setDraft(user: "alice", text: "new", at: Date())
        #expect(try await store.deleteDraft(user: "alice", ifText: "old") == false)
        #expect(try await store.deleteDraft(user: "alice", ifText: "new") == true)
        #expect(try await store.deleteDraft(user: "alice") == false)
        #expect(try await store.pendingDraft(user: "alice") == nil)
    }

    @Test(arguments: StoreEngine.allCases) func savedDraftsComeNewestFirstPerUser(_ engine: StoreEngine) async throws {
        let (store, _, _) = try await engine.makeStore()
        let start = Date(timeIntervalSince1970: 1_700_000_000)
        let first = try await store.insertSavedDraft(user: "alice", text: "first", at: start)
        _ = try await store.insertSavedDraft(user: "alice", text: "second", at: start.addingTimeInterval(60))
        _ = try await store.insertSavedDraft(user: "bob", text: "bob's", at: start)
        #expect(first.id != nil)
        let saved = try await store.savedDrafts(user: "alice")
        #expect(saved.map(\.text) == ["second", "first"])
        #expect(saved.last?.savedAt == start)
    }

    @Test(arguments: StoreEngine.allCases) func aUserKeepsOnlyTheNewestHundredSavedDrafts(_ engine: StoreEngine) async throws {
        let (store, _, _) = try await engine.makeStore()
        let start = Date(timeIntervalSince1970: 1_700_000_000)
        for n in 0..<(SavedDraft.maximumPerUser + 5) {
            _ = try await store.insertSavedDraft(user: "alice", text: "d\(n)", at: start.addingTimeInterval(Double(n)))
        }
        _ = try await store.insertSavedDraft(user: "bob", text: "bob's", at: start)
        let saved = try await store.savedDrafts(user: "alice")
        #expect(saved.count == SavedDraft.maximumPerUser)
        #expect(saved.first?.text == "d104" && saved.last?.text == "d5")
        #expect(try await store.savedDrafts(user: "bob").count == 1, "another user's drafts are not touched")
    }

    @Test(arguments: StoreEngine.allCases) func usersKeepTheirLatestHash(_ engine: StoreEngine) async throws {
        let (store, reopen, _) = try await engine.makeStore()
        try await store.storeUser("alice", passwordHash: "$y$old")
        try await store.storeUser("alice", passwordHash: "$y$new")
        try await store.storeUser("bob", passwordHash: "$y$bob")
        #expect(try await reopen().passwordHashes() == ["alice": "$y$new", "bob": "$y$bob"])
    }

    @Test(arguments: StoreEngine.allCases) func contactsApplyOnlyWhenTheDocumentChanges(_ engine: StoreEngine) async throws {
        let (store, _, _) = try await engine.makeStore()
        #expect(try await store.applyContacts([ada], document: "[1]", source: "s", at: Date()))
        #expect(try await !store.applyContacts([ada], document: "[1]", source: "s", at: Date()))
        #expect(try await store.contacts() == [ada])
        let alan = Contact(name: "Alan", phone: "2", address: "y")
        #expect(try await store.applyContacts([alan, ada], document: "[2]", source: "s", at: Date()))
        #expect(try await store.contacts() == [ada, alan])  // by name
        #expect(try await store.applyContacts([], document: "[]", source: "s", at: Date()))
        #expect(try await store.contacts() == [])
    }

    @Test(arguments: StoreEngine.allCases) func everyChangeToTheContactsTableBumpsItsVersion(_ engine: StoreEngine) async throws {
        let (store, _, _) = try await engine.makeStore()
        let start = try await store.contactsSnapshot()
        #expect(start == ContactsSnapshot(version: 0, items: []))
        try await store.applyContacts([ada], document: "[1]", source: "s", at: Date())
        let afterSync = try await store.contactsSnapshot()
        #expect(afterSync.version > start.version && afterSync.items == [ada])
        try await store.updatePhone(name: "Ada", phone: "2")  // a writer that is not the sync
        let afterEdit = try await store.contactsSnapshot()
        #expect(afterEdit.version > afterSync.version && afterEdit.items.first?.phone == "2")
    }

    @Test(arguments: StoreEngine.allCases) func theObservationSeesEveryWriterInOrder(_ engine: StoreEngine) async throws {
        let (store, _, other) = try await engine.makeStore()
        var snapshots = store.observeContacts().makeAsyncIterator()
        var seen = [try await snapshots.next()]
        #expect(seen.last??.items == [])
        try await other.applyContacts([ada], document: "[1]", source: "s", at: Date())
        while seen.last??.items == [] { seen.append(try await snapshots.next()) }
        #expect(seen.last??.items == [ada])
        try await other.updatePhone(name: "Ada", phone: "9")
        while seen.last??.items.first?.phone == "1" { seen.append(try await snapshots.next()) }
        #expect(seen.last??.items.first?.phone == "9")
        let versions = seen.compactMap { $0?.version }
        #expect(versions == versions.sorted() && Set(versions).count == versions.count)
    }

    @Test(arguments: StoreEngine.allCases) func aSingleFlightRunReturnsItsResult(_ engine: StoreEngine) async throws {
        let (store, _, _) = try await engine.makeStore()
        #expect(try await store.singleFlight("job") { true } == true)
        #expect(try await store.singleFlight("job") { false } == false)  // runs after the last one: a run of its own
        await #expect(throws: SomeFailure.self) { try await store.singleFlight("job") { throw SomeFailure() } }
        #expect(try await store.singleFlight("job") { true } == true)  // a failed run released the job
    }

    struct SomeFailure: Error {}
}
