import Foundation
#if canImport(Glibc)
    import Glibc
#endif
import Testing
import ViewlineApps
import ViewlineKit
import ViewlineTestSupport

/// `viewline` under a pseudo-terminal against a real server.
@Suite(.blocksItsThread) struct REPLTests {
    func startREPL(_ server: ServerProcess, columns: Int = 120, arguments: [String] = []) throws -> PseudoTerminal {
        try PseudoTerminal(
            executable: ServerProcess.productsDirectory.appendingPathComponent("viewline"),
            arguments: ["--port", String(server.port), "--history", temporaryPath("history")] + arguments,
            environment: ["TERM": "xterm", "NO_COLOR": "1", "HOME": NSTemporaryDirectory()],
            columns: columns)
    }

    @Test(arguments: [60, 120, 200])
    func helpShowsEveryDescriptionInFullWrappedToTheTerminal(columns: Int) throws {
        let server = try startServer()
        let terminal = try startREPL(server, columns: columns)
        try terminal.expect("viewline> ")
        terminal.type("help\r")
        let screen = try terminal.expect("shows one command with")
        let lines = screen.replacingOccurrences(of: "\r", with: "").split(separator: "\n").map(String.init)
        let header = try #require(lines.first { $0.hasPrefix("COMMAND") })
        let column = try #require(header.range(of: "DESCRIPTION")).lowerBound.utf16Offset(in: header)
        #expect(lines.allSatisfy { $0.count < columns }, "a line is wider than \(columns) columns")
        // Every summary is there word for word: rejoin continuation lines and look for it.
        let text = lines.map { $0.trimmingCharacters(in: .whitespaces) }.joined(separator: " ")
        for spec in Application(SeedApps.all).commands.all { #expect(text.contains(spec.summary), "\(spec.name) is cut") }
        let continuations = lines.filter { $0.hasPrefix(String(repeating: " ", count: column)) }
        if columns == 200 {
            #expect(continuations.isEmpty)
        } else {
            #expect(!continuations.isEmpty)
            #expect(continuations.allSatisfy { $0.dropFirst(column).first != " " }, "continuations start at the description column")
        }
        terminal.type("help search\r")
        let one = try terminal.expect("example: search thai food")
        #expect(one.contains("search <query>"))
        #expect(one.contains("the latest search wins."))
    }

    @Test func anAlertIsRenderedAsABoxAndAnsweredWithY() throws {
        let server = try startServer()
        let terminal = try startREPL(server)
        try terminal.expect("viewline> ")
        terminal.type("fault search 1 kaboom\r")
        try terminal.expect("viewline> ")
        terminal.type("search thai\r")
        let screen = try terminal.expect("[y/n]> ")
        #expect(screen.contains("┌─ Error"))
        #expect(screen.contains("│ kaboom"))
        #expect(screen.contains("[y] OK"))
        terminal.type("y\r")
        let answered = try terminal.expect("viewline> ")
        #expect(answered.contains("ok chose OK (alert a1)"))
    }

    @Test func alertFieldsAreAskedOneByOneAndSecretsAreNotEchoed() throws {
        let server = try startServer()
        let terminal = try startREPL(server)
        try terminal.expect("viewline> ")
        terminal.type("playlist\r")
        let alert = try terminal.expect("[y/n]> ")
        #expect(alert.contains("[y] Log in  [n] Cancel"))
        terminal.type("y\r")
        try terminal.expect("User: ")
        terminal.type("alice\r")
        try terminal.expect("Password: ")
        terminal.type("wonderland\r")
        let shown = try terminal.expect("Blue Monday")
        #expect(!shown.contains("wonderland"))
        #expect(shown.contains("user: alice"))
    }

    @Test func eventsPrintAboveAHalfTypedLineWhichIsRedrawn() throws {
        let server = try startServer(["--backend-latency", "300"])
        let terminal = try startREPL(server)
        try terminal.expect("viewline> ")
        terminal.type("search korean\r")
        try terminal.expect("viewline> ")
        terminal.type("sta")  // half-typed when the results arrive
        let screen = try terminal.expect("results")
        // The line is cleared, the event printed, then the prompt and "sta" drawn again.
        #expect(screen.contains("\r\u{1B}[K"))
        try terminal.expect("viewline> sta")
        terminal.type("\t")
        try terminal.expect("te ")  // completed to "state "
        terminal.type("search\r")
        try terminal.expect("[search]")
    }

    @Test func tabAfterACommandCompletesAViewOrSaysWhatTheCommandTakes() throws {
        let server = try startServer()
        let terminal = try startREPL(server)
        try terminal.expect("viewline> ")
        terminal.type("state dr\t")
        try terminal.expect("aft ")  // completed to "state draft " from help's views
        terminal.type("\r")
        try terminal.expect("[draft]")
        try terminal.expect("viewline> ")
        terminal.type("search \t")  // what `search` takes, from help's declarations
        try terminal.expect("query: text to the end of the line — what to look for")
        terminal.type("thai\r")
        try terminal.expect("[search]")
    }

    @Test func aSecondTerminalJoinsTheSessionAndADroppedOneResumes() throws {
        let server = try startServer()
        let proxy = try TCPProxy(to: server.port)
        let first = try PseudoTerminal(
            executable: ServerProcess.productsDirectory.appendingPathComponent("viewline"),
            arguments: ["--port", String(proxy.port), "--history", temporaryPath("history")],
            environment: ["TERM": "xterm", "NO_COLOR": "1", "HOME": NSTemporaryDirectory()])
        try first.expect("viewline> ")
        first.type("token\r")
        try first.expect("viewline --attach ")
        let line = try first.expect("\n")
        let token = String(line.prefix { $0.isHexDigit })
        #expect(token.count == 48)
        let second = try startREPL(server, arguments: ["--attach", token])
        try second.expect("attached to session s1")
        try second.expect("viewline> ")
        second.type("search thai\r")
        try first.expect("query: thai ")  // the first terminal sees the second's search
        // Pull the network from under the first; the second searches meanwhile.
        proxy.cut()
        try first.expect("connection lost; reconnecting")
        second.type("search korean\r")
        try first.expect("attached to session s1", timeout: .seconds(20))
        try first.expect("query: korean ")
        first.type("ping\r")
        try first.expect("pong")
    }

    @Test func theREPLResumesItsSessionAcrossARestartOfTheServer() throws {
        let database = temporaryPath("repl-restart.sqlite")
        let port = try ServerProcess.freePort()
        var server = try startServer(["--port", String(port), "--drain-seconds", "1"], database: database)
        let terminal = try startREPL(server)
        try terminal.expect("viewline> ")
        terminal.type("search thai\r")
        try terminal.expect("query: thai ")
        server.signal(SIGTERM)
        _ = try server.waitForExit()
        server = try startServer(["--port", String(port), "--drain-seconds", "1"], database: database)
        try terminal.expect("attached to session", timeout: .seconds(20))
        terminal.type("state search\r")
        try terminal.expect("query: thai ")
        _ = server
    }

    @Test func aSessionNoNodeHoldsAnyMoreGoesOnInAFreshOneOnAnotherNode() throws {
        let first = try startServer()
        let second = try startServer()
        let terminal = try startREPL(first, arguments: ["--nodes", "127.0.0.1:\(second.port)"])
        try terminal.expect("viewline> ")
        terminal.type("search ramen\r")
        try terminal.expect("query: ramen ")
        first.signal(SIGKILL)  // its sessions die with it: the other server never knew them
        try terminal.expect("connection lost; reconnecting")
        try terminal.expect("the session expired; this is a new session", timeout: .seconds(30))
        terminal.type("ping\r")
        try terminal.expect("pong")
    }
}
