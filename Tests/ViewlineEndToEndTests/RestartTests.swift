import Foundation
import Testing
import ViewlineProtocol
import ViewlineTestSupport

#if canImport(Glibc)
    import Glibc
#endif

/// A single node keeps its sessions' records in its SQLite file: a client that
/// resumes after the server was restarted (a deploy, a crash) gets its session back
/// — its views, its user, an alert it had not answered — as after a failover.
@Suite(.blocksItsThread) struct RestartTests {
    /// A client's hold on a session: its token and the last rev it saw.
    struct Resume {
        var token: String
        var rev: Int
        init(_ client: LineClient, welcome: JSON) {
            token = welcome["token"]?.stringValue ?? ""
            rev = client.received.compactMap { $0["rev"]?.intValue }.max() ?? 0
        }
    }

    /// A server on `path` and a client whose welcome it kept.
    func session(on server: ServerProcess) throws -> (LineClient, JSON) {
        let client = try LineClient(port: server.port)
        return (client, try client.next())
    }

    @Test func aSessionComesBackAfterSIGTERMAndRestart() throws {
        let path = temporaryPath("restart.sqlite")
        var resume: Resume
        let sessionID: String?
        do {
            let server = try startServer(database: path)
            let (client, welcome) = try session(on: server)
            sessionID = welcome["session"]?.stringValue
            try client.command("login alice wonderland")
            try client.command("search thai")
            try client.read { $0.type == "display" && $0["view"] == "search" && $0["state"]?["loading"] == false }
            resume = Resume(client, welcome: welcome)
            server.signal(SIGTERM)
            let bye = try client.read { $0.type == "bye" }.last
            #expect(bye?["code"] == "shutdown")
            #expect(try server.waitForExit() == 0)
        }
        let server = try startServer(database: path)
        let client = try connect(server)
        let attached = try client.command("attach \(resume.token) \(resume.rev)")
        #expect(attached.isOK)
        #expect(attached["result"]?["session"]?.stringValue == sessionID)
        #expect(attached["result"]?["snapshot"] == true)
        // The snapshot is numbered above every rev the client saw.
        #expect((attached["result"]?["rev"]?.intValue ?? 0) > resume.rev)
        #expect(try client.command("state session")["result"]?["state"] == ["user": "alice", "loggedIn": true])
        let search = try client.command("state search")["result"]?["state"]
        #expect(search?["query"] == "thai")
        #expect(search?["results"]?.arrayValue?.isEmpty == false)
        // A new session here is never named like the restored one.
        let other = try connect(server)
        #expect(other.received.first?["session"]?.stringValue != sessionID)
    }

    @Test func aSessionComesBackAfterSIGKILLWithinTheRecordLag() throws {
        let path = temporaryPath("crash.sqlite")
        var resume: Resume
        do {
            let server = try startServer(database: path)
            let (client, welcome) = try session(on: server)
            try client.command("login bob builder")
            try client.command("draft half a thought")
            try client.command("search noodles")
            try client.read { $0.type == "display" && $0["view"] == "search" && $0["state"]?["loading"] == false }
            resume = Resume(client, welcome: welcome)
            // A record goes a tenth of a second after a change (this session changed three
            // times: within its five a second); a quarter is ample.
            usleep(250_000)
            server.signal(SIGKILL)
            _ = try server.waitForExit()
        }
        let server = try startServer(database: path)
        let client = try connect(server)
        #expect(try client.command("attach \(resume.token) \(resume.rev)").isOK)
        #expect(try client.command("state session")["result"]?["state"]?["user"] == "bob")
        #expect(try client.command("state search")["result"]?["state"]?["query"] == "noodles")
        // The drafts flow runs its restore: the pending draft is offered again.
        let offer = client.received.last { $0.type == "alert" }
        #expect(offer?["message"]?.stringValue?.contains("unsaved data from last time") == true)
    }

    @Test func aSessionThatExpiredWhileTheServerWasDownIsNotRestored() throws {
        let path = temporaryPath("expired.sqlite")
        var resume: Resume
        do {
            let server = try startServer(["--session-ttl", "1"], database: path)
            let (client, welcome) = try session(on: server)
            try client.command("search thai")
            resume = Resume(client, welcome: welcome)
            server.signal(SIGTERM)
            _ = try server.waitForExit()
        }
        usleep(1_500_000)  // past the session's time to live
        let server = try startServer(["--session-ttl", "1"], database: path)
        let client = try connect(server)
        #expect(try client.command("attach \(resume.token) \(resume.rev)").errorCode == "bad_token")
    }

    @Test func aSecondServerOnTheSameFileRefusesToStart() throws {
        let path = temporaryPath("shared.sqlite")
        let server = try startServer(database: path)
        #expect(throws: (any Error).self) { try startServer(database: path) }
        // The first one still serves.
        _ = try connect(server)
    }

    @Test func anInMemoryServerKeepsNothing() throws {
        let resume: Resume
        do {
            let server = try startServer()
            let (client, welcome) = try session(on: server)
            try client.command("search thai")
            resume = Resume(client, welcome: welcome)
        }
        let server = try startServer()
        let client = try connect(server)
        #expect(try client.command("attach \(resume.token) \(resume.rev)").errorCode == "bad_token")
    }
}
