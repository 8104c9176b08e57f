import Testing
import ViewlineApps
import ViewlineKit
import ViewlineTesting

@Suite struct PlaylistSessionTests {
    @Test func loginAlertThenThreePagesWithAnExpiryInTheMiddle() async throws {
        let harness = try await TestHarness(tokenLifetime: 60)
        let (session, recorder) = harness.makeSession()
        await session.send("playlist")
        try await recorder.waitUntil { _ in recorder.alerts.count == 1 }
        let login = recorder.alerts[0]
        #expect(login.content.fields.map(\.name) == ["user", "password"])
        #expect(login.content.fields[1].secure)
        #expect(login.content.actions == [.confirm("Log in"), .cancel("Cancel")])
        #expect(recorder.displays("playlist").last?["step"] == "awaitingLogin")

        // Logging in through the alert runs the reserved fetch by itself.
        await session.send("confirm user=alice password=wonderland")
        try await recorder.waitUntil { _ in recorder.displays("playlist").last?["step"] == "ready" }
        #expect(recorder.displays("playlist").last?["items"]?.arrayValue?.count == 10)

        await session.send("more")
        try await recorder.waitUntil { _ in recorder.displays("playlist").last?["items"]?.arrayValue?.count == 20 }

        harness.clock.advance(by: 61)  // the token expires
        await session.send("more")
        try await recorder.waitUntil { _ in recorder.alerts.count == 2 }
        #expect(recorder.displays("playlist").last?["step"] == "awaitingLogin")
        await session.send("confirm user=alice password=wonderland")
        try await recorder.waitUntil { _ in recorder.displays("playlist").last?["items"]?.arrayValue?.count == 30 }

        await session.send("more")
        try await recorder.waitUntil { _ in recorder.displays("playlist").last?["step"] == "complete" }
        let items = try #require(recorder.displays("playlist").last?["items"]?.arrayValue)
        #expect(items.compactMap { $0["position"]?.intValue } == Array(1...32))
        #expect(harness.playlists.requestedOffsets == [0, 10, 20, 30])
        #expect(recorder.displays("playlist").last?["hasMore"] == false)
    }

    @Test func aWrongPasswordKeepsTheStepPendingForTheNextPlaylist() async throws {
        let harness = try await TestHarness()
        let (session, recorder) = harness.makeSession()
        await session.send("playlist")
        try await recorder.waitUntil { _ in recorder.alerts.count == 1 }
        await session.send("confirm user=alice password=wrong")
        try await recorder.waitUntil { _ in recorder.alerts.count == 2 }
        #expect(recorder.alerts[1].content.actions == [.confirm("OK")])
        #expect(recorder.displays("playlist").last?["step"] == "loginFailed")
        await session.send("confirm")
        await session.send("login alice wonderland")
        await session.send("playlist")
        try await recorder.waitUntil { _ in recorder.displays("playlist").last?["step"] == "ready" }
    }

    @Test func cancelDropsTheReservedStep() async throws {
        let harness = try await TestHarness()
        let (session, recorder) = harness.makeSession()
        await session.send("playlist")
        try await recorder.waitUntil { _ in recorder.alerts.count == 1 }
        await session.send("cancel")
        await session.send("wait")
        #expect(recorder.displays("playlist").last?["step"] == "cancelled")
        await session.send("more")
        guard case .failure(let error)? = recorder.replies.last else { Issue.record("more must fail"); return }
        #expect(error.code == .nothingPending)
    }

    @Test func aFetchFailureShowsAnAlertAndMoreRetries() async throws {
        let harness = try await TestHarness()
        let (session, recorder) = harness.makeSession()
        await session.send("login bob builder")
        harness.playlists.failNext()
        await session.send("playlist")
        try await recorder.waitUntil { _ in recorder.alerts.count == 1 }
        #expect(recorder.displays("playlist").last?["step"] == "failed")
        await session.send("confirm")
        await session.send("more")
        try await recorder.waitUntil { _ in recorder.displays("playlist").last?["step"] == "complete" }
        #expect(recorder.displays("playlist").last?["items"]?.arrayValue?.count == 7)
    }

    @Test func loggingInByCommandWhileTheLoginAlertIsUpContinuesTheFlow() async throws {
        let harness = try await TestHarness()
        let (session, recorder) = harness.makeSession()
        await session.send("playlist")
        try await recorder.waitUntil { _ in recorder.alerts.count == 1 }
        await session.send("login bob builder")
        try await recorder.waitUntil { _ in recorder.displays("playlist").last?["step"] == "complete" }
        #expect(recorder.all.contains { if case .dismiss(_, "a1") = $0 { true } else { false } })
    }
}
