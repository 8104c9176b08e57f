import Foundation
import Testing
import ViewlineApps
import ViewlineKit
import ViewlineTestSupport

/// `viewline` under a pseudo-terminal against a real server.
@Suite struct REPLTests {
    func startREPL(_ server: ServerProcess, columns: Int = 120) throws -> PseudoTerminal {
        try PseudoTerminal(
            executable: ServerProcess.productsDirectory.appendingPathComponent("viewline"),
            arguments: ["--port", String(server.port), "--history", temporaryPath("history")],
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
        #expect(shown.contains("logged in as alice"))
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
}
