import Foundation
import Observation
import Testing
import ViewlineClient
import ViewlineTestSupport

/// The Swift client against a real server (started on port 0 for each test): the
/// seed flows, typed errors, alerts answered from two clients, decoding into the
/// app's own types, the Observation model, and a rolling restart of a cluster.
@Suite struct ViewlineClientTests {
    /// The app's own type for the search view (the client has no table of views).
    struct SearchState: Decodable, Equatable {
        struct Place: Decodable, Equatable {
            var name: String
            var rating: Double
        }

        var query: String
        var loading: Bool
        var results: [Place]
    }

    func server(_ arguments: [String] = []) throws -> ServerProcess {
        try ServerProcess(["--db", ":memory:", "--demo", "--admin"] + arguments)
    }

    /// The events of `stream` up to and including the first that matches (within 10 s).
    func events(
        _ stream: AsyncStream<ViewlineEvent>, until predicate: @escaping @Sendable (ViewlineEvent) -> Bool
    ) async throws -> [ViewlineEvent] {
        try await withThrowingTaskGroup(of: [ViewlineEvent].self) { group in
            group.addTask {
                var seen: [ViewlineEvent] = []
                for await event in stream {
                    seen.append(event)
                    if predicate(event) { return seen }
                }
                throw Timeout(what: "matching event (the stream ended after \(seen.count): \(seen.suffix(3)))")
            }
            group.addTask {
                try await Task.sleep(for: .seconds(10))
                throw Timeout(what: "matching event")
            }
            defer { group.cancelAll() }
            return try await group.next()!
        }
    }

    /// Logs alice in, sets `draft` and saves it once the remote store is set to fail
    /// once: the "save again?" alert follows.
    func startAFailingSave(on client: ViewlineClient, draft: String) async throws {
        try await client.send("login alice wonderland")
        try await client.send("draft \(draft)")
        try await client.send("fault save 1 disk full")
        try await client.send("save")
    }

    /// The next alert `stream` presents (within 10 s).
    func nextAlert(_ stream: AsyncStream<ViewlineEvent>) async throws -> Alert {
        let seen = try await events(stream) { if case .alert = $0 { true } else { false } }
        guard case .alert(let alert)? = seen.last else { throw Timeout(what: "an alert") }
        return alert
    }

    static func isDisplay(_ view: String, _ predicate: @escaping @Sendable (JSON) -> Bool = { _ in true }) -> @Sendable (ViewlineEvent) -> Bool {
        { event in
            if case .display(view, let state, _) = event { return predicate(state) }
            return false
        }
    }

    @Test func aSearchShowsItsResultsInRevOrderDecodedIntoTheAppsOwnType() async throws {
        let server = try server(["--backend-latency", "100"])
        let client = try await ViewlineClient.connect(to: .tcp(port: server.port))
        let stream = await client.events()
        let result = try await client.send("search thai")
        #expect(result == ["accepted": true, "query": "thai"])
        let seen = try await events(stream, until: Self.isDisplay("search") { $0["loading"] == false })
        let revs = seen.compactMap { event -> Int? in if case .display(_, _, let rev) = event { rev } else { nil } }
        #expect(revs == revs.sorted() && Set(revs).count == revs.count, "\(revs)")
        let search = try await client.state("search", as: SearchState.self)
        #expect(search.query == "thai" && !search.loading && !search.results.isEmpty)
        #expect(search.results.map(\.rating) == search.results.map(\.rating).sorted(by: >))
        #expect(await client.rev == revs.last)
        await client.close()
    }

