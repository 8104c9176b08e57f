import Foundation
import Testing
import ViewlineProtocol
import ViewlineTestSupport

/// The protocol over WebSocket (`--web-port`, PROTOCOL §9), against the real
/// server: one line per text message, the same session runtime as TCP, the same
/// limits, and the web listener's own security rules.
@Suite(.blocksItsThread) struct WebSocketTests {
    func startWebServer(_ arguments: [String] = []) throws -> (ServerProcess, Int) {
        let server = try startServer(["--web-port", "0"] + arguments)
        return (server, try #require(server.webPort))
    }

    @Test func eachTextMessageIsOneLineInlineOrJSONWithRepliesAndEvents() throws {
        let (server, web) = try startWebServer()
        defer { withExtendedLifetime(server) {} }
        let client = try WebSocketClient(port: web)
        let welcome = try client.next()
        #expect(welcome.type == "welcome" && welcome["token"]?.stringValue?.count == 48)
        #expect(try client.command("ping")["result"]?["pong"] == true)
        let json = try client.command(#"{"id":7,"cmd":"ping"}"#)
        #expect(json["re"] == 7 && json.isOK)
        try client.send("search pizza")
        let events = try client.read(until: { $0["view"] == "search" && $0["state"]?["loading"] == false })
        #expect(events.first?.type == "reply")
        #expect((events.last?["state"]?["results"]?.arrayValue?.count ?? 0) > 0)
        // A message in fragments is one line; a trailing newline changes nothing.
        try client.send("state search\n", fragments: 3)
        let state = try #require(try client.read(until: { $0.type == "reply" }).last)
        #expect(state.isOK && state.encoded.contains(#""query":"pizza""#))
    }

    @Test func aBurstOfLinesGoesOutAsOneFinalTextFrameEachWhateverItsLength() throws {
        // Lines up to 64 KiB and beyond: frame lengths in 7, 16 and 64 bits (RFC 6455 §5.2).
        let (server, web) = try startWebServer(["--max-line-bytes", "200000"])
        defer { withExtendedLifetime(server) {} }
        let client = try WebSocketClient(port: web)
        _ = try client.next()
        // One message of three lines: three replies written together, three frames.
        try client.send("ping\n{\"id\":2,\"cmd\":\"ping\"}\nping")
        var replies: [JSON] = []
        while replies.count < 3 {
            let frame = try #require(try client.nextFrame())
            #expect(frame.opcode == 0x1 && frame.final)
            let message = try JSON.parse(frame.payload)
            if message.type == "reply" { replies.append(message) }
        }
        #expect(replies.map { $0["re"] ?? .null } == [.null, .int(2), .null] && replies.allSatisfy(\.isOK))
        // A reply echoes its command's id: ids of 200 and 70,000 characters.
        for length in [200, 70_000] {
            let id = String(repeating: "x", count: length)
            try client.send(#"{"id":"\#(id)","cmd":"ping"}"#)
            let frame = try #require(try client.nextFrame())
            #expect(frame.opcode == 0x1 && frame.final && frame.payload.count > length)
            let reply = try JSON.parse(frame.payload)
            #expect(reply.type == "reply" && reply["re"]?.stringValue == id && reply.isOK)
        }
    }

    @Test func oneSessionOverTCPAndWebSocketSeesTheSameEvents() throws {
        let (server, web) = try startWebServer()
        defer { withExtendedLifetime(server) {} }
        let tcp = try LineClient(port: server.port)
        let token = try #require(try tcp.next()["token"]?.stringValue)
        let browser = try WebSocketClient(port: web)
        _ = try browser.next()
        let attached = try browser.command("attach \(token) 0")
        #expect(attached.isOK && attached["result"]?["replayed"] == 0)
        // A command typed in one shows on the other; an alert answered on TCP is
        // dismissed on the WebSocket.
        try browser.send("search ramen")
        _ = try tcp.read(until: { $0["view"] == "search" && $0["state"]?["query"] == "ramen" && $0["state"]?["loading"] == false })
        #expect(try tcp.command("fault save 1 disk full").isOK)
        #expect(try tcp.command("login alice wonderland").isOK)
        #expect(try tcp.command("draft over both").isOK)
        #expect(try tcp.command("save").isOK)
        let alert = try browser.read(until: { $0.type == "alert" }).last!
        #expect(try tcp.command("cancel \(alert["id"]!.stringValue!)").isOK)
        let dismissed = try browser.read(until: { $0.type == "dismiss" }).last!
        #expect(dismissed["id"] == alert["id"])
    }

    @Test func aForeignOriginIsRefusedAndTheOwnOrListedOnesAreNot() throws {
        let (server, web) = try startWebServer(["--web-origin", "https://app.example.com"])
        defer { withExtendedLifetime(server) {} }
        let refused = try WebSocketClient.upgrade(LineClient(port: web), port: web, origin: "https://evil.example")
        #expect(refused.status == 403)
        #expect(try WebSocketClient.upgrade(LineClient(port: web), port: web, origin: "http://127.0.0.1:\(web)").status == 101)
        #expect(try WebSocketClient.upgrade(LineClient(port: web), port: web, origin: "https://app.example.com").status == 101)
        #expect(try WebSocketClient.upgrade(LineClient(port: web), port: web, origin: nil).status == 101)
        // Only /ws upgrades.
        #expect(try WebSocketClient.upgrade(LineClient(port: web), port: web, origin: nil, path: "/").status == 200)
    }

    @Test func thePageAndItsFilesComeWithStrictHeaders() throws {
        let (server, web) = try startWebServer()
        defer { withExtendedLifetime(server) {} }
        for (path, type) in [("/", "text/html"), ("/app.js", "text/javascript"), ("/app.css", "text/css")] {
            let response = try get(path, port: web)
            #expect(response.status == 200, "\(path)")
            #expect(response.headers["content-type"]?.hasPrefix(type) == true, "\(path)")
            #expect(response.headers["content-security-policy"]?.contains("script-src 'self'") == true)
            #expect(response.headers["content-security-policy"]?.contains("unsafe-inline") == false)
            #expect(response.headers["x-content-type-options"] == "nosniff")
            #expect(response.headers["referrer-policy"] == "no-referrer")
            #expect(response.headers["cache-control"] != nil)
        }
        #expect(try get("/nothing-here", port: web).status == 404)
        // The page never writes server strings as HTML, in any of its modules.
        for module in ["/app.js", "/connection.js", "/dialogs.js", "/dom.js", "/draw.js", "/forms.js", "/log.js"] {
            let response = try get(module, port: web)
            #expect(response.status == 200 && response.headers["content-type"]?.hasPrefix("text/javascript") == true, "\(module)")
            let script = response.body
            #expect(!script.contains("innerHTML") && !script.contains("insertAdjacentHTML") && !script.contains("document.write"), "\(module)")
        }
    }

    @Test func anOversizeMessageGetsLineTooLongAndTheConnectionGoesOn() throws {
        let (server, web) = try startWebServer(["--max-line-bytes", "1024"])
        defer { withExtendedLifetime(server) {} }
        let client = try WebSocketClient(port: web)
        _ = try client.next()
        let reply = try client.command("search " + String(repeating: "x", count: 1500))
        #expect(reply.errorCode == "line_too_long")
        try client.send("search " + String(repeating: "y", count: 1500), fragments: 4)
        #expect(try client.read(until: { $0.type == "reply" }).last?.errorCode == "line_too_long")
        #expect(try client.command("ping").isOK)
    }

    @Test func quitSaysByeThenSendsACloseFrame() throws {
        let (server, web) = try startWebServer()
        defer { withExtendedLifetime(server) {} }
        let client = try WebSocketClient(port: web)
        _ = try client.next()
        try client.send("quit")
        #expect(try client.readUntilClose() == 1000)
        #expect(client.received.contains { $0.type == "bye" && $0["reason"] == "client quit" })
    }

    @Test func maxClientsCountsBothTransports() throws {
        let (server, web) = try startWebServer(["--max-clients", "2"])
        defer { withExtendedLifetime(server) {} }
        let tcp = try connect(server)
        let first = try WebSocketClient(port: web)
        _ = try first.next()
        // An HTTP connection holds its place from accept: over the limit, it is closed
        // before a byte is read (no upgrade, no session).
        #expect(throws: (any Error).self) { _ = try WebSocketClient(port: web) }
        #expect(try tcp.command("ping").isOK)
        // The page itself counts too while its connection is open.
        #expect(throws: (any Error).self) { _ = try WebSocketClient.get("/", port: web) }
    }

    @Test func aWebSocketClientThatStopsReadingIsCutOffAndItsSessionLivesOn() throws {
        let (server, web) = try startWebServer(["--max-output-bytes", "65536"])
        defer { withExtendedLifetime(server) {} }
        let client = try WebSocketClient(port: web)
        let token = try #require(try client.next()["token"]?.stringValue)
        try client.send("search pizza")
        _ = try client.read(until: { $0["state"]?["loading"] == false })
        // Thousands of commands whose replies it never reads.
        var cutOff = false
        for _ in 0..<400 {
            do { try client.send(#"{"cmd":"state","args":{"view":"search"}}"#, fragments: 1) } catch { cutOff = true; break }
            for _ in 0..<20 { try? client.sendFrame(opcode: 0x1, payload: Array("state search".utf8)) }
        }
        var closed = cutOff
        let deadline = ContinuousClock.now + .seconds(20)
        while !closed, ContinuousClock.now < deadline {
            do { if try client.nextFrame(timeout: .seconds(5)) == nil { closed = true } } catch { closed = true }
        }
        #expect(closed)
        let again = try connect(server)
        let attached = try again.command("attach \(token)")
        #expect(attached.isOK)
    }

    @Test func anHTTPConnectionThatSendsNothingIsClosedAfterTheLineTimeoutButAWebSocketIsNot() throws {
        let (server, web) = try startWebServer(["--line-timeout", "1", "--metrics-port", "0"])
        defer { withExtendedLifetime(server) {} }
        let socket = try WebSocketClient(port: web)
        #expect(try socket.next().type == "welcome")
        // A request never finished, on the page's listener and on the operations one.
        for port in [web, try #require(server.metricsPort)] {
            let idle = try LineClient(port: port)
            try idle.sendRaw(Array("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n".utf8))
            let started = ContinuousClock.now
            #expect(try idle.isClosedByPeer(timeout: .seconds(5)))
            #expect(ContinuousClock.now - started < .seconds(4))
        }
        // The upgraded connection, quiet for longer than that, is still served.
        #expect(try socket.command("ping").isOK)
    }

    func get(_ path: String, port: Int) throws -> (status: Int, headers: [String: String], body: String) {
        let (response, body) = try WebSocketClient.get(path, port: port)
        return (response.status, response.headers, body)
    }
}
