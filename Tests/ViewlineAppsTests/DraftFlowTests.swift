import Testing
import ViewlineApps
import ViewlineKit
import ViewlinePersistence
import ViewlineTesting

@Suite struct DraftFlowTests {
    private func errorCode(_ result: Result<JSON, ProtocolError>?) -> String? {
        if case .failure(let error)? = result { return error.code.rawValue }
        return nil
    }

    @Test func draftNeedsLoginAndIsStoredBeforeTheReply() async throws {
        let harness = try await TestHarness()
        let (session, recorder) = harness.makeSession()
        await session.send("draft hello")
        #expect(errorCode(recorder.replies.last) == "login_required")

        await session.send("login alice wonderland")
        await session.send("draft hello there")
        // When the reply is out, the draft is in the database.
        #expect(try await harness.store.pendingDraft(user: "alice")?.text == "hello there")
        #expect(recorder.displays("draft").last == ["text": "hello there", "pending": true, "saving": false])
    }

    @Test func aFailingSaveAsksAgainUntilItSucceeds() async throws {
        let harness = try await TestHarness()
        let (session, recorder) = harness.makeSession()
        await session.send("login alice wonderland")
        await session.send("draft my note")
        harness.remoteStore.failNext("disk full", "disk full")

        await session.send("save")
        try await recorder.waitUntil { _ in recorder.alerts.count == 1 }
        await session.send("confirm")
        try await recorder.waitUntil { _ in recorder.alerts.count == 2 }
        await session.send("confirm")
        try await recorder.waitUntil { _ in recorder.displays("draft").last?["pending"] == false }

        let alerts = recorder.alerts
        #expect(alerts.map(\.id) == ["a1", "a2"])
        #expect(alerts[0].content == alerts[1].content)
        #expect(alerts[0].content.title == "Error")
        #expect(alerts[0].content.message.contains("disk full"))
        #expect(alerts[0].content.message.contains("Save again?"))
        #expect(alerts[0].content.actions == [.confirm("Save"), .cancel("Discard")])
        #expect(harness.remoteStore.saveCalls == 3)
        #expect(try await harness.store.pendingDraft(user: "alice") == nil)
        #expect(try await harness.remoteStore.saved(user: "alice").map(\.text) == ["my note"])
        await session.send("saved")
        guard case .success(let result)? = recorder.replies.last else { Issue.record("saved failed"); return }
        #expect(result["drafts"]?.arrayValue?.first?["text"] == "my note")
    }

    @Test func discardDeletesThePendingDraft() async throws {
        let harness = try await TestHarness()
        let (session, recorder) = harness.makeSession()
        await session.send("login alice wonderland")
        await session.send("draft throwaway")
        harness.remoteStore.failNext("offline")
        await session.send("save")
        try await recorder.waitUntil { _ in recorder.alerts.count == 1 }
        await session.send("cancel")
        await session.send("wait")
        #expect(try await harness.store.pendingDraft(user: "alice") == nil)
        #expect(try await harness.remoteStore.saved(user: "alice").isEmpty)
        #expect(recorder.displays("draft").last == ["text": "", "pending": false, "saving": false])
    }

    @Test func aDraftLeftEarlierIsOfferedAtLoginToItsOwnerOnly() async throws {
        let harness = try await TestHarness()
        try await harness.store.setDraft(user: "alice", text: "from yesterday", at: harness.clock.now())

        let (bobSession, bobRecorder) = harness.makeSession(id: "s2")
        await bobSession.send("login bob builder")
        await bobSession.send("wait")
        #expect(bobRecorder.alerts.isEmpty)

        let (session, recorder) = harness.makeSession()
        await session.send("login alice wonderland")
        try await recorder.waitUntil { _ in recorder.alerts.count == 1 }
        let alert = recorder.alerts[0].content
        #expect(alert.title == "")
        #expect(alert.message.contains("unsaved data from last time"))
        #expect(alert.actions == [.confirm("Save"), .cancel("Discard")])
        #expect(recorder.displays("draft").last?["text"] == "from yesterday")
        // `save` meanwhile says what the flow waits for: the alert's answer.
        await session.send("save")
        guard case .failure(let busy)? = recorder.replies.last else { Issue.record("save did not fail"); return }
        #expect(busy.code == .busy && busy.message.contains("answer to its alert"))

        await session.send("confirm")
        try await recorder.waitUntil { _ in recorder.displays("draft").last?["pending"] == false }
        #expect(try await harness.remoteStore.saved(user: "alice").map(\.text) == ["from yesterday"])
    }

    @Test func wrongPasswordsSayNothingAboutWhichPartWasWrong() async throws {
        let harness = try await TestHarness()
        let (session, recorder) = harness.makeSession()
        await session.send("login alice nope")
        await session.send("login mallory wonderland")
        let errors = recorder.replies.compactMap { if case .failure(let e) = $0 { e } else { nil } }
        #expect(errors.map(\.code) == [.loginFailed, .loginFailed])
        #expect(errors[0].message == errors[1].message)
    }
}
