import Testing
import ViewlineApps
import ViewlineKit
import ViewlineTesting

/// Search (seeds 002 and 004), every message asserted with the test store.
@Suite struct SearchFlowTests {
    let golden = FakePlacesService.place("Golden Lotus")

    @Test func replyComesFirstThenLoadingThenResults() async throws {
        let harness = try await TestHarness()
        let store = harness.makeStore()
        await store.send("search thai food", reply: ["accepted": true, "query": "thai food"])
        await store.receive(Search.self) {
            $0.query = "thai food"
            $0.loading = true
        }
        try await harness.places.waitForQueries(1)
        harness.places.respond(to: "thai food", with: .success([golden]))
        await store.receive(Search.self) {
            $0.loading = false
            $0.results = [golden]
        }
        #expect(store.recorder.revs == [1, 2])
        await store.finish()
    }

    @Test func failureStopsLoadingKeepsResultsAndShowsAnErrorAlert() async throws {
        let harness = try await TestHarness()
        let store = harness.makeStore()
        let old = FakePlacesService.place("Old Table")
        await store.send("search thai", reply: ["accepted": true, "query": "thai"])
        await store.receive(Search.self) {
            $0.query = "thai"
            $0.loading = true
        }
        try await harness.places.waitForQueries(1)
        harness.places.respond(to: "thai", with: .success([old]))
        await store.receive(Search.self) {
            $0.loading = false
            $0.results = [old]
        }

        await store.send("search pizza", reply: ["accepted": true, "query": "pizza"])
        await store.receive(Search.self) {
            $0.query = "pizza"
            $0.loading = true
        }
        try await harness.places.waitForQueries(2)
        harness.places.respond(to: "pizza", with: .failure(ServiceError("search", "the places server is down")))
        await store.receive(Search.self) { $0.loading = false }  // the old results stay
        await store.receiveAlert(AlertContent(title: "Error", message: "the places server is down", actions: [.confirm("OK")]))
        await store.finish()
    }

    @Test func latestSearchWinsEvenWhenAnOlderOneAnswersLater() async throws {
        let harness = try await TestHarness()
        let store = harness.makeStore()
        let spoon = FakePlacesService.place("Jade Spoon", cuisine: "japanese")
        await store.send("search thai", reply: ["accepted": true, "query": "thai"])
        await store.receive(Search.self) {
            $0.query = "thai"
            $0.loading = true
        }
        await store.send("search sushi", reply: ["accepted": true, "query": "sushi"])
        await store.receive(Search.self) { $0.query = "sushi" }
        try await harness.places.waitForQueries(2)

        harness.places.respond(to: "sushi", with: .success([spoon]))
        await store.receive(Search.self) {
            $0.loading = false
            $0.results = [spoon]
        }
        // The superseded search answers late: nothing of it may show.
        harness.places.respond(to: "thai", with: .success([FakePlacesService.place("Blue Lotus")]))
        await store.send("wait", reply: ["settled": true])
        await store.finish()
    }

    @Test func loadingStaysTrueUntilTheLatestFinishesEvenIfTheOlderFails() async throws {
        let harness = try await TestHarness()
        let store = harness.makeStore()
        await store.send("search a", reply: ["accepted": true, "query": "a"])
        await store.receive(Search.self) {
            $0.query = "a"
            $0.loading = true
        }
        await store.send("search b", reply: ["accepted": true, "query": "b"])
        await store.receive(Search.self) { $0.query = "b" }
        try await harness.places.waitForQueries(2)
        harness.places.respond(to: "a", with: .failure(ServiceError("search", "late failure")))
        try await Task.sleep(for: .milliseconds(20))
        #expect(store.recorder.all.count == 4, "no event for the superseded failure")
        harness.places.respond(to: "b", with: .success([]))
        await store.receive(Search.self) { $0.loading = false }
        await store.finish()
    }

    @Test func injectedFaultsFailTheNextCalls() async throws {
        let harness = try await TestHarness()
        let store = harness.makeStore()
        await store.send("fault search 2 quota exceeded", reply: ["service": "search", "count": 2])
        await store.send("search a", reply: ["accepted": true, "query": "a"])
        await store.receive(Search.self) {
            $0.query = "a"
            $0.loading = true
        }
        await store.receive(Search.self) { $0.loading = false }
        await store.receiveAlert(.error("quota exceeded"))
        #expect(harness.faults.remaining("search") == 1)
        #expect(harness.places.queries.isEmpty)
        await store.finish()
    }

    @Test func faultNeedsAdmin() async throws {
        let harness = try await TestHarness()
        let store = harness.makeStore(admin: false)
        await store.send("fault search", fails: .adminDisabled)
        await store.finish()
    }
}
