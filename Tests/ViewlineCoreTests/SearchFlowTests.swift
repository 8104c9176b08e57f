import Testing
import ViewlineCore
import ViewlineProtocol
import ViewlineTestSupport

@Suite struct SearchFlowTests {
    @Test func replyComesFirstThenLoadingThenResults() async throws {
        let harness = try await TestHarness()
        let (session, recorder) = harness.makeSession()

        await session.send("search thai food")
        try await harness.places.waitForQueries(1)
        harness.places.respond(to: "thai food", with: .success([FakePlacesService.place("Golden Lotus")]))
        try await recorder.waitUntil { _ in recorder.displays("search").count == 2 }

        let messages = recorder.all
        guard case .reply(.null, .success(let result)) = messages[0] else { Issue.record("first message is not the reply"); return }
        #expect(result["accepted"] == true)
        #expect(recorder.displays("search") == [
            ["query": "thai food", "loading": true, "results": []],
            ["query": "thai food", "loading": false, "results": [FakePlacesService.place("Golden Lotus").json]],
        ])
        #expect(recorder.revs == [1, 2])
    }

    @Test func failureStopsLoadingKeepsResultsAndShowsAnErrorAlert() async throws {
        let harness = try await TestHarness()
        let (session, recorder) = harness.makeSession()
        await session.send("search thai")
        try await harness.places.waitForQueries(1)
        harness.places.respond(to: "thai", with: .success([FakePlacesService.place("Old Table")]))
        try await recorder.waitUntil { _ in recorder.displays("search").count == 2 }

        await session.send("search pizza")
        try await harness.places.waitForQueries(2)
        harness.places.respond(to: "pizza", with: .failure(ServiceError(.search, "the places server is down")))
        try await recorder.waitUntil { _ in recorder.alerts.count == 1 }

        let last = try #require(recorder.displays("search").last)
        #expect(last["loading"] == false)
        #expect(last["results"] == [FakePlacesService.place("Old Table").json])
        let alert = recorder.alerts[0].content
        #expect(alert == AlertContent(title: "Error", message: "the places server is down", actions: [.confirm("OK")]))
    }

    @Test func latestSearchWinsEvenWhenAnOlderOneAnswersLater() async throws {
        let harness = try await TestHarness()
        let (session, recorder) = harness.makeSession()
        await session.send("search thai")
        await session.send("search sushi")
        try await harness.places.waitForQueries(2)

        harness.places.respond(to: "sushi", with: .success([FakePlacesService.place("Jade Spoon", cuisine: "japanese")]))
        try await recorder.waitUntil { _ in recorder.displays("search").last?["loading"] == false }
        // The superseded search answers late: nothing of it may show.
        harness.places.respond(to: "thai", with: .success([FakePlacesService.place("Blue Lotus")]))
        await session.send("wait")

        let states = recorder.displays("search")
        #expect(states.map { $0["query"] } == ["thai", "sushi", "sushi"])
        #expect(states.map { $0["loading"] } == [true, true, false])
        #expect(states.last?["results"] == [FakePlacesService.place("Jade Spoon", cuisine: "japanese").json])
    }

    @Test func loadingStaysTrueUntilTheLatestFinishesEvenIfTheOlderFails() async throws {
        let harness = try await TestHarness()
        let (session, recorder) = harness.makeSession()
        await session.send("search a")
        await session.send("search b")
        try await harness.places.waitForQueries(2)
        harness.places.respond(to: "a", with: .failure(ServiceError(.search, "late failure")))
        try await Task.sleep(for: .milliseconds(20))
        #expect(recorder.displays("search").allSatisfy { $0["loading"] == true })
        #expect(recorder.alerts.isEmpty)
        harness.places.respond(to: "b", with: .success([]))
        try await recorder.waitUntil { _ in recorder.displays("search").last?["loading"] == false }
    }

    @Test func injectedFaultsFailTheNextCalls() async throws {
        let harness = try await TestHarness()
        let (session, recorder) = harness.makeSession()
        await session.send("fault search 2 quota exceeded")
        await session.send("search a")
        try await recorder.waitUntil { _ in recorder.alerts.count == 1 }
        #expect(recorder.alerts[0].content.message == "quota exceeded")
        #expect(harness.faults.remaining(.search) == 1)
        #expect(harness.places.queries.isEmpty)
    }

    @Test func faultNeedsAdmin() async throws {
        let harness = try await TestHarness(admin: false)
        let (session, recorder) = harness.makeSession()
        await session.send("fault search")
        #expect(recorder.replies.first.map { (try? $0.get()) == nil } == true)
        guard case .failure(let error)? = recorder.replies.first else { Issue.record("expected an error"); return }
        #expect(error.code == .adminDisabled)
    }
}
