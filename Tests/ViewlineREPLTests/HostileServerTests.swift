import Testing
import ViewlineClient

@testable import ViewlineREPL

/// A hostile server (or another connection of a shared session, whose search query is
/// echoed in the view) cannot crash the REPL or drive the terminal.
@Suite struct HostileServerTests {
    let renderer = EventRenderer(style: TerminalStyle(colors: false))

    func results(_ place: JSON) -> JSON {
        ["type": "display", "rev": 1, "view": "search", "state": ["query": "x", "loading": false, "results": [place]]]
    }

    @Test(arguments: [1e300, 1e19, -1e19, 9.3e18, -4.6, .infinity])
    func anyRatingRenders(_ rating: Double) {
        var renderer = renderer
        let text = renderer.render(results(["name": "Harbor Crust", "rating": .double(rating), "price": .int(Int.min)]))
        #expect(text?.contains("Harbor Crust") == true)
    }

    /// `--raw` prints the JSON itself: still no control character of the server's, C1
    /// included, and still the same JSON.
    @Test func rawLinesEscapeEveryControlCharacter() throws {
        let message: JSON = ["type": "display", "rev": 1, "view": "search", "state": ["query": "a\u{9B}31m\u{1B}]0;x\u{07}\u{85}b"]]
        let line = message.encodedForTerminal
        #expect(!line.unicodeScalars.contains { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) })
        #expect(try JSON.parse(line) == message)
    }

    /// A paging command's name is learned from `help` and printed under a list: it is
    /// cleaned like every other string the server sent.
    @Test func aPagingCommandNamedWithEscapesPrintsNone() {
        var renderer = renderer
        renderer.learn(help: [
            "commands": [["name": "more\u{1B}]0;PWNED\u{07}\u{1B}[2J", "paging": true, "view": "search"]],
            "views": [["name": "search"]],
        ])
        let text = renderer.render(["type": "display", "rev": 1, "view": "search", "state": ["hasMore": true, "items": [["a": 1]]]]) ?? ""
        #expect(text.contains("PWNED"))
        #expect(!text.unicodeScalars.contains { $0.value < 0x20 && $0 != "\n" })
    }

    /// Output stays in proportion to what the server sent: a long title or usage is
    /// cut or wrapped, never a width every other line is padded to.
    @Test func aHugeTitleOrUsageDoesNotMultiplyTheOutput() {
        var renderer = renderer
        let title = String(repeating: "t", count: 100_000)
        let message = String(repeating: "w ", count: 50_000)
        let alert = renderer.render(["type": "alert", "rev": 1, "id": "a1", "title": .string(title), "message": .string(message)]) ?? ""
        #expect(alert.utf8.count < 4 * (title.utf8.count + message.utf8.count))
        #expect(alert.split(separator: "\n").allSatisfy { $0.count < 80 })
        let help = renderer.renderHelp(
            [["usage": .string(String(repeating: "u", count: 100_000)), "summary": .string(String(repeating: "s ", count: 20_000))]], services: [])
        #expect(help.utf8.count < 400_000)
        #expect(help.split(separator: "\n").allSatisfy { $0.count <= renderer.width })
    }

    @Test func controlCharactersFromTheServerNeverReachTheTerminal() throws {
        var renderer = renderer
        let hostile = "A\u{1B}]0;pwned\u{07}B\u{1B}[2J\u{1B}]52;c;ZXZpbA==\u{07}\u{1B}[10;10H\u{9B}31m\u{7F}\r"
        let messages: [JSON] = [
            results(["name": .string(hostile), "cuisine": .string(hostile), "rating": 4.5]),
            [
                "type": "alert", "rev": 2, "id": .string(hostile), "title": .string(hostile), "message": .string(hostile),
                "actions": [["role": "confirm", "label": .string(hostile)]],
            ],
            ["type": "bye", "reason": .string(hostile)],
            ["type": "reply", "re": 1, "ok": false, "error": ["code": .string(hostile), "message": .string(hostile)]],
            ["type": "display", "rev": 3, "view": .string(hostile), "state": [.init(hostile): .string(hostile)]],
            ["type": "welcome", "server": .string(hostile), "session": .string(hostile)],
        ]
        for message in messages {
            let rendered = renderer.render(message)
            let text = try #require(rendered)
            let controls = text.unicodeScalars.filter { TerminalText.isControl($0) }
            #expect(controls.isEmpty, "\(message["type"] ?? "?"): \(text.debugDescription)")
            #expect(text.contains("A\u{FFFD}]0;pwned\u{FFFD}B") || message["type"] == "alert" || message["type"] == "display")
        }
    }

    @Test func aServerThatSaysWelcomeAMillionTimesDoesNotOverflowTheStack() {
        var feed = ServerFeed()
        feed.append(Array(repeating: .message(["type": "welcome", "session": "s9"]), count: 1_000_000))
        feed.append([.message(["type": "display", "rev": 1, "view": "search", "state": [:]])])
        guard case .message(let message)? = feed.next() else {
            Issue.record("the display after the welcomes is shown")
            return
        }
        #expect(message["type"] == "display")
    }
}
