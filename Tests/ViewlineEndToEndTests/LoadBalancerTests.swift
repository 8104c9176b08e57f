import Foundation
import Testing
import ViewlineProtocol
import ViewlineTestSupport

/// Nodes behind Debian's HAProxy, run with the shipped `deploy/haproxy.cfg`: clients
/// connect from addresses of their own (127.0.0.2, 127.0.0.3, …) to the proxy, which
/// reaches the nodes from 127.0.0.1 with a PROXY v2 header (line protocol) or
/// `X-Forwarded-For` (the page). Each client keeps its own address on the nodes, and
/// a rolling restart behind the proxy loses no session.
@Suite(.blocksItsThread, .enabled(if: LoadBalancer.isInstalled, "haproxy is not installed (./dev setup installs it)"))
struct LoadBalancerTests {
    /// Node `index` behind `balancer`, over `database`.
    func node(_ index: Int, _ balancer: LoadBalancer, database: String, _ extra: [String] = []) throws -> ServerProcess {
        let url = PostgresServer.shared.url(database: database)
        return try ServerProcess(["--postgres", url, "--admin", "--demo", "--drain-seconds", "1"] + balancer.nodeArguments(index) + extra)
    }

    /// A connection to `port` from `source` once it is served (`welcome`): HAProxy
    /// routes to a node only once its health check has passed twice.
    func served(_ port: Int, from source: String, within time: Duration = .seconds(60)) throws -> (LineClient, JSON) {
        let deadline = ContinuousClock.now + time
        while true {
            if let client = try? LineClient(port: port, from: source), let first = try? client.next(timeout: .seconds(2)) {
                return (client, first)
            }
            guard ContinuousClock.now < deadline else {
                Issue.record("nothing served :\(port) from \(source) within \(time)")
                throw CancellationError()
            }
            Thread.sleep(forTimeInterval: 0.2)
        }
    }

    @Test func limitsAndTheInspectorSeeEachClientsOwnAddressThroughTheProxy() throws {
        let balancer = try LoadBalancer()
        let database = try PostgresServer.shared.createDatabase()
        let only = try node(0, balancer, database: database, ["--max-clients-per-address", "1"])
        defer { only.signal(SIGTERM) }
        let (first, welcome) = try served(balancer.lines, from: "127.0.0.2")
        #expect(welcome.type == "welcome")
        let (second, other) = try served(balancer.lines, from: "127.0.0.3")
        #expect(other.type == "welcome")
        // One connection per address: the second from 127.0.0.2 is refused, though every
        // connection reaches the node from the proxy's one address.
        let (_, refused) = try served(balancer.lines, from: "127.0.0.2")
        #expect(refused.type == "bye" && refused["reason"]?.stringValue?.contains("per address") == true, "\(refused)")
        let listed = try first.command("inspect")["result"]?["sessions"]?.arrayValue ?? []
        #expect(Set(listed.compactMap { $0["address"]?.stringValue }) == ["127.0.0.2", "127.0.0.3"], "\(listed)")
        #expect(try second.command("ping").isOK)
        // The page through the proxy (HTTP mode): its WebSocket is the browser's too.
        // (Its backend's health checks pass on their own schedule: 503 until then.)
        var socket: WebSocketClient?
        let deadline = ContinuousClock.now + .seconds(10)
        while socket == nil, ContinuousClock.now < deadline {
            socket = try? WebSocketClient(connection: LineClient(port: balancer.web, from: "127.0.0.4"), port: balancer.web)
            if socket == nil { Thread.sleep(forTimeInterval: 0.2) }
        }
        #expect(try #require(socket).next().type == "welcome")
        let again = try first.command("inspect")["result"]?["sessions"]?.arrayValue ?? []
        #expect(again.contains { $0["address"] == "127.0.0.4" }, "\(again)")
    }

    @Test func aRollingRestartBehindTheProxyLosesNoSession() throws {
        let balancer = try LoadBalancer()
        let database = try PostgresServer.shared.createDatabase()
        var nodes = try (0..<3).map { try node($0, balancer, database: database) }
        defer { for node in nodes { node.signal(SIGTERM) } }
        // Six clients, each from an address of its own, each with a search of its own.
        var sessions: [(source: String, token: String, query: String)] = []
        for index in 0..<6 {
            let source = "127.0.0.\(index + 2)"
            let (client, welcome) = try served(balancer.lines, from: source)
            let token = try #require(welcome["token"]?.stringValue)
            #expect(try client.command("search dish \(index)").isOK)
            #expect(try client.command("wait").isOK)
            sessions.append((source, token, "dish \(index)"))
        }
        Thread.sleep(forTimeInterval: 0.3)  // past the record lag

        /// Resumes `session` through the proxy, following `moved` to the node's own
        /// frontend: the query it shows.
        func resume(_ session: (source: String, token: String, query: String)) throws -> JSON? {
            var port = balancer.lines
            let deadline = ContinuousClock.now + .seconds(20)
            while ContinuousClock.now < deadline {
                let (client, _) = try served(port, from: session.source)
                let answer = try client.command("attach \(session.token)")
                if answer.isOK { return try client.command("state search")["result"]?["state"]?["query"] }
                if answer.errorCode == "moved", let address = answer["error"]?["address"]?.stringValue,
                    let moved = address.split(separator: ":").last.flatMap({ Int($0) })
                {
                    #expect(balancer.nodes.contains { $0.frontend == moved }, "moved to \(address), not through the proxy")
                    port = moved
                    continue
                }
                port = balancer.lines
                Thread.sleep(forTimeInterval: 0.2)
            }
            return nil
        }

        for index in nodes.indices {
            nodes[index].signal(SIGTERM)
            _ = try nodes[index].waitForExit(timeout: .seconds(30))
            for session in sessions { #expect(try resume(session) == .string(session.query), "\(session)") }
            nodes[index] = try node(index, balancer, database: database)
        }
        for session in sessions { #expect(try resume(session) == .string(session.query), "\(session)") }
    }

    /// The REPL knows only the proxy: when the node behind it restarts (a deploy, on its
    /// database file), it resumes its session through the proxy.
    @Test func theREPLResumesThroughTheProxyWhenItsNodeRestarts() throws {
        let balancer = try LoadBalancer()
        let arguments = ["--db", temporaryPath("lb.sqlite"), "--drain-seconds", "1"] + balancer.nodeArguments(0)
        var server = try ServerProcess(arguments)
        _ = try served(balancer.lines, from: "127.0.0.2")  // the proxy routes to it
        let terminal = try PseudoTerminal(
            executable: ServerProcess.productsDirectory.appendingPathComponent("viewline"),
            arguments: ["--port", String(balancer.lines), "--history", temporaryPath("history")],
            environment: ["TERM": "xterm", "NO_COLOR": "1", "HOME": NSTemporaryDirectory()], columns: 120)
        try terminal.expect("viewline> ")
        terminal.type("search thai\r")
        try terminal.expect("query: thai ")
        server.signal(SIGTERM)
        _ = try server.waitForExit()
        server = try ServerProcess(arguments)
        try terminal.expect("attached to session", timeout: .seconds(30))
        terminal.type("state search\r")
        try terminal.expect("query: thai ")
        server.signal(SIGTERM)
    }
}