    @Test func errorsCarryTheProtocolsStableCodes() async throws {
        let server = try server()
        let client = try await ViewlineClient.connect(to: .tcp(port: server.port))
        await #expect { try await client.send("saved") } throws: { error in
            (error as? ViewlineError)?.code.rawValue == "login_required"
        }
        await #expect { try await client.send("frobnicate now") } throws: { error in
            (error as? ViewlineError)?.code == .unknownCommand
        }
        await #expect { try await client.send("search", arguments: [:]) } throws: { error in
            (error as? ViewlineError)?.code == .badArguments
        }
        // The client goes on after an error.
        #expect(try await client.send("ping") == ["pong": true])
        #expect(try await client.send("login", arguments: ["user": "alice", "password": "wonderland"])["user"] == "alice")
        await client.close()
    }

    /// A line longer than the welcome's `maxLineBytes` is refused before it is sent:
    /// the server's `line_too_long` for it could not name its id, and the client
    /// would wait for the reply until its timeout.
    @Test func aLineLongerThanTheServerTakesIsRefusedAtOnce() async throws {
        let server = try server(["--max-line-bytes", "1024"])
        var options = ViewlineClient.Options()
        options.timeout = .seconds(30)
        let client = try await ViewlineClient.connect(to: .tcp(port: server.port), options: options)
        #expect(await client.welcome["maxLineBytes"] == 1024)
        let start = ContinuousClock.now
        await #expect { try await client.send("search " + String(repeating: "x", count: 1024)) } throws: { error in
            (error as? ViewlineError)?.code == .lineTooLong
        }
        #expect(ContinuousClock.now - start < .seconds(10), "refused, not waited for")
        #expect(try await client.send("ping") == ["pong": true])
        await client.close()
    }

    @Test func exchangeReturnsTheWholeReplyMessageErrorsIncluded() async throws {
        let server = try server()
        let client = try await ViewlineClient.connect(to: .tcp(port: server.port))
        let (welcome, ownSession) = (await client.welcome, await client.session)
        #expect(welcome["type"] == "welcome" && welcome["session"] == .string(ownSession))
        let refused = try await client.exchange("saved")
        #expect(refused["type"] == "reply" && refused["ok"] == false && refused["error"]?["code"] == "login_required")
        #expect(refused["re"]?.intValue != nil)
        // A line in the JSON form goes as that form (its own id replaced by the client's).
        let pong = try await client.exchange(#"{"id":"mine","cmd":"ping"}"#)
        #expect(pong["ok"] == true && pong["result"] == ["pong": true] && pong["re"] != "mine")
        // A typed `attach` that succeeds is the session a resume goes back to.
        let other = try await ViewlineClient.connect(to: .tcp(port: server.port))
        let (session, token) = (await other.session, await other.token)
        #expect(try await client.exchange("attach \(token)")["ok"] == true)
        let (joinedToken, joinedSession) = (await client.token, await client.session)
        #expect(joinedToken == token && joinedSession == session)
        await client.close()
        await other.close()
    }

    @Test func aFailingSaveAsksAgainUntilItWorksAndTheOtherClientSeesTheAnswer() async throws {
        let server = try server()
        let first = try await ViewlineClient.connect(to: .tcp(port: server.port))
        let second = try await ViewlineClient.connect(to: .tcp(port: server.port))
        let attached = try await second.attach(token: await first.token)
        #expect(attached["snapshot"] == true)
        let firstEvents = await first.events()
        let secondEvents = await second.events()
        try await startAFailingSave(on: first, draft: "meeting notes")
        let alert = try await nextAlert(secondEvents)
        #expect(alert.title == "Error" && alert.message.contains("disk full"))
        #expect(alert.actions.map(\.role) == ["confirm", "cancel"])
        // Answered on the second client: the first sees it dismissed, and the save goes through.
        try await alert.confirm()
        let dismissed = try await events(firstEvents) { if case .dismiss(alert.id, _) = $0 { true } else { false } }
        #expect(dismissed.contains { if case .alert(let shown) = $0 { shown.id == alert.id } else { false } })
        _ = try await events(firstEvents, until: Self.isDisplay("draft") { $0["pending"] == false && $0["saving"] == false })
        #expect(await first.presentedAlert == nil)
        #expect(try await first.send("saved")["drafts"]?.arrayValue?.first?["text"] == "meeting notes")
        await first.close()
        await second.close()
    }

    @Test(.timeLimit(.minutes(1))) @MainActor func theModelPublishesEveryDisplayInOrder() async throws {
        let server = try server(["--backend-latency", "100"])
        let client = try await ViewlineClient.connect(to: .tcp(port: server.port))
        let model = await ViewlineModel(client: client)
        #expect(model.connection == .connected)
        try await model.send("search pizza")
        // Each display of the search view is one observed change, seen in rev order.
        var revs: [Int] = []
        while model.decoded("search", as: SearchState.self)?.loading != false {
            await withCheckedContinuation { continuation in
                withObservationTracking {
                    _ = model.views["search"]
                } onChange: {
                    continuation.resume()
                }
            }
            await Task.yield()
            revs.append(model.rev)
        }
        let search = try #require(model.decoded("search", as: SearchState.self))
        #expect(search.query == "pizza" && !search.results.isEmpty)
        #expect(revs.count >= 1 && revs == revs.sorted() && Set(revs).count == revs.count, "\(revs)")
        #expect(model.rev == (await client.rev))
        await client.close()
    }

    /// The revs of the displays and alerts among `events`.
    static func revs(_ events: [ViewlineEvent]) -> [Int] {
        events.compactMap { event -> Int? in
            switch event {
            case .display(_, _, let rev): rev
            case .alert(let alert): alert.rev
            case .dismiss(_, let rev): rev
            default: nil
            }
        }
    }

    @Test func aConnectionDroppedMidSearchResumesWithTheResultsNothingLostOrDoubled() async throws {
        // The cut comes from the proxy's thread the moment the spinner's display passed
        // it: the backend still works on the search then, however late this task runs.
        let server = try server(["--backend-latency", "2000"])
        let proxy = try TCPProxy(to: server.port)
        let client = try await ViewlineClient.connect(to: .tcp(port: proxy.port))
        let stream = await client.events()
        proxy.cut(afterTheTargetSends: #""loading":true"#)
        #expect(try await client.send("search dumpling") == ["accepted": true, "query": "dumpling"])
        let seen = try await events(stream, until: Self.isDisplay("search") { $0["loading"] == false })
        #expect(seen.contains(.connection(.reconnecting)))
        // The replay may come before the attach's reply says the client is connected again.
        if !seen.contains(.connection(.connected)) { _ = try await events(stream) { $0 == .connection(.connected) } }
        let revs = Self.revs(seen)
        #expect(revs == revs.sorted() && Set(revs).count == revs.count, "\(revs)")  // replayed from last-rev: no gap counted twice
        let search = try await client.state("search", as: SearchState.self)
        #expect(search.query == "dumpling" && !search.loading && !search.results.isEmpty)
        #expect(await client.resumed == 1)
        await client.close()
    }

    @Test func aConnectionDroppedMidSaveRetryKeepsTheAlertAndSavesOnce() async throws {
        let server = try server()
        let proxy = try TCPProxy(to: server.port)
        let client = try await ViewlineClient.connect(to: .tcp(port: proxy.port))
        let stream = await client.events()
        try await startAFailingSave(on: client, draft: "call the plumber")
        let alert = try await nextAlert(stream)
        proxy.cut()  // the alert is up, the person has not answered yet
        _ = try await events(stream) { $0 == .connection(.connected) }
        // The same alert is still the one presented after the resume, and answering it
        // saves the draft once.
        #expect(await client.presentedAlert?.id == alert.id)
        try await client.send("confirm")
        _ = try await events(stream, until: Self.isDisplay("draft") { $0["pending"] == false && $0["saving"] == false })
        let saved = try await client.send("saved")["drafts"]?.arrayValue ?? []
        #expect(saved.compactMap { $0["text"]?.stringValue } == ["call the plumber"])
        #expect(await client.resumed == 1)
        await client.close()
    }

    @Test func aRollingRestartOfAClusterKeepsTheSession() async throws {
        let postgres = PostgresServer.shared
        let url = postgres.url(database: try await postgres.createDatabase())
        let ports = try (0..<2).map { _ in try freePort() }
        func start(_ index: Int) throws -> ServerProcess {
            try ServerProcess([
                "--postgres", url, "--demo", "--node-timeout", "1", "--drain-seconds", "1", "--port", String(ports[index]),
            ])
        }
        var nodes = [try start(0), try start(1)]
        let client = try await ViewlineClient.connect(
            to: .tcp(port: ports[0]), options: .init(timeout: .seconds(20), nodes: [.tcp(port: ports[1])]))
        let stream = await client.events()
        try await client.send("login alice wonderland")
        try await client.send("search golden")
        _ = try await events(stream, until: Self.isDisplay("search") { $0["loading"] == false })
        let (session, token) = (await client.session, await client.token)
        for index in [0, 1] {  // the client is on this node now
            nodes[index].signal(SIGTERM)
            _ = try await nodes[index].waitForExit(timeout: .seconds(20))
            let seen = try await events(stream) { $0 == .connection(.connected) }
            #expect(seen.contains { if case .bye(let bye) = $0 { bye.code == .shutdown } else { false } })
            #expect(try await client.send("state session")["state"] == ["user": "alice", "loggedIn": true])
            #expect(try await client.send("state search")["state"]?["query"] == "golden")
            #expect(await client.resumed == index + 1)
            #expect(await client.session == session)
            #expect(await client.token == token)
            nodes[index] = try start(index)
        }
        await client.close()
        for node in nodes { node.signal(SIGTERM) }
    }

    @Test(arguments: [SIGTERM, SIGKILL])
    func aRestartOfASingleNodeOnItsFileKeepsTheSession(signal: Int32) async throws {
        let (port, database) = (try freePort(), NSTemporaryDirectory() + "viewline-client-restart-\(UUID().uuidString).sqlite")
        func start() throws -> ServerProcess {
            try ServerProcess(["--db", database, "--demo", "--drain-seconds", "1", "--port", String(port)])
        }
        var server = try start()
        var options = ViewlineClient.Options(timeout: .seconds(20))
        // Long enough to wait out a restart: every 200 ms for 10 s.
        (options.reconnectAttempts, options.backoff) = (50, { _ in .milliseconds(200) })
        let client = try await ViewlineClient.connect(to: .tcp(port: port), options: options)
        try await client.send("login alice wonderland")
        try await client.send("search golden")
        _ = try await client.waitForDisplay("search") { $0["loading"] == false }
        let (session, token) = (await client.session, await client.token)
        try await Task.sleep(for: .milliseconds(300))  // past the record lag (a tenth of a second)
        server.signal(signal)
        _ = try await server.waitForExit(timeout: .seconds(20))
        server = try start()
        // A command sent on the dead connection would fail as "may or may not have
        // run" (the client cannot know): wait for the resume, as a program would.
        let deadline = ContinuousClock.now + .seconds(20)
        while await client.resumed == 0, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
        #expect(try await client.send("state session")["state"] == ["user": "alice", "loggedIn": true])
        #expect(try await client.send("state search")["state"]?["query"] == "golden")
        #expect(await client.resumed == 1)
        #expect(await client.session == session)
        #expect(await client.token == token)
        await client.close()
        server.signal(SIGTERM)
    }

    @Test func attachFollowsMovedToTheNodeThatHoldsTheSession() async throws {
        let postgres = PostgresServer.shared
        let url = postgres.url(database: try await postgres.createDatabase())
        let nodes = try (0..<2).map { _ in try ServerProcess(["--postgres", url, "--demo", "--port", "0"]) }
        defer { for node in nodes { node.signal(SIGTERM) } }
        let owner = try await ViewlineClient.connect(to: .tcp(port: nodes[0].port))
        try await owner.send("login alice wonderland")
        let token = await owner.token
        try await Task.sleep(for: .milliseconds(300))  // its record is written
        // Started on the other node: `moved` there, then attached on the owner.
        let device = try await ViewlineClient.connect(to: .tcp(port: nodes[1].port))
        let messages = await device.messages()
        let result = try await device.attach(token: token)
        #expect(result["snapshot"] == true)
        #expect(try await device.send("state session")["state"]?["user"] == "alice")
        #expect(await device.token == token)
        var sawMoved = false
        for await message in messages {
            if message["error"]?["code"] == "moved" { sawMoved = true }
            if message["result"]?["state"]?["user"] == "alice" { break }
        }
        #expect(sawMoved)
        await device.close()
        await owner.close()
    }

    func freePort() throws -> Int { try ServerProcess.freePort() }
}

/// The same client over the web listener's WebSocket (`/ws`): one line per text message.
@Suite struct ClientWebSocketTests {
    @Test func aSessionOverTheWebSocketIsTheSameSessionAsOverTCP() async throws {
        let server = try ServerProcess(["--db", ":memory:", "--demo", "--web-port", "0"])
        let webPort = try #require(server.webPort)
        let web = try await ViewlineClient.connect(to: .webSocket(port: webPort))
        #expect(try await web.send("login alice wonderland")["user"] == "alice")
        try await web.send("search thai")
        let results = try await web.waitForDisplay("search") { $0["loading"] == false }
        #expect((results["results"]?.arrayValue?.count ?? 0) > 0)
        // A TCP client joins the same session: what it does shows on the WebSocket.
        let tcp = try await ViewlineClient.connect(to: .tcp(port: server.port))
        #expect(try await tcp.attach(token: await web.token)["snapshot"] == true)
        try await tcp.send("search pizza")
        let pizza = try await web.waitForDisplay("search") { $0["query"] == "pizza" && $0["loading"] == false }
        #expect((pizza["results"]?.arrayValue?.count ?? 0) > 0)
        await tcp.close()
        await web.close()
        #expect(Endpoint.webSocket(URL(string: "http://10.0.0.7:8079/")!) == .webSocket(host: "10.0.0.7", port: 8079))
    }
}

/// The Swift client behind Debian's HAProxy (the shipped `deploy/haproxy.cfg`): it
/// knows only the proxy, and resumes its session through it when the node restarts.
@Suite(.enabled(if: LoadBalancer.isInstalled, "haproxy is not installed (./dev setup installs it)"))
struct LoadBalancedClientTests {
    @Test func theClientResumesThroughTheProxyWhenItsNodeRestarts() async throws {
        let balancer = try LoadBalancer()
        let arguments =
            ["--db", NSTemporaryDirectory() + "viewline-client-lb-\(UUID().uuidString).sqlite", "--demo", "--drain-seconds", "1"]
            + balancer.nodeArguments(0)
        var server = try ServerProcess(arguments)
        var options = ViewlineClient.Options(timeout: .seconds(20))
        (options.reconnectAttempts, options.backoff) = (75, { _ in .milliseconds(200) })
        // The proxy serves once the node's health check has passed twice (seconds, more
        // on a loaded machine): a plain connection finds out first.
        let deadline = ContinuousClock.now + .seconds(60)
        while (try? LineClient(port: balancer.lines).next(timeout: .seconds(2)))?["type"] != "welcome" {
            guard ContinuousClock.now < deadline else {
                Issue.record("the proxy served nothing within 60 s")
                return
            }
            try await Task.sleep(for: .milliseconds(200))
        }
        let client = try await ViewlineClient.connect(to: .tcp(port: balancer.lines), options: options)
        try await client.send("login alice wonderland")
        try await client.send("search golden")
        _ = try await client.waitForDisplay("search") { $0["loading"] == false }
        let (session, token) = (await client.session, await client.token)
        server.signal(SIGTERM)
        _ = try await server.waitForExit(timeout: .seconds(20))
        server = try ServerProcess(arguments)
        let resumed = ContinuousClock.now + .seconds(30)
        while await client.resumed == 0, ContinuousClock.now < resumed { try await Task.sleep(for: .milliseconds(50)) }
        #expect(try await client.send("state search")["state"]?["query"] == "golden")
        #expect(try await client.send("state session")["state"] == ["user": "alice", "loggedIn": true])
        #expect(await client.session == session)
        #expect(await client.token == token)
        await client.close()
        server.signal(SIGTERM)
    }
}
