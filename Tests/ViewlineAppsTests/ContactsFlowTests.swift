import Foundation
import Testing
import ViewlineApps
@testable import ViewlineKit
import ViewlinePersistence
import ViewlineTesting

@Suite struct ContactsFlowTests {
    let ada = Contact(name: "Ada", phone: "1", address: "London")
    let alan = Contact(name: "Alan", phone: "2", address: "Wilmslow")

    /// Opens the contacts view on `test`: it shows the database, syncing, then what
    /// the database holds once the sync ends.
    static func open(_ test: TestStore, showing before: [Contact], then after: [Contact]) async {
        await test.send("contacts", reply: ["accepted": true])
        await test.receive(Contacts.self) {
            $0.items = before
            $0.syncing = true
        }
        await test.receive(Contacts.self) {
            $0.items = after
            $0.syncing = false
        }
    }

    @Test func openingShowsTheDatabaseAndSyncFillsIt() async throws {
        let harness = try await TestHarness(contacts: [ada, alan])
        let test = harness.makeStore()
        await Self.open(test, showing: [], then: [ada, alan])
        #expect(try await harness.store.contacts() == [ada, alan])
        await test.finish()
    }

    @Test func theViewFollowsAnyChangeToTheTable() async throws {
        let harness = try await TestHarness(contacts: [ada])
        let test = harness.makeStore()
        await Self.open(test, showing: [], then: [ada])
        try await harness.store.updatePhone(name: "Ada", phone: "999")
        await test.receive(Contacts.self) { $0.items[0].phone = "999" }
        await test.finish()
    }

    @Test func aFailingSyncChangesNoRowAndShowsAnOKAlert() async throws {
        let harness = try await TestHarness(contacts: [ada])
        let test = harness.makeStore()
        await Self.open(test, showing: [], then: [ada])
        harness.contactsSource.set([alan])
        harness.contactsSource.fail(with: "remote unreachable")
        await test.send("sync", reply: ["accepted": true])
        await test.receive(Contacts.self) { $0.syncing = true }
        await test.receive(Contacts.self) { $0.syncing = false }  // still ada alone
        await test.receiveAlert(.error("Sync failed: remote unreachable"))
        #expect(try await harness.store.contacts() == [ada])
        // ...and still reacts to later changes.
        try await harness.store.updatePhone(name: "Ada", phone: "42")
        await test.receive(Contacts.self) { $0.items[0].phone = "42" }
        await test.finish()
    }

    @Test func everyOpenSessionSeesASyncsChanges() async throws {
        let harness = try await TestHarness(contacts: [ada])
        let first = harness.makeStore(id: "s1")
        let second = harness.makeStore(id: "s2")
        await Self.open(first, showing: [], then: [ada])
        await Self.open(second, showing: [ada], then: [ada])
        harness.contactsSource.set([ada, alan])
        await first.send("sync", reply: ["accepted": true])
        await first.receive(Contacts.self) { $0.syncing = true }
        await first.receive(Contacts.self) {
            $0.items = [ada, alan]
            $0.syncing = false
        }
        // The other session was not syncing: it follows the table.
        await second.receive(Contacts.self) { $0.items = [ada, alan] }
        await first.finish()
        await second.finish()
    }

    @Test func onlyOneSyncRunsAtATime() async throws {
        let harness = try await TestHarness(contacts: [ada])
        let first = harness.makeStore(id: "s1")
        let second = harness.makeStore(id: "s2")
        harness.contactsSource.hold(true)
        await first.send("sync", reply: ["accepted": true])
        await second.send("sync", reply: ["accepted": true])
        // Raw timing: the second sync gets time to reach the held fetch if it would.
        try await Task.sleep(for: .milliseconds(30))
        harness.contactsSource.hold(false)
        // Neither view was opened: the syncs display nothing; `finish` waits for them.
        await first.finish()
        await second.finish()
        #expect(harness.contactsSource.fetches == 1)
    }

    @Test func unchangedRemoteDataWritesNothing() async throws {
        let harness = try await TestHarness(contacts: [ada])
        #expect(try await harness.services.contactsSync.sync() == true)
        #expect(try await harness.services.contactsSync.sync() == false)
    }

    @Test func aLateObservationValueNeverTakesTheViewBack() {
        // A DatabasePool observation may deliver its first value after a newer direct read.
        var view = Contacts.State()
        let ada = Contact(name: "Ada", phone: "1", address: "x")
        let changed = [
            view.apply(ContactsSnapshot(version: 3, items: [ada])),
            view.apply(ContactsSnapshot(version: 0, items: [])),  // late: ignored
            view.apply(ContactsSnapshot(version: 3, items: [ada])),  // the same state again
        ]
        #expect(changed == [true, false, false])
        #expect(view.items == [ada])
        let emptied = view.apply(ContactsSnapshot(version: 4, items: []))
        #expect(emptied && view.items == [])
    }
}

/// A contacts view restored on another node follows the table again, an empty one
/// included: restoring went by the items shown, so a view opened on an empty table
/// was restored as never opened and stayed `[]` whatever the table held (#52).
@Suite struct RestoredContactsTests {
    @Test func anOpenedViewOfAnEmptyTableFollowsItAfterARestore() async throws {
        let harness = try await TestHarness(contacts: [])
        // Raw: the session is recorded and restored from its record, which TestStore cannot do.
        let (session, _) = harness.makeSession()
        await session.send("contacts")
        await session.send("wait")
        #expect(await session.state(Contacts.self).items.isEmpty)
        let record = try JSON.parse(await session.record)
        await session.close()
        let states = Session.readViews(record, application: harness.application).states
        let restored = await Session.restore(record, states: states, claimedAt: 100, token: session.token, application: harness.application)
        let recorder = MessageRecorder()
        await restored.connect(SessionConnection(send: recorder.output, close: {}), as: 1)
        let ada = Contact(name: "Ada", phone: "1", address: "London")
        try await harness.store.applyContacts([ada], document: "after-restore", source: "test", at: Date())
        try await recorder.waitUntil { _ in recorder.displays("contacts").last?["items"]?.arrayValue?.count == 1 }
    }

    @Test func aViewNeverOpenedIsNotFollowedAfterARestore() async throws {
        let harness = try await TestHarness(contacts: [])
        // Raw: the session is recorded and restored from its record, which TestStore cannot do.
        let (session, _) = harness.makeSession()
        await session.send("ping")
        let record = try JSON.parse(await session.record)
        let states = Session.readViews(record, application: harness.application).states
        let restored = await Session.restore(record, states: states, claimedAt: 100, token: session.token, application: harness.application)
        #expect(await !restored.hasDisplayed(Contacts.self))
        #expect(await !restored.state(Contacts.self).open)
    }
}
