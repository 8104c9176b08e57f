import Testing
import ViewlineApps
import ViewlineKit
import ViewlineTesting

@Suite struct SessionBasicsTests {
    @Test func stateShowsOneViewOrAll() async throws {
        let harness = try await TestHarness()
        let test = harness.makeStore()
        await test.send("state search", reply: ["view": "search", "state": ["query": "", "loading": false, "results": []]])
        let all = try #require(try await test.send("state")?.get())
        #expect(all["views"]?.objectValue?.keys == ["search", "session", "draft", "contacts", "playlist"])
        await test.send("state nowhere", fails: .unknownView)
        await test.finish()
    }

    @Test func helpListsEveryCommand() async throws {
        let harness = try await TestHarness()
        let test = harness.makeStore()
        let commands = try #require(try await test.send("help")?.get()["commands"]?.arrayValue)
        #expect(commands.compactMap { $0["name"]?.stringValue } == harness.application.commands.all.map(\.name))
        #expect(commands.allSatisfy { $0["example"]?.stringValue?.isEmpty == false })
        await test.finish()
    }

    @Test func helpWithACommandShowsThatOneWithAnExample() async throws {
        let harness = try await TestHarness()
        let test = harness.makeStore()
        let command = try #require(try await test.send("help LOGIN")?.get())["command"]
        #expect(command?["usage"] == "login <user> <password>")
        #expect(command?["example"] == "login alice wonderland")
        await test.send("help teleport", fails: .unknownCommand)
        await test.finish()
    }

    @Test func quitAsksToClose() async throws {
        let harness = try await TestHarness()
        // Raw: what is checked is the session's outcome (close the connection), not a message.
        let (session, _) = harness.makeSession()
        #expect(await session.send("quit") == .close)
        #expect(await session.send("ping") == .keepOpen)
    }

    @Test func sessionTokensAreLongAndUnique() async throws {
        let harness = try await TestHarness()
        // Raw: fifty sessions made and never driven; only their tokens are read.
        let tokens = (0..<50).map { _ in harness.makeSession().0.token }
        #expect(Set(tokens).count == 50)
        #expect(tokens.allSatisfy { $0.count >= 32 })
    }

    @Test func waitTimesOutWhileWorkRuns() async throws {
        let harness = try await TestHarness()
        let test = harness.makeStore()
        await test.send("search slow", reply: ["accepted": true, "query": "slow"])
        await test.receive(Search.self) {
            $0.query = "slow"
            $0.loading = true
        }
        await test.send("wait 20", fails: .timeout)
        // The search answers at last: the work ends.
        try await harness.places.waitForQueries(1)
        harness.places.respond(to: "slow", with: .success([]))
        await test.receive(Search.self) { $0.loading = false }
        await test.finish()
    }
}
