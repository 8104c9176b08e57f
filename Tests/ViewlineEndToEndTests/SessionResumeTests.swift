import Foundation
import Testing
import ViewlineTestSupport

/// Sessions outlive their connections (PROTOCOL §2.1), against the real server.
@Suite(.blocksItsThread) struct SessionResumeTests {
    /// A connected client and its session's token.
    func open(_ server: ServerProcess) throws -> (LineClient, String) {
        let client = try LineClient(port: server.port)
        let welcome = try client.next()
        return (client, try #require(welcome["token"]?.stringValue))
    }

    @Test func aDropBetweenTheReplyAndItsEventsLosesNothingOnAttach() throws {
        let server = try startServer(["--backend-latency", "200"])
        var (first, token): (LineClient?, String) = try open(server)
        #expect(try first?.command("search pizza")["result"]?["query"] == "pizza")
        #expect(try first?.next()["rev"] == 1)  // loading; the results come after the drop
        first = nil  // the connection drops before the results
        usleep(1_000_000)  // the results (200 ms) are in the log
        let second = try connect(server)
        try second.send("attach \(token) 1")
        let reply = try second.next()
        #expect(reply["result"] == ["session": "s1", "rev": 2, "replayed": 1, "snapshot": false])
        let missed = try second.next()
        #expect(missed["rev"] == 2 && missed["state"]?["loading"] == false && missed["state"]?["query"] == "pizza")
        // Nothing duplicated: the next line is the reply to the next command.
        #expect(try second.command("ping")["result"] == ["pong": true])
        // And an attach at the newest rev this connection has seen replays only what
        // came after it: nothing, unless the server noticed the first connection's
        // drop only after the second attached (a loaded machine), when the
        // `connections` displays that followed come again.
        let newest = second.received.compactMap { $0["rev"]?.intValue }.max() ?? 0
        #expect(newest >= 2)
        let again = try second.command("attach \(token) \(newest)")
        let replayed = try #require(again["result"]?["replayed"]?.intValue)
        for _ in 0..<replayed {
            let event = try second.next()
            #expect((event["rev"]?.intValue ?? 0) > newest && event["view"] == "connections", "\(event)")
        }
        _ = first
    }

    @Test func aLogThatNoLongerReachesBackGivesASnapshot() throws {
        let server = try startServer()
        let (client, token) = try open(server)
        // 150 searches: 300 events, more than the log keeps.
        try client.sendRaw(Array(String(repeating: "search golden\nwait\n", count: 150).utf8))
        _ = try client.read(until: { $0["rev"] == 300 }, timeout: .seconds(30))
        let other = try connect(server)
        try other.send("attach \(token) 1")
        let reply = try other.next()
        #expect(reply["result"] == ["session": "s1", "rev": 300, "replayed": 0, "snapshot": true])
        let views = try (0..<5).map { _ in try other.next() }
        #expect(views.map { $0["view"]?.stringValue ?? "" } == ["search", "session", "draft", "contacts", "playlist"])
        #expect(views.map { $0["rev"]?.intValue ?? 0 } == [301, 302, 303, 304, 305])
        #expect(views[0]["state"]?["query"] == "golden")
    }

    @Test func twoConnectionsSeeTheSameEventsAndAnAnswerOnOneDismissesOnTheOther() throws {
        let server = try startServer()
        let (first, token) = try open(server)
        let second = try connect(server)
        try second.send("attach \(token)")
        #expect(try second.next()["result"]?["snapshot"] == true)
        for _ in 0..<5 { _ = try second.next() }  // the snapshot reaches only the connection that attached
        // Then both are told the session has two connections: the first sees nothing
        // else (the snapshot's revs are a gap to it, never a repeat).
        let told = try first.next()
        #expect(told["view"] == "connections" && told["state"] == ["count": 2])
        #expect(try second.next()["state"] == ["count": 2])
        #expect(try first.command("fault search 1 boom").isOK)
        try first.send("search x")
        let seenByFirst = try first.read(until: { $0.type == "alert" })
        let seenBySecond = try second.read(until: { $0.type == "alert" })
        #expect(seenByFirst.filter { $0.type != "reply" } == seenBySecond)
        // Answered on the second: it gets the reply, then both get the dismiss.
        try second.send("confirm")
        #expect(try second.next()["result"]?["answer"] == "confirm")
        let dismissOnSecond = try second.next()
        let dismissOnFirst = try first.next()
        #expect(dismissOnFirst.type == "dismiss" && dismissOnFirst == dismissOnSecond)
        #expect(try first.command("confirm").errorCode == "no_alert")
    }

    @Test func wrongAndExpiredTokensGetTheSameBadToken() throws {
        let server = try startServer(["--session-ttl", "1"])
        var (client, token): (LineClient?, String) = try open(server)
        client = nil  // drop: the session expires after a second
        let other = try connect(server)
        let wrong = try other.command("attach \(String(token.reversed()))")
        #expect(wrong.errorCode == "bad_token")
        usleep(1_600_000)
        let expired = try other.command("attach \(token)")
        #expect(expired.errorCode == "bad_token")
        #expect(expired["error"]?["message"] == wrong["error"]?["message"])
        #expect(try other.command(#"{"id":9,"cmd":"attach","args":{"token":7}}"#).errorCode == "bad_arguments")
        _ = client
    }

    @Test func failedAttachesAreThrottledPerAddress() throws {
        let server = try startServer()
        let client = try connect(server)
        for _ in 0..<5 { #expect(try client.command("attach nope").errorCode == "bad_token") }
        #expect(try client.command("attach nope").errorCode == "bad_token")
        let throttled = try client.command("attach nope")
        #expect(throttled.errorCode == "attach_throttled")
        #expect(throttled["error"]?["message"]?.stringValue?.contains("try again in") == true)
    }

    @Test func tokensOfSessionsThatEndedAreNotCountedAsGuesses() throws {
        let server = try startServer()
        // Twelve sessions quit; their tokens come back from one address (a NAT of
        // clients that were away): each is told the session is gone, none throttled.
        var ended: [String] = []
        for _ in 0..<12 {
            let (client, token) = try open(server)
            try client.send("quit")
            _ = try client.read(until: { $0.type == "bye" })
            ended.append(token)
        }
        let client = try connect(server)
        for token in ended { #expect(try client.command("attach \(token)").errorCode == "bad_token") }
        // Guesses (well-formed tokens no server made) still are.
        let guess = String(repeating: "0123456789abcdef", count: 3)
        for _ in 0..<6 { #expect(try client.command("attach \(guess)").errorCode == "bad_token") }
        #expect(try client.command("attach \(guess)").errorCode == "attach_throttled")
    }

    @Test func aClientKilledMidAlertFindsTheAlertAgain() throws {
        let server = try startServer()
        var (client, token): (LineClient?, String) = try open(server)
        #expect(try client?.command("fault search 1 boom").isOK == true)
        try client?.send("search x")
        _ = try client?.read(until: { $0.type == "alert" })
        client = nil  // gone without quit, as a killed client would be
        let next = try connect(server)
        try next.send("attach \(token)")
        let events = try next.read(until: { $0.type == "alert" })
        #expect(events.first?["result"]?["snapshot"] == true)
        #expect(events.last?["id"] == "a1" && events.last?["message"] == "boom")
        #expect(try next.command("confirm")["result"]?["alert"] == "a1")
    }

    @Test func aSlowReaderIsCutOffButItsSessionLivesOn() throws {
        let server = try startServer(["--max-output-bytes", "65536"])
        let (slow, token) = try open(server)
        // 20,000 `help` replies: far more than the kernel's socket buffers hold, so
        // the backlog passes the limit however large they are; it reads nothing meanwhile.
        try slow.sendRaw(Array(String(repeating: "help\n", count: 20_000).utf8))
        let other = try connect(server)
        #expect(try other.command("ping").isOK)
        usleep(1_000_000)
        #expect(try slow.isClosedByPeer(timeout: .seconds(60)))
        try other.send("attach \(token)")
        #expect(try other.next()["result"]?["session"] == "s1")
        _ = try other.read(until: { $0["view"] == "playlist" })
        #expect(try other.command("ping").isOK)
    }

    /// One address attaches at most `--max-attaches-per-second` a second (bursts of
    /// twice that), successful or not: each attach makes the server send a snapshot.
    @Test func attachesFromOneAddressAreRateLimited() throws {
        let server = try startServer(["--max-attaches-per-second", "1"])
        let (_, token) = try open(server)
        let client = try connect(server)
        var codes: [String] = []
        for _ in 0..<12 {
            try client.send("attach \(token)")
            var reply = try client.next()
            while reply["type"] != "reply" { reply = try client.next() }
            codes.append(reply["ok"] == true ? "ok" : reply["error"]?["code"]?.stringValue ?? "?")
        }
        #expect(codes.prefix(2).allSatisfy { $0 == "ok" }, "a burst of twice the rate goes through: \(codes)")
        #expect(codes.filter { $0 == "attach_throttled" }.count >= 8, "the rest wait for the bucket: \(codes)")
    }

    /// A session has at most `--max-connections-per-session` connections: every event
    /// goes to each of them, so this bounds what one event costs.
    @Test func aSessionTakesAtMostItsCapOfConnections() throws {
        let server = try startServer(["--max-connections-per-session", "3"])
        let (owner, token) = try open(server)
        let others = try (0..<2).map { _ in try connect(server) }
        for other in others {
            try other.send("attach \(token)")
            #expect(try other.next()["ok"] == true)
        }
        let fourth = try connect(server)
        try fourth.send("attach \(token)")
        #expect(try fourth.next()["error"]?["code"] == "server_busy")
        #expect(try owner.command("ping").isOK)
    }

    @Test func attachingAndDetachingAThousandTimesLeaksNoSession() throws {
        let server = try startServer(["--max-attaches-per-second", "0"])
        let (owner, token) = try open(server)
        #expect(try owner.command("ping").isOK)
        for _ in 0..<1000 {
            let client = try LineClient(port: server.port)
            _ = try client.next()
            try client.send("attach \(token) 0")
            #expect(try client.next()["result"]?["session"] == "s1")
        }
        let checker = try connect(server)
        usleep(200_000)
        let counts = try checker.command("sessions")["result"]
        // The owner's session and the checker's own: every fresh session was dropped.
        #expect(counts?["sessions"] == 2)
        #expect(counts?["attached"] == 2)
    }
}
