import Foundation
import Testing
import ViewlineApps
import ViewlineKit
import ViewlineTestSupport

/// The numbered rules of wire protocol v1, against the real server over raw TCP.
@Suite(.blocksItsThread) struct WireProtocolTests {
    @Test func rule1_welcomeCarriesProtocolSessionAndASecretToken() throws {
        let server = try startServer()
        let a = try LineClient(port: server.port)
        let b = try LineClient(port: server.port)
        let first = try a.next(), second = try b.next()
        #expect(first.type == "welcome")
        #expect(first["protocol"] == 1)
        #expect(first["session"] != second["session"])
        let token = try #require(first["token"]?.stringValue)
        #expect(token.count >= 32)  // ≥ 128 bits of hex
        #expect(token != second["token"]?.stringValue)
    }

    @Test func rule2_inlineAndJSONFormsCaseInsensitiveAndBlankLinesIgnored() throws {
        let server = try startServer()
        let client = try connect(server)
        try client.send("")
        try client.send("   ")
        try client.send("PiNg\r")
        #expect(try client.next()["result"]?["pong"] == true)
        let reply = try client.command(#"{"id":"x1","cmd":"ping"}"#)
        #expect(reply["re"] == "x1")
        #expect(client.received.filter { $0.type == "reply" }.count == 2)
    }

    @Test func rule3_oneReplyPerCommandInOrderEchoingIds() throws {
        let server = try startServer()
        let client = try connect(server)
        // Pipelined in one write.
        let lines = [
            #"{"id":1,"cmd":"ping"}"#, "bogus", #"{"id":"three","cmd":"state","args":{"view":"draft"}}"#, #"{"id":4.5,"cmd":"nope"}"#, "ping",
        ]
        try client.sendRaw(Array(lines.joined(separator: "\n").utf8) + [0x0A])
        var replies: [JSON] = []
        while replies.count < 5 { let m = try client.next(); if m.type == "reply" { replies.append(m) } }
        #expect(replies.map { $0["re"] } == [1, .null, "three", 4.5, .null])
        #expect(replies.map(\.isOK) == [true, false, true, false, true])
        #expect(replies[1].errorCode == "unknown_command")
    }

    @Test func rule3_aNumberIdIsEchoedByteForByte() throws {
        let server = try startServer()
        let client = try connect(server)
        // Ids a double would rewrite (precision, trailing zeros, exponents, -0), and a failing command.
        let ids = ["12345678901234567890", "1.50", "1e3", "-0", "0.1", "9007199254740993", "1e-400"]
        for id in ids {
            try client.send(#"{"id":\#(id),"cmd":"ping"}"#)
            let line = String(decoding: try #require(try client.readLine(timeout: .seconds(5))), as: UTF8.self)
            #expect(line.hasPrefix(#"{"type":"reply","re":\#(id),"ok":true"#), "\(line)")
        }
        try client.send(#"{"id":12345678901234567890,"line":"nope"}"#)
        let failed = String(decoding: try #require(try client.readLine(timeout: .seconds(5))), as: UTF8.self)
        #expect(failed.hasPrefix(#"{"type":"reply","re":12345678901234567890,"ok":false"#), "\(failed)")
        // Past a double's range an id is no number a client could read back: refused
        // as any such number is, with no id to echo.
        try client.send(#"{"id":1e400,"cmd":"ping"}"#)
        let refused = try client.next()
        #expect(refused["re"] == .null && refused.errorCode == "bad_json", "\(refused)")
    }

    @Test func rule3_aCommandThatAwaitsIsNotOvertakenByTheImmediateOnesBehindIt() throws {
        let server = try startServer()
        let client = try connect(server)
        // `ping` and `state` run in the read that brings them; `login` awaits the
        // password pool. Read in one burst, they still run (and reply) in order.
        let lines = ["ping", "login alice wonderland", #"{"id":"s","cmd":"state","args":{"view":"session"}}"#, #"{"id":4,"cmd":"ping"}"#]
        try client.sendRaw(Array(lines.joined(separator: "\n").utf8) + [0x0A])
        var replies: [JSON] = []
        while replies.count < 4 { let m = try client.next(); if m.type == "reply" { replies.append(m) } }
        #expect(replies.map { $0["re"] } == [.null, .null, "s", 4])
        #expect(replies[1]["result"]?["user"] == "alice")
        #expect(replies[2]["result"]?["state"]?["loggedIn"] == true)  // ran after login finished
        // Then, with nothing queued, commands run at once again.
        #expect(try client.command("state session")["result"]?["state"]?["user"] == "alice")
    }

    @Test func rule7_stateAnswersWhatTheLastDisplayShowed() throws {
        let server = try startServer()
        let client = try connect(server)
        try client.command("search golden")
        let display = try #require(try client.read { $0.type == "display" && $0["state"]?["loading"] == false }.last)
        // Written from the state's kept encoding: the same JSON as the display's.
        #expect(try client.command("state search")["result"] == ["view": "search", "state": display["state"]!])
        let all = try client.command(#"{"id":2,"cmd":"state"}"#)
        #expect(all["result"]?["views"]?["search"] == display["state"])
        let views = Set(all["result"]?["views"]?.objectValue?.keys.map { $0 } ?? [])
        #expect(views.isSuperset(of: ["search", "contacts", "session"]))
    }

    @Test func rule4_displayAlertDismissAndBye() throws {
        let server = try startServer()
        let client = try connect(server)
        try client.command("search golden")
        let display = try client.read { $0.type == "display" && $0["state"]?["loading"] == false }.last!
        #expect(display["view"] == "search")
        #expect(display["state"]?["results"]?.arrayValue?.isEmpty == false)

        try client.command("playlist")  // not logged in: a login alert with fields
        let alert = try client.read { $0.type == "alert" }.last!
        #expect(alert["fields"] == [["name": "user", "label": "User", "secure": false], ["name": "password", "label": "Password", "secure": true]])
        #expect(alert["actions"] == [["role": "confirm", "label": "Log in"], ["role": "cancel", "label": "Cancel"]])
        try client.command("login bob builder")  // logging in otherwise makes the alert moot
        let dismiss = try client.read { $0.type == "dismiss" }.last!
        #expect(dismiss["id"] == alert["id"])

        let reply = try client.command("quit")
        #expect(reply.isOK)
        #expect(try client.next().type == "bye")
        #expect(try client.isClosedByPeer())
    }

    @Test func rule5_revStrictlyIncreasesAndRepeatedAlertsAreDistinct() throws {
        let server = try startServer()
        let client = try connect(server)
        try client.command("fault search 2 the same error")
        try client.command("search a")
        try client.read { $0.type == "alert" }
        try client.command("confirm")
        try client.command("search b")
        try client.read { $0.type == "alert" }
        let events = client.received.filter { $0["rev"] != nil }
        let revs = events.compactMap { $0["rev"]?.intValue }
        #expect(revs == Array(1...revs.count))
        let alerts = events.filter { $0.type == "alert" }
        #expect(alerts.count == 2)
        #expect(alerts[0]["message"] == alerts[1]["message"])
        #expect(alerts[0]["id"] != alerts[1]["id"])
    }

    @Test func rule6_alertsAreModalQueuedAndAnsweredBeforeTheirEffects() throws {
        let server = try startServer()
        let client = try connect(server)
        #expect(try client.command("confirm").errorCode == "no_alert")
        try client.command("fault search 2 boom")
        try client.command("search a")
        try client.read { $0.type == "alert" }
        try client.command("search b")
        try client.read { $0.type == "display" && $0["state"]?["loading"] == false && $0["state"]?["query"] == "b" }
        try client.command("wait")
        #expect(client.received.filter { $0.type == "alert" }.count == 1)  // the second one waits
        #expect(try client.command("cancel").errorCode == "no_cancel_action")
        #expect(try client.command("confirm a9").errorCode == "stale_alert")
        try client.send("confirm a1")
        let reply = try client.next()
        #expect(reply.type == "reply" && reply.isOK)  // the reply comes before the next alert
        #expect(try client.next().type == "dismiss")  // answered: taken down on every connection
        let next = try client.next()
        #expect(next.type == "alert" && next["id"] == "a2")
        // JSON form with the alert id.
        #expect(try client.command(#"{"id":9,"cmd":"confirm","args":{"alert":"a2"}}"#).isOK)
    }

    @Test func rule7_builtInCommands() throws {
        let server = try startServer()
        let client = try connect(server)
        let help = try client.command("help")
        let names = help["result"]?["commands"]?.arrayValue?.compactMap { $0["name"]?.stringValue } ?? []
        #expect(names == Application(SeedApps.all).commands.all.map(\.name))
        #expect(help["result"]?["services"]?.arrayValue?.count == 4)
        #expect(try client.command("ping")["result"] == ["pong": true])
        #expect(try client.command("state search")["result"]?["state"]?["loading"] == false)
        #expect(try client.command("state")["result"]?["views"]?.objectValue?.keys.count == 5)
        #expect(try client.command("state bogus").errorCode == "unknown_view")
    }

    @Test func rule8_badInputGetsStableErrorsAndTheConnectionStaysUsable() throws {
        let server = try startServer(["--max-line-bytes", "100"])
        let client = try connect(server)
        let other = try connect(server)
        #expect(try client.command("teleport home").errorCode == "unknown_command")
        #expect(try client.command("login alice").errorCode == "bad_arguments")
        #expect(try client.command("login alice")["error"]?["message"]?.stringValue?.contains("usage: login <user> <password>") == true)
        #expect(try client.command("{oops").errorCode == "bad_json")
        #expect(try client.command(#"{"id":3,"args":{}}"#).errorCode == "bad_json")
        try client.sendRaw(Array("search caf".utf8) + [0xC3, 0x28, 0x0A])
        #expect(try client.read { $0.type == "reply" }.last?.errorCode == "bad_encoding")
        // A line over the limit, sent in pieces: one error, the rest discarded.
        try client.sendRaw(Array(repeating: UInt8(ascii: "x"), count: 150))
        try client.sendRaw(Array(repeating: UInt8(ascii: "y"), count: 150) + [0x0A])
        #expect(try client.read { $0.type == "reply" }.last?.errorCode == "line_too_long")
        #expect(try client.command("ping").isOK)
        #expect(try client.command("fault nothing").errorCode == "unknown_service")
        // Garbage on one connection never reaches another.
        try client.sendRaw([0x00, 0xFF, 0x0A, 0x0A, 0x7B, 0x0A])
        #expect(try other.command("ping").isOK)
        #expect(other.received.filter { $0.type != "reply" && $0.type != "welcome" }.isEmpty)
        #expect(try client.next().errorCode == "bad_encoding")
        #expect(try client.next().errorCode == "bad_json")
        #expect(try client.command("ping").isOK)
    }

    @Test func aClientThatStopsSendingStillGetsTheEventsOfItsWork() throws {
        let server = try startServer(["--backend-latency", "100"])
        let client = try connect(server)
        try client.send("search ramen")
        client.shutdownWrite()  // like `printf 'search ramen\n' | nc -N`
        let done = try client.read { $0["state"]?["loading"] == false }.last
        #expect(done?["state"]?["query"] == "ramen")
        #expect(try client.isClosedByPeer())
    }

    @Test func faultNeedsAdmin() throws {
        let server = try startServer(admin: false)
        let client = try connect(server)
        #expect(try client.command("fault search").errorCode == "admin_disabled")
    }
}
