import Testing
import ViewlineApps
import ViewlineKit
import ViewlineTesting

@Suite struct SessionBasicsTests {
    @Test func stateShowsOneViewOrAll() async throws {
        let harness = try await TestHarness()
        let (session, recorder) = harness.makeSession()
        await session.send("state search")
        await session.send("state")
        await session.send("state nowhere")
        let replies = recorder.replies
        #expect(try replies[0].get() == ["view": "search", "state": ["query": "", "loading": false, "results": []]])
        #expect(try replies[1].get()["views"]?.objectValue?.keys == ["search", "session", "draft", "contacts", "playlist"])
        guard case .failure(let error) = replies[2] else { Issue.record("unknown view must fail"); return }
        #expect(error.code == .unknownView)
    }

    @Test func helpListsEveryCommand() async throws {
        let harness = try await TestHarness()
        let (session, recorder) = harness.makeSession()
        await session.send("help")
        let commands = try #require(try recorder.replies.first?.get()["commands"]?.arrayValue)
        #expect(commands.compactMap { $0["name"]?.stringValue } == harness.application.commands.all.map(\.name))
        #expect(commands.allSatisfy { $0["example"]?.stringValue?.isEmpty == false })
    }

    @Test func helpWithACommandShowsThatOneWithAnExample() async throws {
        let harness = try await TestHarness()
        let (session, recorder) = harness.makeSession()
        await session.send("help LOGIN")
        await session.send("help teleport")
        let command = try recorder.replies[0].get()["command"]
        #expect(command?["usage"] == "login <user> <password>")
        #expect(command?["example"] == "login alice wonderland")
        guard case .failure(let error) = recorder.replies[1] else { Issue.record("an unknown command must fail"); return }
        #expect(error.code == .unknownCommand)
    }

    @Test func quitAsksToClose() async throws {
        let harness = try await TestHarness()
        let (session, _) = harness.makeSession()
        #expect(await session.send("quit") == .close)
        #expect(await session.send("ping") == .keepOpen)
    }

    @Test func sessionTokensAreLongAndUnique() async throws {
        let harness = try await TestHarness()
        let tokens = (0..<50).map { _ in harness.makeSession().0.token }
        #expect(Set(tokens).count == 50)
        #expect(tokens.allSatisfy { $0.count >= 32 })
    }

    @Test func waitTimesOutWhileWorkRuns() async throws {
        let harness = try await TestHarness()
        let (session, recorder) = harness.makeSession()
        await session.send("search slow")
        await session.send("wait 20")
        guard case .failure(let error)? = recorder.replies.last else { Issue.record("wait must time out"); return }
        #expect(error.code == .timeout)
    }
}
