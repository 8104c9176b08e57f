import Testing
import ViewlineClient
import ViewlineTestSupport

/// What a program waits for is never missed (issue #76): a wait, or an `events()` loop,
/// begun after a command's reply finds the events that came between the reply and
/// the call; waits move forward through the session's events; the presented alert
/// clears as soon as it is answered. Against a real server started on port 0; each
/// race is run many times over.
@Suite(.timeLimit(.minutes(2))) struct ClientWaitTests {
    static let rounds = 25

    func server(_ arguments: [String] = []) throws -> ServerProcess {
        try ServerProcess(["--db", ":memory:", "--demo", "--admin"] + arguments)
    }

    /// Makes the next search fail with `message`: an error alert saying it follows.
    func failNextSearch(on client: ViewlineClient, with message: String) async throws {
        try await client.send("fault", arguments: ["service": "search", "count": 1, "message": .string(message)])
    }

    /// The first value `extract` gives among `stream`'s events (a guard of 10 s, not a measure).
    func first<Value: Sendable>(
        in stream: AsyncStream<ViewlineEvent>, _ extract: @escaping @Sendable (ViewlineEvent) -> Value?
    ) async throws -> Value {
        try await withThrowingTaskGroup(of: Value.self) { group in
            group.addTask {
                for await event in stream {
                    if let value = extract(event) { return value }
                }
                throw Timeout(what: "matching event (the stream ended)")
            }
            group.addTask {
                try await Task.sleep(for: .seconds(10))
                throw Timeout(what: "matching event")
            }
            defer { group.cancelAll() }
            return try await group.next()!
        }
    }

    @Test func anAlertSentRightAfterAnAnswersReplyIsFoundByTheWaitBegunAfterIt() async throws {
        let server = try server()
        let client = try await ViewlineClient.connect(to: .tcp(port: server.port))
        for round in 0..<Self.rounds {
            // Two error alerts: the first presented, the second queued behind it on the server.
            try await failNextSearch(on: client, with: "first failure \(round)")
            try await client.send("search first \(round)")
            try await client.settle()
            try await failNextSearch(on: client, with: "second failure \(round)")
            try await client.send("search second \(round)")
            try await client.settle()
            // The first arrived before the call: it is presented, and returned at once.
            let first = try await client.waitForAlert()
            #expect(first.message == "first failure \(round)")
            // Answering it: the second is sent right after the reply (PROTOCOL §5),
            // before or after this wait begins; the first is no longer presented.
            try await first.confirm()
            #expect(await client.presentedAlert?.id != first.id)
            let second = try await client.waitForAlert()
            #expect(second.message == "second failure \(round)")
            #expect(second.rev > first.rev)
            try await client.confirm()
            // Cleared by the answer's reply, before its `dismiss` comes.
            #expect(await client.presentedAlert == nil)
        }
        await client.close()
    }

    @Test func anEventsLoopBegunAfterAReplyStartsWithWhatCameBeforeIt() async throws {
        let server = try server()
        let first = try await ViewlineClient.connect(to: .tcp(port: server.port))
        // Two clients of one session: the other one answers.
        let second = try await ViewlineClient.connect(to: .tcp(port: server.port))
        try await second.attach(token: await first.token)
        for round in 0..<Self.rounds {
            try await failNextSearch(on: first, with: "failure \(round)")
            try await first.send("search thai \(round)")
            try await first.settle()  // the alert came before this reply
            let alert = try await self.first(in: await first.events()) { event -> Alert? in
                if case .alert(let alert) = event { alert } else { nil }
            }
            #expect(alert.message == "failure \(round)")
            let seen = try await second.waitForAlert()
            #expect(seen.id == alert.id)
            try await seen.confirm()
            // The loop took what it was handed when it began: the next one starts after it.
            let dismissed = try await self.first(in: await first.events()) { event -> String? in
                if case .dismiss(let id, _) = event { id } else { nil }
            }
            #expect(dismissed == alert.id)
        }
        await first.close()
        await second.close()
    }

    @Test func aDisplayThatLandedBetweenTheReplyAndTheWaitIsFoundAndWaitsMoveForward() async throws {
        let server = try server(["--backend-latency", "20"])
        let client = try await ViewlineClient.connect(to: .tcp(port: server.port))
        for round in 0..<Self.rounds {
            let query = "thai \(round)"
            try await client.send("search \(query)")
            try await client.settle()  // both displays landed: loading, then the results
            #expect(await client.views["search"]?["loading"] == false)
            // A wait that ends without its event takes nothing.
            await #expect(throws: Timeout.self) {
                try await client.waitForDisplay("search", timeout: .milliseconds(50)) { $0["query"] == "nothing" }
            }
            // Not the latest state, but a display that came after the reply: found.
            let loading = try await client.waitForDisplay("search") { $0["loading"] == true }
            #expect(loading["query"] == .string(query))
            let results = try await client.waitForDisplay("search") { $0["loading"] == false }
            #expect(results["query"] == .string(query) && results["results"]?.arrayValue != nil)
        }
        // Every display up to the latest was taken: none from an earlier round comes back.
        await #expect(throws: Timeout.self) {
            try await client.waitForDisplay("search", timeout: .milliseconds(50)) { $0["loading"] == true }
        }
        await client.close()
    }

    @Test func aCancelledWaitEndsAndTheNextWaitGetsTheAlert() async throws {
        let server = try server()
        let client = try await ViewlineClient.connect(to: .tcp(port: server.port))
        let waiting = Task { try await client.waitForAlert(timeout: .seconds(60)) }
        waiting.cancel()
        await #expect(throws: CancellationError.self) { try await waiting.value }
        try await failNextSearch(on: client, with: "after the cancel")
        try await client.send("search thai")
        #expect(try await client.waitForAlert().message == "after the cancel")
        await client.close()
    }

    @Test func aClosedClientsWaitsReadWhatItReceivedThenThrow() async throws {
        let server = try server(["--backend-latency", "20"])
        let client = try await ViewlineClient.connect(to: .tcp(port: server.port))
        try await client.send("search thai")
        try await client.settle()
        await client.close()
        #expect(try await client.waitForDisplay("search") { $0["loading"] == true }["query"] == "thai")
        await #expect(throws: ConnectionClosed.self) { try await client.waitForAlert() }
        var held: [ViewlineEvent] = []
        for await event in await client.events() { held.append(event) }  // ends: the client is closed
        #expect(held.contains { if case .display("search", let state, _) = $0 { state["loading"] == false } else { false } })
        #expect(held.last == .connection(.disconnected(reason: "closed by the client")))
    }
}
