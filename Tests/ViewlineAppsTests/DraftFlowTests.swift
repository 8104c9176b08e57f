import Testing
import ViewlineApps
import ViewlineKit
import ViewlinePersistence
import ViewlineTesting

@Suite struct DraftFlowTests {
    /// The alert a failed save asks with.
    static func saveAgain(_ reason: String) -> AlertContent {
        AlertContent(title: "Error", message: "Saving failed: \(reason). Save again?", actions: [.confirm("Save"), .cancel("Discard")])
    }

    /// The alert a draft left from an earlier session is offered with at login.
    static let unsavedDraft = AlertContent(
        title: "", message: "You have unsaved data from last time. Do you want to save it?",
        actions: [.confirm("Save"), .cancel("Discard")])

    /// Logs `user` in on `test`: the reply, then the session view showing the user.
    static func logIn(_ test: TestStore, _ user: String, _ password: String) async {
        await test.send("login \(user) \(password)", reply: ["user": .string(user), "expiresIn": 3600])
        await test.receive(Account.self) { $0.user = user }
    }

    @Test func draftNeedsLoginAndIsStoredBeforeTheReply() async throws {
        let harness = try await TestHarness()
        let test = harness.makeStore()
        await test.send("draft hello", fails: .loginRequired)

        await Self.logIn(test, "alice", "wonderland")
        await test.send("draft hello there", reply: ["pending": true])
        // When the reply is out, the draft is in the database.
        #expect(try await harness.store.pendingDraft(user: "alice")?.text == "hello there")
        await test.receive(Drafts.self) {
            $0.text = "hello there"
            $0.pending = true
        }
        await test.finish()
    }

    @Test func aFailingSaveAsksAgainUntilItSucceeds() async throws {
        let harness = try await TestHarness()
        let test = harness.makeStore()
        await Self.logIn(test, "alice", "wonderland")
        await test.send("draft my note", reply: ["pending": true])
        await test.receive(Drafts.self) {
            $0.text = "my note"
            $0.pending = true
        }
        harness.remoteStore.failNext("disk full", "disk full")

        await test.send("save", reply: ["accepted": true])
        await test.receive(Drafts.self) { $0.saving = true }
        await test.receive(Drafts.self) { $0.saving = false }
        #expect(await test.receiveAlert(Self.saveAgain("disk full")) == "a1")
        await test.send("confirm", reply: ["alert": "a1", "answer": "confirm", "action": "Save"])
        await test.receiveDismiss("a1")
        await test.receive(Drafts.self) { $0.saving = true }
        await test.receive(Drafts.self) { $0.saving = false }
        // The same alert again, under a new id.
        #expect(await test.receiveAlert(Self.saveAgain("disk full")) == "a2")
        await test.send("confirm", reply: ["alert": "a2", "answer": "confirm", "action": "Save"])
        await test.receiveDismiss("a2")
        await test.receive(Drafts.self) { $0.saving = true }
        await test.receive(Drafts.self) { $0 = Drafts.State() }  // saved: nothing pending

        #expect(harness.remoteStore.saveCalls == 3)
        #expect(try await harness.store.pendingDraft(user: "alice") == nil)
        #expect(try await harness.remoteStore.saved(user: "alice").map(\.text) == ["my note"])
        await test.send("saved", reply: ["drafts": [["text": "my note", "savedAt": "1970-01-01T00:00:00Z"]], "page": 1, "pages": 1])
        await test.finish()
    }

    @Test func discardDeletesThePendingDraft() async throws {
        let harness = try await TestHarness()
        let test = harness.makeStore()
        await Self.logIn(test, "alice", "wonderland")
        await test.send("draft throwaway", reply: ["pending": true])
        await test.receive(Drafts.self) {
            $0.text = "throwaway"
            $0.pending = true
        }
        harness.remoteStore.failNext("offline")
        await test.send("save", reply: ["accepted": true])
        await test.receive(Drafts.self) { $0.saving = true }
        await test.receive(Drafts.self) { $0.saving = false }
        await test.receiveAlert(Self.saveAgain("offline"))
        await test.send("cancel", reply: ["alert": "a1", "answer": "cancel", "action": "Discard"])
        await test.receiveDismiss("a1")
        await test.receive(Drafts.self) { $0 = Drafts.State() }
        #expect(try await harness.store.pendingDraft(user: "alice") == nil)
        #expect(try await harness.remoteStore.saved(user: "alice").isEmpty)
        await test.finish()
    }

    @Test func aDraftLeftEarlierIsOfferedAtLoginToItsOwnerOnly() async throws {
        let harness = try await TestHarness()
        try await harness.store.setDraft(user: "alice", text: "from yesterday", at: harness.clock.now())

        // Bob logs in and is offered nothing (`finish` waits for his session's work).
        let bob = harness.makeStore(id: "s2")
        await Self.logIn(bob, "bob", "builder")
        await bob.finish()

        let test = harness.makeStore()
        await Self.logIn(test, "alice", "wonderland")
        await test.receive(Drafts.self) {
            $0.text = "from yesterday"
            $0.pending = true
        }
        await test.receiveAlert(Self.unsavedDraft)
        // `save` meanwhile says what the flow waits for: the alert's answer.
        guard case .failure(let busy)? = await test.send("save") else {
            Issue.record("save did not fail")
            return
        }
        #expect(busy.code == .busy && busy.message.contains("answer to its alert"))

        await test.send("confirm", reply: ["alert": "a1", "answer": "confirm", "action": "Save"])
        await test.receiveDismiss("a1")
        await test.receive(Drafts.self) { $0.saving = true }
        await test.receive(Drafts.self) { $0 = Drafts.State() }  // saved: nothing pending
        #expect(try await harness.remoteStore.saved(user: "alice").map(\.text) == ["from yesterday"])
        await test.finish()
    }

    @Test func wrongPasswordsSayNothingAboutWhichPartWasWrong() async throws {
        let harness = try await TestHarness()
        let test = harness.makeStore()
        let wrongPassword = await test.send("login alice nope")
        let unknownUser = await test.send("login mallory wonderland")
        let errors = [wrongPassword, unknownUser].compactMap { if case .failure(let e)? = $0 { e } else { nil } }
        #expect(errors.map(\.code) == [.loginFailed, .loginFailed])
        #expect(errors.first?.message == errors.last?.message)
        await test.finish()
    }
}
