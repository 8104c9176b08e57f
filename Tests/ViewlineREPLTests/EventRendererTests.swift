import Testing
import ViewlineProtocol
import ViewlineREPL

/// How the REPL shows server messages to people (no colours, as with NO_COLOR).
@Suite struct EventRendererTests {
    /// The renderer remembers what it printed (playlist pages), as the REPL's does.
    final class Screen {
        var renderer = EventRenderer(style: TerminalStyle(colors: false))
        func render(_ message: JSON) -> String? { renderer.render(message) }
    }
    let renderer = Screen()

    func reply(_ result: JSON) -> JSON { ["type": "reply", "re": nil, "ok": true, "result": result] }

    func playlist(_ count: Int, hasMore: Bool, loading: Bool = false) -> JSON {
        let items = (1...max(count, 1)).prefix(count).map { n -> JSON in
            ["position": .int(n), "title": .string("Song \(n)"), "artist": "Someone"]
        }
        return [
            "type": "display", "rev": 1, "view": "playlist",
            "state": ["items": .array(items), "hasMore": .bool(hasMore), "loading": .bool(loading), "step": "ready"],
        ]
    }

    @Test func anAlertIsAFramedBoxWithItsKeys() {
        let alert: JSON = [
            "type": "alert", "rev": 3, "id": "a1", "title": "Error", "message": "Saving failed: disk full. Save again?",
            "actions": [["role": "confirm", "label": "Save"], ["role": "cancel", "label": "Discard"]],
        ]
        #expect(
            renderer.render(alert) == """
                ┌─ Error ───────────────────────────────┐ alert a1
                │ Saving failed: disk full. Save again? │
                │ [y] Save  [n] Discard                 │
                └───────────────────────────────────────┘
                """)
    }

    @Test func searchResultsAreAnAlignedTableOfTheRecordsKeys() {
        let display: JSON = [
            "type": "display", "rev": 2, "view": "search",
            "state": [
                "query": "thai", "loading": false,
                "results": [
                    ["name": "Blue Basil", "cuisine": "thai", "address": "2098 Divisadero St", "lat": 0, "lon": 0, "rating": 4.6, "price": 2],
                    ["name": "Jade Pepper", "cuisine": "thai", "address": "3970 Market St", "lat": 0, "lon": 0, "rating": 4, "price": 4],
                    // An older server sends neither rating nor price.
                    ["name": "Old Spoon", "cuisine": "thai", "address": "1 Main St", "lat": 0, "lon": 0],
                ],
            ],
        ]
        #expect(
            renderer.render(display) == """
                [search] query: thai 3 results
                NAME         CUISINE  ADDRESS             LAT  LON  RATING  PRICE
                Blue Basil   thai     2098 Divisadero St  0    0    4.6     2
                Jade Pepper  thai     3970 Market St      0    0    4       4
                Old Spoon    thai     1 Main St           0    0    —       —
                """)
    }

    /// The seed views' screens, pinned: each is what the shape rules make of its
    /// state and of `help`'s declarations (busy flags, the paging command), with no
    /// code of its own in the REPL.
    @Test func everySeedViewIsDrawnByTheShapeRules() {
        renderer.renderer.learn(help: Self.seedHelp)
        func display(_ view: String, _ state: JSON) -> String? {
            renderer.render(["type": "display", "rev": 1, "view": .string(view), "state": state])
        }
        #expect(display("search", ["query": "thai", "loading": true, "results": []]) == "[search] query: thai no results (loading…)")
        #expect(display("search", ["query": "", "loading": false, "results": []]) == #"[search] query: "" no results"#)
        #expect(display("session", ["user": "alice", "loggedIn": true]) == "[session] user: alice loggedIn: yes")
        #expect(display("session", ["user": nil, "loggedIn": false]) == "[session] user: — loggedIn: no")
        #expect(display("draft", ["text": "buy milk", "pending": true, "saving": true]) == "[draft] text: buy milk pending: yes (saving…)")
        #expect(display("draft", ["text": "buy milk", "pending": true, "saving": false]) == "[draft] text: buy milk pending: yes")
        #expect(
            display("contacts", ["items": [["name": "Ada", "phone": "555-0100", "address": "1 Loop Rd"]], "syncing": true])
                == """
                [contacts] 1 items (syncing…)
                NAME  PHONE     ADDRESS
                Ada   555-0100  1 Loop Rd
                """)
        #expect(
            display("playlist", playlist(2, hasMore: true)["state"]!) == """
                [playlist] 2 items step: ready — type more for the next page
                POSITION  TITLE   ARTIST
                1         Song 1  Someone
                2         Song 2  Someone
                """)
    }

    /// What the seed server's `help` declares about its views, as far as drawing goes.
    static let seedHelp: JSON = [
        "views": [
            ["name": "search", "busy": ["loading"]], ["name": "session", "busy": []], ["name": "draft", "busy": ["saving"]],
            ["name": "contacts", "busy": ["syncing"]], ["name": "playlist", "busy": ["loading"]],
        ],
        "commands": [["name": "more", "view": "playlist", "paging": true], ["name": "search", "view": "search"]],
    ]

    static let helpCommands: [JSON] = [
        ["name": "search", "usage": "search <query>", "summary": "Search places by name, cuisine, dish or neighbourhood; the latest search wins."],
        ["name": "ping", "usage": "ping", "summary": "Check the connection."],
    ]

    @Test func helpWrapsDescriptionsUnderTheirColumnAndNeverCuts() throws {
        renderer.renderer.width = 50
        let text = try #require(renderer.render(reply(["commands": .array(Self.helpCommands)])))
        #expect(
            text == """
                COMMAND          DESCRIPTION
                search <query>   Search places by name, cuisine,
                                 dish or neighbourhood; the
                                 latest search wins.
                ping             Check the connection.
                y / n / <label>  Answer the presented alert (REPL
                                 shortcut).
                token            Show this session's token, to
                                 join it from another terminal
                                 with viewline --attach (REPL).
                help <command> shows one command with an example.
                """)
        #expect(text.split(separator: "\n").allSatisfy { $0.count < 50 })
    }

    @Test func helpOnAWideTerminalKeepsEachDescriptionOnOneLine() throws {
        renderer.renderer.width = 200
        let text = try #require(renderer.render(reply(["commands": .array(Self.helpCommands)])))
        #expect(text.contains("search <query>   Search places by name, cuisine, dish or neighbourhood; the latest search wins.\n"))
    }

    @Test func helpForOneCommandShowsItsUsageDescriptionAndExample() throws {
        renderer.renderer.width = 60
        let command: JSON = [
            "name": "search", "usage": "search <query>", "example": "search thai food",
            "summary": "Search places by name, cuisine, dish or neighbourhood; the latest search wins.",
        ]
        #expect(
            renderer.render(reply(["command": command])) == """
                search <query>
                  Search places by name, cuisine, dish or neighbourhood;
                  the latest search wins.
                  example: search thai food
                """)
    }

    @Test func anAppendedPageOfAPagingViewPrintsOnlyItsNewRows() throws {
        renderer.renderer.learn(help: Self.seedHelp)
        let first = try #require(renderer.render(playlist(2, hasMore: true)))
        #expect(first.contains("Song 1") && first.contains("Song 2"))
        #expect(
            renderer.render(playlist(2, hasMore: true, loading: true)) == "[playlist] 2 items step: ready (loading…) — type more for the next page")
        let second = try #require(renderer.render(playlist(3, hasMore: false)))
        #expect(second.hasPrefix("[playlist] 3 items step: ready\n"))
        #expect(second.contains("Song 3") && !second.contains("Song 1"))
        // Asked for explicitly, the view is shown whole.
        let state = reply(["view": "playlist", "state": playlist(3, hasMore: false)["state"]!])
        #expect(renderer.render(state)?.contains("Song 1") == true)
        // A list that is not an extension of what was shown (a new login) is printed whole.
        let restarted = try #require(renderer.render(playlist(1, hasMore: true)))
        #expect(restarted.contains("Song 1"))
    }

    @Test func anyOtherViewIsDrawnFromItsShapeTheTodosAsATable() {
        // Examples/Todos' view: the REPL knows nothing of it.
        let todos: JSON = [
            "type": "display", "rev": 3, "view": "todos",
            "state": [
                "items": [["id": 1, "title": "buy milk", "done": false], ["id": 2, "title": "walk the dog", "done": true]],
                "saving": true,
            ],
        ]
        #expect(
            renderer.render(todos) == """
                [todos] 2 items (saving…)
                ID  TITLE         DONE
                1   buy milk      no
                2   walk the dog  yes
                """)
        let empty: JSON = ["type": "display", "rev": 1, "view": "todos", "state": ["items": [], "saving": false, "filter": nil, "count": 0]]
        #expect(renderer.render(empty) == "[todos] no items filter: — count: 0")
    }

    @Test func aViewsDeclaredBusyFlagsAreTheOnlyOnesShownAsWorkUnderWay() {
        // A `pending` draft is a fact, not a spinner, once the view declares `busy: ["saving"]`.
        let notes: JSON = ["type": "display", "rev": 2, "view": "notes", "state": ["text": "hi", "pending": true, "saving": true]]
        #expect(renderer.render(notes) == "[notes] text: hi (pending…, saving…)")
        renderer.renderer.busyFields = ["notes": ["saving"]]
        #expect(renderer.render(notes) == "[notes] text: hi pending: yes (saving…)")
    }

    @Test func repliesSayWhatHappenedInWords() {
        #expect(renderer.render(reply(["alert": "a2", "answer": "confirm", "action": "Save"])) == "ok chose Save (alert a2)")
        #expect(renderer.render(reply(["alert": "a3", "answer": "cancel", "action": "Discard"])) == "ok cancelled Discard (alert a3)")
        #expect(renderer.render(reply(["user": "alice", "expiresIn": 3600])) == "ok access token valid for 1 h")
        #expect(renderer.render(reply(["user": "alice", "loggedIn": false])) == "ok logged out")
        #expect(renderer.render(reply(["service": "save", "count": 2])) == "ok the next 2 save calls will fail")
        #expect(renderer.render(reply(["service": "sync", "count": 1])) == "ok the next sync call will fail")
        #expect(renderer.render(reply(["pending": true])) == "ok stored locally")
        #expect(renderer.render(reply(["accepted": true])) == nil)  // the displays that follow say it
        #expect(renderer.render(reply(["zeta": 1, "alpha": "x"])) == "ok alpha=x zeta=1")
        // end-others: the new token is kept, never printed.
        #expect(renderer.render(reply(["ended": 2, "token": "3f9c"])) == "ok ended 2 other connections; the session has a new token")
        let connections: JSON = ["type": "display", "rev": 9, "view": "connections", "state": ["count": 3]]
        #expect(renderer.render(connections) == "this session is also open in 2 other places; end-others ends them and changes the token")
    }

    @Test func errorsShowTheirCode() {
        let failed: JSON = ["type": "reply", "re": nil, "ok": false, "error": ["code": "no_alert", "message": "no alert is presented"]]
        #expect(renderer.render(failed) == "error no_alert: no alert is presented")
    }

    @Test func stateListsTheViewsInTheServersOrder() throws {
        // Parsed JSON objects do not keep the server's key order.
        let views: JSON = [
            "playlist": ["items": [], "hasMore": false, "loading": false, "step": "idle"],
            "session": ["user": nil, "loggedIn": false],
            "search": ["query": "", "loading": false, "results": []],
        ]
        renderer.renderer.learn(help: Self.seedHelp)
        let text = try #require(renderer.render(reply(["views": views])))
        #expect(text.split(separator: "\n").map { String($0.prefix { $0 != " " }) } == ["[search]", "[session]", "[playlist]"])
    }
}
