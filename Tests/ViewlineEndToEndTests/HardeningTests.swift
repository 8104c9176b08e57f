import Foundation
import Testing
import ViewlineProtocol
import ViewlineTestSupport

/// Limits that protect the server from too many clients, and secrets kept out of logs.
@Suite(.blocksItsThread) struct HardeningTests {
    @Test func oneClientTooManyIsToldByeAndClosed() throws {
        let server = try startServer(["--max-clients", "2"])
        let first = try connect(server)
        let second = try connect(server)
        let third = try LineClient(port: server.port)
        #expect(try third.next() == ["type": "bye", "reason": "max clients reached", "code": "refused"])
        #expect(throws: (any Error).self) { try third.next() }  // closed
        // The others are served as usual, and a place frees up when one leaves.
        #expect(try first.command("ping").isOK)
        #expect(try second.command("quit").isOK)
        var fourth: LineClient?
        for _ in 0..<100 {
            let client = try LineClient(port: server.port)
            if try client.next().type == "welcome" { fourth = client; break }
            usleep(20_000)
        }
        #expect(try fourth?.command("ping").isOK == true)
    }

    @Test func aPipelinedFloodBehindASlowCommandIsAnsweredInOrder() throws {
        // The login hashes a password while 3,000 commands arrive: the connection's
        // queue fills, reading pauses (TCP pushes back) and resumes; nothing is lost.
        let server = try startServer()
        let client = try connect(server)
        let flood = (1...3000).map { #"{"id":\#($0),"cmd":"ping"}"# + "\n" }.joined()
        try client.sendRaw(Array(("login alice wonderland\n" + flood).utf8))
        #expect(try client.next(timeout: .seconds(30))["ok"] == true)
        for id in 1...3000 {
            var reply = try client.next(timeout: .seconds(30))
            while reply.type != "reply" { reply = try client.next(timeout: .seconds(30)) }  // the login's displays
            guard reply["re"] == .int(id), reply["ok"] == true else {
                Issue.record("reply \(id) was \(reply)")
                return
            }
        }
        #expect(try client.command("state search").isOK)
    }

    @Test(arguments: ["text", "json"]) func noPasswordTokenOrSecureFieldReachesTheLogEvenAtTrace(format: String) throws {
        let log = temporaryPath("trace.log")
        let server = try ServerProcess(["--db", ":memory:", "--admin", "--demo", "--log-format", format], logFile: log, logLevel: "trace")
        let client = try LineClient(port: server.port)
        let welcome = try client.next()
        let token = try #require(welcome["token"]?.stringValue)
        #expect(try client.command("login alice wonderland").isOK)
        #expect(try client.command(#"{"cmd":"login","args":{"user":"bob","password":"builder-typo"}}"#).errorCode == "login_failed")
        #expect(try client.command("logout").isOK)
        try client.send("playlist")
        while try client.next().type != "alert" {}
        try client.send("confirm user=alice password=wonderland")
        while true {
            let message = try client.next()
            if message.type == "display", message["state"]?["step"] == "ready" { break }
        }
        #expect(try client.command("quit").isOK)
        _ = try? client.next()
        server.signal(SIGTERM)
        _ = try server.waitForExit()
        let text = try String(contentsOfFile: log, encoding: .utf8)
        #expect(text.contains("command"), "the trace log has the commands")
        for secret in ["wonderland", "builder-typo", token] {
            #expect(!text.contains(secret), "\(secret) is in the log")
        }
        if format == "json" {
            // One object per line, each with its time, level and message.
            let lines = text.split(separator: "\n")
            #expect(!lines.isEmpty)
            for line in lines {
                let object = try JSON.parse(String(line))
                #expect(object["time"]?.stringValue?.hasSuffix("Z") == true && object["level"] != nil && object["message"] != nil, "\(line)")
            }
            #expect(lines.contains { (try? JSON.parse(String($0)))?["cmd"] == "login" })
        }
    }
}

/// The demo users exist only where asked for.
@Suite(.blocksItsThread) struct DemoUsersTests {
    @Test func withoutDemoTheDemoPasswordsLogNobodyIn() throws {
        let server = try ServerProcess(["--db", ":memory:"])
        let client = try connect(server)
        #expect(try client.command("login alice wonderland").errorCode == "login_failed")
        #expect(try client.command("login bob builder").errorCode == "login_failed")
    }
}
