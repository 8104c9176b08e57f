import Foundation
import Testing
import ViewlineProtocol
import ViewlineTestSupport

#if canImport(Glibc)
    import Glibc
#endif

/// The seed flows over TCP, against the real server and database.
@Suite(.blocksItsThread) struct FlowsEndToEndTests {
    @Test func searchShowsLoadingThenResults() throws {
        let server = try startServer()
        let client = try connect(server)
        try client.send("search thai food")
        let reply = try client.next()
        #expect(reply.type == "reply" && reply["result"]?["accepted"] == true)
        let loading = try client.next()
        #expect(loading["state"]?["loading"] == true && loading["state"]?["query"] == "thai food")
        let done = try client.next()
        #expect(done["state"]?["loading"] == false)
        let results = try #require(done["state"]?["results"]?.arrayValue)
        #expect(!results.isEmpty && results.count <= 20)
        #expect(results.allSatisfy { $0["cuisine"] == "thai" })
        #expect(results.allSatisfy { $0["name"] != nil && $0["address"] != nil && $0["lat"] != nil && $0["lon"] != nil })
    }

    @Test func latestSearchWinsWithLatency() throws {
        let server = try startServer(["--backend-latency", "150"])
        let client = try connect(server)
        try client.command("search thai")
        try client.command("search korean")
        let done = try client.read { $0.type == "display" && $0["state"]?["loading"] == false }.last!
        #expect(done["state"]?["query"] == "korean")
        try client.command("wait")
        let displays = client.received.filter { $0.type == "display" }
        #expect(displays.count == 3)
        #expect(displays.filter { $0["state"]?["loading"] == false }.count == 1)
    }

    @Test func saveRetryLoopFailsTwiceThenSucceeds() throws {
        let server = try startServer()
        let client = try connect(server)
        try client.command("login alice wonderland")
        try client.command("draft meeting notes")
        try client.command("fault save 2 disk full")
        try client.command("save")
        let first = try client.read { $0.type == "alert" }.last!
        #expect(first["title"] == "Error")
        #expect(first["message"]?.stringValue?.contains("disk full") == true)
        #expect(first["actions"] == [["role": "confirm", "label": "Save"], ["role": "cancel", "label": "Discard"]])
        try client.command("confirm")
        let second = try client.read { $0.type == "alert" }.last!
        #expect(second["id"] != first["id"])
        #expect(second["message"] == first["message"])
        try client.command("confirm")
        try client.read { $0.type == "display" && $0["view"] == "draft" && $0["state"]?["pending"] == false }
        let saved = try client.command("saved")
        #expect(saved["result"]?["drafts"]?.arrayValue?.first?["text"] == "meeting notes")
    }

    @Test func discardDropsTheDraft() throws {
        let server = try startServer()
        let client = try connect(server)
        try client.command("login bob builder")
        try client.command("draft scratch")
        try client.command("fault save")
        try client.command("save")
        try client.read { $0.type == "alert" }
        try client.command("cancel")
        try client.command("wait")
        #expect(try client.command("state draft")["result"]?["state"] == ["text": "", "pending": false, "saving": false])
        #expect(try client.command("saved")["result"]?["drafts"] == [])
        #expect(try client.command("save").errorCode == "nothing_to_save")
    }

    @Test func aPendingDraftSurvivesSIGKILLAndIsOfferedAtTheNextLogin() throws {
        let path = temporaryPath("drafts.sqlite")
        do {
            let server = try startServer(database: path)
            let client = try connect(server)
            try client.command("login alice wonderland")
            #expect(try client.command("draft do not lose me").isOK)
            server.signal(SIGKILL)  // right after the reply
            _ = try server.waitForExit()
        }
        let server = try startServer(database: path)
        let client = try connect(server)
        try client.command("login alice wonderland")
        let alert = try client.read { $0.type == "alert" }.last!
        #expect(alert["title"] == "")
        #expect(alert["message"]?.stringValue?.contains("unsaved data from last time") == true)
        try client.command("confirm")
        try client.read { $0.type == "display" && $0["view"] == "draft" && $0["state"]?["pending"] == false }
        #expect(try client.command("saved")["result"]?["drafts"]?.arrayValue?.first?["text"] == "do not lose me")
        // Another user never sees it.
        let bob = try connect(server)
        try bob.command("login bob builder")
        try bob.command("wait")
        #expect(bob.received.filter { $0.type == "alert" }.isEmpty)
    }

