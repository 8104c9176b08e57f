import Foundation
import Testing
import ViewlineApps
@testable import ViewlineKit
import ViewlinePersistence
import ViewlineTesting

@Suite struct ContactsFlowTests {
    let ada = Contact(name: "Ada", phone: "1", address: "London")
    let alan = Contact(name: "Alan", phone: "2", address: "Wilmslow")

    @Test func openingShowsTheDatabaseAndSyncFillsIt() async throws {
        let harness = try await TestHarness(contacts: [ada, alan])
        let (session, recorder) = harness.makeSession()
        await session.send("contacts")
        await session.send("wait")
        let last = try #require(recorder.displays("contacts").last)
        #expect(last == ["items": [ada.json, alan.json], "syncing": false])
        #expect(try await harness.store.contacts() == [ada, alan])
    }

    @Test func theViewFollowsAnyChangeToTheTable() async throws {
        let harness = try await TestHarness(contacts: [ada])
        let (session, recorder) = harness.makeSession()
        await session.send("contacts")
        await session.send("wait")
        try await harness.store.updatePhone(name: "Ada", phone: "999")
        try await recorder.waitUntil { _ in recorder.displays("contacts").last?["items"]?.arrayValue?.first?["phone"] == "999" }
    }

    @Test func aFailingSyncChangesNoRowAndShowsAnOKAlert() async throws {
        let harness = try await TestHarness(contacts: [ada])
        let (session, recorder) = harness.makeSession()
        await session.send("contacts")
        await session.send("wait")
        harness.contactsSource.set([alan])
        harness.contactsSource.fail(with: "remote unreachable")
        await session.send("sync")
        await session.send("wait")
        #expect(try await harness.store.contacts() == [ada])
        #expect(recorder.alerts.map(\.content) == [.error("Sync failed: remote unreachable")])
        #expect(recorder.displays("contacts").last == ["items": [ada.json], "syncing": false])
        // ...and still reacts to later changes.
        try await harness.store.updatePhone(name: "Ada", phone: "42")
        try await recorder.waitUntil { _ in recorder.displays("contacts").last?["items"]?.arrayValue?.first?["phone"] == "42" }
    }

    @Test func everyOpenSessionSeesASyncsChanges() async throws {
        let harness = try await TestHarness(contacts: [ada])
        let (first, firstRecorder) = harness.makeSession(id: "s1")
        let (second, secondRecorder) = harness.makeSession(id: "s2")
        await first.send("contacts")
        await second.send("contacts")
        await first.send("wait")
        await second.send("wait")
        harness.contactsSource.set([ada, alan])
        await first.send("sync")
        for recorder in [firstRecorder, secondRecorder] {
            try await recorder.waitUntil { _ in recorder.displays("contacts").last?["items"]?.arrayValue?.count == 2 }
        }
    }

    @Test func onlyOneSyncRunsAtATime() async throws {
        let harness = try await TestHarness(contacts: [ada])
        let (first, _) = harness.makeSession(id: "s1")
        let (second, _) = harness.makeSession(id: "s2")
        harness.contactsSource.hold(true)
        await first.send("sync")
        await second.send("sync")
        try await Task.sleep(for: .milliseconds(30))
        harness.contactsSource.hold(false)
        await first.send("wait")
        await second.send("wait")
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
        let (session, _) = harness.makeSession()
        await session.send("ping")
        let record = try JSON.parse(await session.record)
        let states = Session.readViews(record, application: harness.application).states
        let restored = await Session.restore(record, states: states, claimedAt: 100, token: session.token, application: harness.application)
        #expect(await !restored.hasDisplayed(Contacts.self))
        #expect(await !restored.state(Contacts.self).open)
    }
}
