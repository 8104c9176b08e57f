import Foundation
import Testing
import ViewlineProtocol
import ViewlineTestSupport

/// Several connections on one session, and connections moving between sessions
/// (PROTOCOL §2.1, §3.3, §4), against the real server: replies before their
/// events on each connection, nothing delivered twice, no live session closed by
/// somebody else's `attach`, and never a connection left on a session that no
/// longer answers.
@Suite(.blocksItsThread) struct MultiConnectionTests {
    func open(_ server: ServerProcess) throws -> (LineClient, String) {
        let client = try LineClient(port: server.port)
        let welcome = try client.next()
        return (client, try #require(welcome["token"]?.stringValue))
    }

    @Test func aCommandsEventsWaitForItsReplyWhileAnotherConnectionRunsCommands() throws {
        let server = try startServer()
        for round in 0..<3 {
            let (a, token) = try open(server)
            let b = try connect(server)
            try b.send("attach \(token)")
            // Both are told the session has two connections now: the last event of the attach.
            _ = try b.read(until: { $0["view"] == "connections" })
            _ = try a.read(until: { $0["view"] == "connections" })
            // A's log-in suspends (password hashing) while B's pings run and finish.
            try a.send("login alice wonderland")
            try b.sendRaw(Array(String(repeating: "ping\n", count: 200).utf8))
            let first = try a.next()
            #expect(first.type == "reply" && first["result"]?["user"] == "alice", "round \(round): \(first.encoded)")
            let events = try a.read(until: { $0["view"] == "session" })
            #expect(events.last?["state"]?["loggedIn"] == true)
            // B sees the same display, and every one of its 200 replies.
            let seenByB = try b.read(until: { $0["view"] == "session" && $0["state"]?["loggedIn"] == true }, timeout: .seconds(10))
            let pongs = seenByB.filter { $0.type == "reply" }.count
            let rest = try (pongs..<200).map { _ in try b.next() }
            #expect(rest.allSatisfy { $0.type == "reply" })
        }
    }

    @Test func attachingWithALastRevWhileAnotherConnectionsCommandRunsDeliversEachEventOnce() throws {
        let server = try startServer(["--backend-latency", "50"])
        let (a, token) = try open(server)
        try a.send("search pizza")
        let firstEvents = try a.read(until: { $0["state"]?["loading"] == false })
        let rev = try #require(firstEvents.last?["rev"]?.intValue)
        for _ in 0..<10 {
            // A's command is running (its events held for A) while C attaches.
            try a.send("login alice wonderland")
            let c = try connect(server)
            try c.send("attach \(token) \(rev)")
            try c.send("wait")
            try a.send("logout")
            let seen = try c.read(until: { $0.type == "reply" && $0["result"]?["settled"] != nil }, timeout: .seconds(10))
            let revs = seen.compactMap { $0["rev"]?.intValue }
            #expect(revs == revs.sorted() && Set(revs).count == revs.count, "revs \(revs)")
            // A's own two replies, then on to the next round.
            _ = try a.read(until: { $0.type == "reply" && $0["result"]?["user"] == "alice" })
            _ = try a.read(until: { $0.type == "reply" })
        }
    }

    @Test func everyConnectionSeesHowManyThereAreAndOneCanEndTheOthers() throws {
        let server = try startServer()
        let (a, token) = try open(server)
        // Someone who got the token (a link, a shoulder) joins: both are told there are two.
        let b = try connect(server)
        #expect(try b.command("attach \(token)").isOK)
        #expect(try b.read(until: { $0["view"] == "connections" }).last?["state"] == ["count": 2])
        #expect(try a.read(until: { $0["view"] == "connections" }).last?["state"] == ["count": 2])
        // The person ends the others: B is told why (a final code) and closed, and the
        // token changes, so the one B holds joins nothing.
        let ended = try a.command("end-others")
        #expect(ended["result"]?["ended"] == 1)
        let fresh = try #require(ended["result"]?["token"]?.stringValue)
        #expect(fresh != token && fresh.prefix(16) == token.prefix(16))
        #expect(try b.read(until: { $0.type == "bye" }).last?["code"] == "revoked")
        #expect(try b.isClosedByPeer())
        #expect(try a.read(until: { $0["view"] == "connections" }).last?["state"] == ["count": 1])
        let intruder = try connect(server)
        #expect(try intruder.command("attach \(token)")["error"]?["code"] == "bad_token")
        // The new token is the session's, with its state.
        #expect(try a.command("search pizza").isOK)
        let owner = try connect(server)
        #expect(try owner.command("attach \(fresh)")["result"]?["session"] == "s1")
        #expect(try owner.read(until: { $0["view"] == "search" }).last?["state"]?["query"] == "pizza")
        // Alone, ending the others ends none (and still changes the token).
        #expect(try owner.command("end-others")["result"]?["ended"] == 1)
        #expect(try owner.command("end-others")["result"]?["ended"] == 0)
    }

    @Test func attachingTwiceOnOneConnectionLeavesTheFirstSessionAlive() throws {
        let server = try startServer()
        let (b, tokenB) = try open(server)
        let (c, tokenC) = try open(server)
        #expect(try b.command("search pizza").isOK)
        b.shutdownWrite()
        _ = c
        let mover = try connect(server)
        #expect(try mover.command("attach \(tokenB)")["result"]?["session"] == "s1")
        #expect(try mover.command("attach \(tokenC)")["result"]?["session"] == "s2")
        // B lived on: its token still attaches, with its state.
        let back = try connect(server)
        let reply = try back.command("attach \(tokenB)")
        #expect(reply["result"]?["session"] == "s1")
        let search = try back.read(until: { $0["view"] == "search" })
        #expect(search.last?["state"]?["query"] == "pizza")
    }

    @Test func anAttachRacingAQuitIsAnsweredNeverLeftSilent() throws {
        let server = try startServer()
        // Five rounds: a lost race is a failed attach, and the sixth would be throttled.
        for _ in 0..<5 {
            let (owner, token) = try open(server)
            let racer = try connect(server)
            try owner.send("quit")
            try racer.send("attach \(token)")
            try racer.send("ping")
            // Either the attach lost (bad_token, then pong) or it won and the quit
            // ended the session under it (bye): never silence.
            let first = try racer.next(timeout: .seconds(5))
            if first.type == "reply" && first.errorCode == "bad_token" {
                #expect(try racer.next()["result"]?["pong"] == true)
            } else {
                let rest = try racer.read(until: { $0.type == "bye" }, timeout: .seconds(5))
                #expect(rest.last?["reason"] == "session ended")
            }
        }
    }

    @Test func anAlertAnsweredBeforeTheConnectionDroppedIsDismissedOnReplay() throws {
        let server = try startServer()
        var (client, token): (LineClient?, String) = try open(server)
        #expect(try client?.command("fault search 1 boom").isOK == true)
        try client?.send("search x")
        let alert = try #require(try client?.read(until: { $0.type == "alert" }).last)
        let alertRev = try #require(alert["rev"]?.intValue)
        // The answer reaches the server; its reply is lost with the connection.
        try client?.send("confirm")
        usleep(200_000)
        client = nil
        let next = try connect(server)
        try next.send("attach \(token) \(alertRev)")
        let reply = try next.next()
        #expect(reply["result"]?["replayed"] == 1 && reply["result"]?["snapshot"] == false)
        let replayed = try next.next()
        #expect(replayed.type == "dismiss" && replayed["id"] == alert["id"])
        #expect(try next.command("confirm").errorCode == "no_alert")
    }

    @Test func aCommandStillRunningWhenTheSessionEndsIsAnsweredBeforeTheBye() throws {
        // `saved` waits 1 s on the remote store; meanwhile another connection quits.
        let server = try startServer(["--backend-latency", "1000"])
        let (a, token) = try open(server)
        #expect(try a.command("login alice wonderland").isOK)
        let b = try connect(server)
        #expect(try b.command("attach \(token)").isOK)
        try a.send(#"{"id":41,"cmd":"saved"}"#)
        try a.send(#"{"id":42,"cmd":"ping"}"#)  // waits behind `saved`: never runs
        usleep(300_000)
        #expect(try b.command("quit").isOK)
        // Every line the server began is answered before the `bye`, so a client knows a
        // line with no reply by then never ran (PROTOCOL §4).
        let seen = try a.read(until: { $0.type == "bye" })
        let replies = seen.filter { $0.type == "reply" }
        #expect(replies.compactMap { $0["re"]?.intValue } == [41], "\(seen.map(\.encoded))")
        #expect(replies.first?.errorCode == "unavailable")
        #expect(seen.last?["code"] == "ended")
        #expect(try a.isClosedByPeer())
    }
}