    @Test func twoSessionsBothReceiveAContactsChange() throws {
        let remote = temporaryPath("contacts.json")
        try #"[{"name":"Ada","phone":"1","address":"London"}]"#.write(toFile: remote, atomically: true, encoding: .utf8)
        let server = try startServer(["--remote-contacts", remote])
        let a = try connect(server), b = try connect(server)
        for client in [a, b] {
            try client.command("contacts")
            try client.command("wait")
            #expect(client.received.last { $0["view"] == "contacts" }?["state"]?["items"]?.arrayValue?.count == 1)
        }
        try #"[{"name":"Ada","phone":"1","address":"London"},{"name":"Alan","phone":"2","address":"Wilmslow"}]"#
            .write(toFile: remote, atomically: true, encoding: .utf8)
        try a.command("sync")
        for client in [a, b] {
            try client.read { $0["view"] == "contacts" && $0["state"]?["items"]?.arrayValue?.count == 2 }
        }
    }

    @Test func theFirstSyncIntoAnEmptyFileDatabaseNeverShowsAnEmptyListAfterTheItems() throws {
        for _ in 0..<5 {
            let server = try startServer(database: temporaryPath("contacts.sqlite"))
            let client = try connect(server)
            try client.command("contacts")
            try client.command("wait")
            try client.command("ping")  // late observation values have had a round trip to arrive
            let counts = client.received.filter { $0["view"] == "contacts" }.compactMap { $0["state"]?["items"]?.arrayValue?.count }
            #expect(counts.first == 0 && counts.last == 8)
            #expect(counts.drop { $0 == 0 }.allSatisfy { $0 == 8 }, "displayed item counts: \(counts)")
        }
    }

    @Test func aFailingSyncKeepsTheOldItems() throws {
        let server = try startServer()
        let client = try connect(server)
        try client.command("contacts")
        try client.command("wait")
        let before = client.received.last { $0["view"] == "contacts" }?["state"]?["items"]
        #expect(before?.arrayValue?.count == 8)
        try client.command("fault sync 1 remote unreachable")
        try client.command("sync")
        let alert = try client.read { $0.type == "alert" }.last!
        #expect(alert["message"]?.stringValue?.contains("remote unreachable") == true)
        #expect(alert["actions"] == [["role": "confirm", "label": "OK"]])
        try client.command("wait")
        #expect(client.received.last { $0["view"] == "contacts" }?["state"]?["items"] == before)
        #expect(try client.command("state contacts")["result"]?["state"]?["items"] == before)
    }

    @Test func playlistLoginStepAndThreePagesWithAnExpiryInTheMiddle() throws {
        let server = try startServer(["--token-ttl", "2"])
        let client = try connect(server)
        try client.command("playlist")
        let login = try client.read { $0.type == "alert" }.last!
        #expect(login["title"] == "Log in")
        try client.command(#"{"id":1,"cmd":"confirm","args":{"fields":{"user":"alice","password":"wonderland"}}}"#)
        try client.read { $0["view"] == "playlist" && $0["state"]?["step"] == "ready" }
        try client.command("more")
        try client.read { $0["view"] == "playlist" && $0["state"]?["items"]?.arrayValue?.count == 20 }
        usleep(2_100_000)  // the two-second token expires
        try client.command("more")
        let again = try client.read { $0.type == "alert" }.last!
        #expect(again["title"] == "Log in")
        try client.command("confirm user=alice password=wonderland")
        let third = try client.read { $0["view"] == "playlist" && $0["state"]?["items"]?.arrayValue?.count == 30 }.last!
        let positions = third["state"]?["items"]?.arrayValue?.compactMap { $0["position"]?.intValue }
        #expect(positions == Array(1...30))
        #expect(third["state"]?["hasMore"] == true)
    }
}
