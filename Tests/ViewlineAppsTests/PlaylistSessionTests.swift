import Testing
import ViewlineApps
import ViewlineKit
import ViewlineTesting

@Suite struct PlaylistSessionTests {
    /// The alert that asks for a log-in before the playlist goes on.
    static let loginAlert = AlertContent(
        title: "Log in", message: "Log in to see your playlist.", actions: [.confirm("Log in"), .cancel("Cancel")],
        fields: [AlertField(name: "user", label: "User"), AlertField(name: "password", label: "Password", secure: true)])

    /// The playlist view as the client sees it: the songs at `positions` (the fake's
    /// titles), whether more are reserved, and the flow's step (loading while fetching).
    static func playlist(_ positions: ClosedRange<Int>? = nil, hasMore: Bool = false, step: String) -> JSON {
        let items = (positions.map(Array.init) ?? []).map { position -> JSON in
            ["position": .int(position), "title": .string("Song \(position)"), "artist": "Artist"]
        }
        return ["items": .array(items), "hasMore": .bool(hasMore), "loading": .bool(step == "fetching"), "step": .string(step)]
    }

    /// `playlist` with no valid token: the flow waits for the log-in its alert asks for.
    static func startAwaitingLogin(_ test: TestStore, alert id: String = "a1") async {
        await test.send("playlist", reply: ["accepted": true, "step": "awaitingLogin"])
        await test.receive(Playlist.self, state: playlist(step: "awaitingLogin"))
        #expect(await test.receiveAlert(loginAlert) == id)
    }

    @Test func loginAlertThenThreePagesWithAnExpiryInTheMiddle() async throws {
        let harness = try await TestHarness(tokenLifetime: 60)
        let test = harness.makeStore()
        await Self.startAwaitingLogin(test)

        // Logging in through the alert runs the reserved fetch by itself.
        await test.send("confirm user=alice password=wonderland", reply: ["alert": "a1", "answer": "confirm", "action": "Log in"])
        await test.receiveDismiss("a1")
        await test.receive(Account.self) { $0.user = "alice" }
        await test.receive(Playlist.self, state: Self.playlist(step: "fetching"))
        await test.receive(Playlist.self, state: Self.playlist(1...10, hasMore: true, step: "ready"))

        await test.send("more", reply: ["accepted": true, "step": "fetching"])
        await test.receive(Playlist.self, state: Self.playlist(1...10, hasMore: true, step: "fetching"))
        await test.receive(Playlist.self, state: Self.playlist(1...20, hasMore: true, step: "ready"))

        harness.clock.advance(by: 61)  // the token expires
        await test.send("more", reply: ["accepted": true, "step": "awaitingLogin"])
        await test.receive(Playlist.self, state: Self.playlist(1...20, hasMore: true, step: "awaitingLogin"))
        #expect(await test.receiveAlert(Self.loginAlert) == "a2")
        await test.send("confirm user=alice password=wonderland", reply: ["alert": "a2", "answer": "confirm", "action": "Log in"])
        await test.receiveDismiss("a2")
        await test.receive(Account.self)  // logged in again: alice, as before
        await test.receive(Playlist.self, state: Self.playlist(1...20, hasMore: true, step: "fetching"))
        await test.receive(Playlist.self, state: Self.playlist(1...30, hasMore: true, step: "ready"))

        await test.send("more", reply: ["accepted": true, "step": "fetching"])
        await test.receive(Playlist.self, state: Self.playlist(1...30, hasMore: true, step: "fetching"))
        await test.receive(Playlist.self, state: Self.playlist(1...32, hasMore: false, step: "complete"))
        #expect(harness.playlists.requestedOffsets == [0, 10, 20, 30])
        await test.finish()
    }

    @Test func aWrongPasswordKeepsTheStepPendingForTheNextPlaylist() async throws {
        let harness = try await TestHarness()
        let test = harness.makeStore()
        await Self.startAwaitingLogin(test)
        await test.send("confirm user=alice password=wrong", reply: ["alert": "a1", "answer": "confirm", "action": "Log in"])
        await test.receiveDismiss("a1")
        await test.receive(Playlist.self, state: Self.playlist(step: "loginFailed"))
        await test.receiveAlert(.error("Login failed: wrong user name or password.", title: "Login failed"))
        await test.send("confirm", reply: ["alert": "a2", "answer": "confirm", "action": "OK"])
        await test.receiveDismiss("a2")
        await test.send("login alice wonderland", reply: ["user": "alice", "expiresIn": 3600])
        await test.receive(Account.self) { $0.user = "alice" }
        // The held-back first page is fetched now.
        await test.send("playlist", reply: ["accepted": true, "step": "fetching"])
        await test.receive(Playlist.self, state: Self.playlist(step: "fetching"))
        await test.receive(Playlist.self, state: Self.playlist(1...10, hasMore: true, step: "ready"))
        await test.finish()
    }

    @Test func cancelDropsTheReservedStep() async throws {
        let harness = try await TestHarness()
        let test = harness.makeStore()
        await Self.startAwaitingLogin(test)
        await test.send("cancel", reply: ["alert": "a1", "answer": "cancel", "action": "Cancel"])
        await test.receiveDismiss("a1")
        await test.receive(Playlist.self, state: Self.playlist(step: "cancelled"))
        await test.send("more", fails: .nothingPending)
        await test.finish()
    }

    @Test func aFetchFailureShowsAnAlertAndMoreRetries() async throws {
        let harness = try await TestHarness()
        let test = harness.makeStore()
        await test.send("login bob builder", reply: ["user": "bob", "expiresIn": 3600])
        await test.receive(Account.self) { $0.user = "bob" }
        harness.playlists.failNext()
        await test.send("playlist", reply: ["accepted": true, "step": "fetching"])
        await test.receive(Playlist.self, state: Self.playlist(step: "fetching"))
        await test.receive(Playlist.self, state: Self.playlist(step: "failed"))
        await test.receiveAlert(.error("Could not load the playlist: playlist server unavailable"))
        await test.send("confirm", reply: ["alert": "a1", "answer": "confirm", "action": "OK"])
        await test.receiveDismiss("a1")
        await test.send("more", reply: ["accepted": true, "step": "fetching"])
        await test.receive(Playlist.self, state: Self.playlist(step: "fetching"))
        await test.receive(Playlist.self, state: Self.playlist(1...7, step: "complete"))
        await test.finish()
    }

    @Test func loggingInByCommandWhileTheLoginAlertIsUpContinuesTheFlow() async throws {
        let harness = try await TestHarness()
        let test = harness.makeStore()
        await Self.startAwaitingLogin(test)
        await test.send("login bob builder", reply: ["user": "bob", "expiresIn": 3600])
        await test.receive(Account.self) { $0.user = "bob" }
        await test.receiveDismiss("a1")  // the login alert is moot
        await test.receive(Playlist.self, state: Self.playlist(step: "fetching"))
        await test.receive(Playlist.self, state: Self.playlist(1...7, step: "complete"))
        await test.finish()
    }
}
