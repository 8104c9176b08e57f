import Testing
import ViewlineApps
import ViewlineKit
import ViewlineTesting

@Suite struct AlertQueueTests {
    /// Two failing searches in a row: the same error twice.
    private func twoErrors() async throws -> (TestHarness, Session, MessageRecorder) {
        let harness = try await TestHarness()
        let (session, recorder) = harness.makeSession()
        await session.send("fault search 2 boom")
        await session.send("search a")
        try await recorder.waitUntil { _ in recorder.alerts.count == 1 }
        await session.send("search b")
        try await recorder.waitUntil { _ in recorder.displays("search").last?["loading"] == false && recorder.displays("search").count == 4 }
        return (harness, session, recorder)
    }

    @Test func alertsAreModalAndQueueInOrder() async throws {
        let (_, session, recorder) = try await twoErrors()
        // The second error waits behind the first.
        #expect(recorder.alerts.count == 1)
        recorder.clear()
        await session.send("confirm")
        guard case .reply(_, .success(let result)) = recorder.all.first else { Issue.record("reply first"); return }
        #expect(result["alert"] == "a1")
        #expect(recorder.alerts.map(\.id) == ["a2"])
    }

    @Test func aRepeatedErrorIsTwoAlertsWithDistinctIdsAndRevs() async throws {
        let (_, session, recorder) = try await twoErrors()
        await session.send("confirm")
        let alerts = recorder.all.filter { if case .alert = $0 { true } else { false } }
        #expect(alerts.count == 2)
        #expect(recorder.alerts[0].content == recorder.alerts[1].content)
        #expect(recorder.alerts[0].id != recorder.alerts[1].id)
        #expect(Set(alerts.compactMap(\.rev)).count == 2)
        #expect(recorder.revs == recorder.revs.sorted() && Set(recorder.revs).count == recorder.revs.count)
    }

    @Test func answeringChecksThePresentedAlert() async throws {
        let (_, session, recorder) = try await twoErrors()
        recorder.clear()
        await session.send("cancel")
        await session.send("confirm a2")
        await session.send("confirm a1")
        await session.send("confirm a2")
        await session.send("confirm")
        let codes = recorder.replies.map { result -> String in
            switch result {
            case .success: "ok"
            case .failure(let error): error.code.rawValue
            }
        }
        #expect(codes == ["no_cancel_action", "stale_alert", "ok", "ok", "no_alert"])
    }
}

@Suite struct AlertQueueCapTests {
    /// A client that never answers while every search fails: the queue stops at its
    /// cap (59 failures, one presented, sixteen waiting).
    @Test func unansweredErrorsQueueUpToTheCap() async throws {
        let harness = try await TestHarness()
        let (session, recorder) = harness.makeSession()
        await session.send("fault search 100 boom")
        for index in 0..<60 {
            await session.send("search q\(index)")
            await session.send("wait")
        }
        #expect(recorder.alerts.count == 1)
        #expect(await session.queuedAlertCount == 16)
    }

    @Test func distinctUnansweredErrorsKeepTheNewestUpToTheCap() async throws {
        let harness = try await TestHarness()
        let (session, recorder) = harness.makeSession()
        for index in 0..<40 {
            await session.send("fault search 1 boom\(index)")
            await session.send("search q\(index)")
            await session.send("wait")
        }
        #expect(await session.queuedAlertCount == 16)
        // Answering walks the queue: the first error, then the newest sixteen.
        var messages: [String] = []
        for _ in 0..<17 {
            messages.append(recorder.alerts.last?.content.message ?? "")
            await session.send("confirm")
        }
        #expect(messages.first?.contains("boom0") == true)
        #expect(messages.dropFirst().map { $0.contains("boom") } == Array(repeating: true, count: 16))
        #expect(messages.last?.contains("boom39") == true)
        #expect(await session.presentedAlertID == nil)
    }
}
