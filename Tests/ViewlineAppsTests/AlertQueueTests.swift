import Testing
import ViewlineApps
import ViewlineKit
import ViewlineTesting

extension TestStore {
    /// `search query`, whose backend call fails: loading, then not. The error alert
    /// is the caller's to receive (it shows only when no other alert is up).
    func failingSearch(_ query: String) async {
        await send("search \(query)", reply: ["accepted": true, "query": .string(query)])
        await receive(Search.self) {
            $0.query = query
            $0.loading = true
        }
        await receive(Search.self) { $0.loading = false }
    }
}

@Suite struct AlertQueueTests {
    /// Two failing searches in a row: the same error twice, the second waiting
    /// behind the first.
    private func twoErrors() async throws -> TestStore {
        let harness = try await TestHarness()
        let test = harness.makeStore()
        await test.send("fault search 2 boom", reply: ["service": "search", "count": 2])
        await test.failingSearch("a")
        #expect(await test.receiveAlert(.error("boom")) == "a1")
        await test.failingSearch("b")
        return test
    }

    @Test func alertsAreModalAndQueueInOrder() async throws {
        let test = try await twoErrors()
        // The second error waits behind the first.
        #expect(await test.session.queuedAlertCount == 1)
        await test.send("confirm", reply: ["alert": "a1", "answer": "confirm", "action": "OK"])
        await test.receiveDismiss("a1")
        #expect(await test.receiveAlert(.error("boom")) == "a2")
        await test.finish()
    }

    @Test func aRepeatedErrorIsTwoAlertsWithDistinctIdsAndRevs() async throws {
        let test = try await twoErrors()
        await test.send("confirm", reply: ["alert": "a1", "answer": "confirm", "action": "OK"])
        await test.receiveDismiss("a1")
        // The same content again, under a new id.
        #expect(await test.receiveAlert(.error("boom")) == "a2")
        let alerts = test.recorder.all.filter { if case .alert = $0 { true } else { false } }
        #expect(alerts.count == 2)
        #expect(Set(alerts.compactMap(\.rev)).count == 2)
        let revs = test.recorder.revs
        #expect(revs == revs.sorted() && Set(revs).count == revs.count)
        await test.finish()
    }

    @Test func answeringChecksThePresentedAlert() async throws {
        let test = try await twoErrors()
        await test.send("cancel", fails: .noCancelAction)
        await test.send("confirm a2", fails: .staleAlert)
        await test.send("confirm a1", reply: ["alert": "a1", "answer": "confirm", "action": "OK"])
        await test.receiveDismiss("a1")
        await test.receiveAlert(.error("boom"))
        await test.send("confirm a2", reply: ["alert": "a2", "answer": "confirm", "action": "OK"])
        await test.receiveDismiss("a2")
        await test.send("confirm", fails: .noAlert)
        await test.finish()
    }
}

@Suite struct AlertQueueCapTests {
    /// A client that never answers while every search fails: the queue stops at its
    /// cap (59 failures, one presented, sixteen waiting).
    @Test func unansweredErrorsQueueUpToTheCap() async throws {
        let harness = try await TestHarness()
        let test = harness.makeStore()
        await test.send("fault search 100 boom", reply: ["service": "search", "count": 100])
        for index in 0..<60 {
            await test.failingSearch("q\(index)")
            if index == 0 { await test.receiveAlert(.error("boom")) }  // the only one shown
        }
        #expect(await test.session.queuedAlertCount == 16)
        await test.finish()
    }

    @Test func distinctUnansweredErrorsKeepTheNewestUpToTheCap() async throws {
        let harness = try await TestHarness()
        let test = harness.makeStore()
        for index in 0..<40 {
            await test.send("fault search 1 boom\(index)", reply: ["service": "search", "count": 1])
            await test.failingSearch("q\(index)")
            if index == 0 { await test.receiveAlert(.error("boom0")) }  // the only one shown
        }
        #expect(await test.session.queuedAlertCount == 16)
        // Answering walks the queue: the first error, then the newest sixteen.
        var presented = "a1"
        for index in 24..<40 {
            await test.send("confirm", reply: ["alert": .string(presented), "answer": "confirm", "action": "OK"])
            await test.receiveDismiss(presented)
            presented = await test.receiveAlert(.error("boom\(index)")) ?? ""
        }
        await test.send("confirm", reply: ["alert": .string(presented), "answer": "confirm", "action": "OK"])
        await test.receiveDismiss(presented)
        #expect(await test.session.presentedAlertID == nil)
        await test.finish()
    }
}
