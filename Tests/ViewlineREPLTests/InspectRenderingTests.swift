import Testing
import ViewlineProtocol
import ViewlineREPL

/// How the REPL prints `inspect` (no colours): the sessions as a table, and a
/// session's timeline with each display as what changed.
@Suite struct InspectRenderingTests {
    var renderer = EventRenderer(style: TerminalStyle(colors: false))

    func reply(_ result: JSON) -> JSON { ["type": "reply", "re": nil, "ok": true, "result": result] }

    @Test mutating func theSessionsAreATable() throws {
        let rendered = renderer.render(
            reply([
                "node": nil, "count": 1, "recording": true,
                "sessions": [
                    [
                        "session": "s1", "rev": 4, "connections": 1, "views": ["search"], "alerts": 0, "tasks": ["search"],
                        "lastCommand": "search", "ageSeconds": 2.5,
                    ]
                ],
            ]))
        let text = try #require(rendered)
        let lines = text.split(separator: "\n").map(String.init)
        #expect(lines[0] == "1 session on this node")
        #expect(lines[1].hasPrefix("SESSION") && lines[2].hasPrefix("s1"))
        #expect(lines[2].contains("search") && lines[2].contains("2.5 s"))
    }

    @Test mutating func aTimelineShowsEachDisplayAsItsDiff() throws {
        let rendered = renderer.render(
            reply([
                "session": ["session": "s1"], "from": 0, "oldestRev": 0,
                "states": ["search": ["query": "", "loading": false, "results": []]],
                "timeline": [
                    [
                        "rev": 0, "kind": "command", "command": "search", "arguments": ["query": "pizza"], "connection": 1, "error": nil,
                        "durationMs": 0.2,
                    ],
                    ["rev": 1, "kind": "call", "backend": "search", "error": nil, "durationMs": 12.0],
                    [
                        "rev": 2, "kind": "command", "command": "ping", "arguments": [:], "connection": 1, "error": nil, "durationMs": 0.1,
                        "repeats": 40,
                    ],
                ],
                "events": [
                    ["type": "display", "rev": 1, "view": "search", "state": ["query": "pizza", "loading": true, "results": []]],
                    ["type": "display", "rev": 2, "view": "search", "state": ["query": "pizza", "loading": false, "results": [["name": "A"]]]],
                ],
            ]))
        let text = try #require(rendered)
        #expect(text.contains("rev 0 search query=pizza ✓ 0.2 ms"))
        #expect(text.contains(#"display search: query: "" → "pizza"; loading: false → true"#))
        #expect(text.contains("display search: loading: true → false; results: 0 → 1 items"))
        #expect(text.contains("call search ✓ 12 ms"))
        #expect(text.contains("rev 2 ping ×40 ✓ 0.1 ms longest"))
    }

    /// The line a display from `before` to `after` of view `v` prints as.
    mutating func displayDiff(from before: JSON, to after: JSON) throws -> String {
        let rendered = renderer.render(
            reply([
                "session": ["session": "s1"], "from": 0, "oldestRev": 0, "states": ["v": before], "timeline": [],
                "events": [["type": "display", "rev": 1, "view": "v", "state": after]],
            ]))
        let line = try #require(rendered?.split(separator: "\n").first { $0.contains("display v: ") })
        return String(line[line.range(of: "display v: ")!.upperBound...])
    }

    @Test mutating func aListOfTheSameLengthShowsTheItemsThatChanged() throws {
        let before: JSON = ["items": [["id": 1, "done": false], ["id": 2, "done": false]], "saving": false]
        #expect(
            try displayDiff(from: before, to: ["items": [["id": 1, "done": true], ["id": 2, "done": false]], "saving": false])
                == "items[0].done: false → true")
        #expect(try displayDiff(from: ["tags": ["a", "b"]], to: ["tags": ["a", "c"]]) == #"tags[1]: "b" → "c""#)
        // A field gone from an item, and a list that grew.
        #expect(try displayDiff(from: ["items": [["id": 1, "note": "x"]]], to: ["items": [["id": 1]]]) == "items[0].note removed")
        #expect(try displayDiff(from: ["items": [1]], to: ["items": [1, 2]]) == "items: 1 → 2 items")
        // Every item changed: the first three, then how many more.
        #expect(
            try displayDiff(from: ["n": [1, 2, 3, 4, 5]], to: ["n": [6, 7, 8, 9, 10]])
                == "n[0]: 1 → 6; n[1]: 2 → 7; n[2]: 3 → 8; n: 2 more items changed")
        // Three items, however many fields each changed.
        let two: JSON = ["a": 1, "b": 1]
        #expect(
            try displayDiff(
                from: ["l": [two, two, two, two]], to: ["l": [["a": 2, "b": 2], ["a": 2, "b": 1], ["a": 1, "b": 2], ["a": 2, "b": 1]]])
                == "l[0].a: 1 → 2; l[0].b: 1 → 2; l[1].a: 1 → 2; l[2].b: 1 → 2; l: 1 more items changed")
    }

    @Test mutating func aHostileServersWideItemIsComparedInTimeInProportion() throws {
        // 20,000 keys in one item, every value changed: scanning for each key took
        // over a minute; looked up in a table it is a moment.
        let keys = (0..<20_000).map { "k\($0)" }
        let before = JSON.object(JSONObject(keys.map { ($0, JSON.int(0)) }))
        let after = JSON.object(JSONObject(keys.reversed().map { ($0, JSON.int(1)) }))
        let diff = try displayDiff(from: ["items": [before]], to: ["items": [after]])
        #expect(diff.hasPrefix("items[0].k19999: 0 → 1; items[0].k19998: 0 → 1"))
        #expect(diff.components(separatedBy: "; ").count == 20_000)
    }
}

/// A hostile server's numbers in an `inspect` reply print as text; they never stop
/// the REPL (a duration past Int's range and a rev of Int.min trapped).
@Suite struct HostileInspectRenderingTests {
    var renderer = EventRenderer(style: TerminalStyle(colors: false))

    @Test mutating func numbersPastAnyClockPrintAsTheyCame() throws {
        let reply = try JSON.parse(
            Array(
                #"""
                {"type":"reply","re":null,"ok":true,"result":{"session":{"session":"s1"},"from":0,"oldestRev":0,"states":{},
                "timeline":[{"rev":1,"at":"x","durationMs":10000000000000000000,"kind":"command","command":"ping","arguments":{},
                "connection":1,"error":null},{"rev":2,"kind":"call","backend":"b","error":null,"durationMs":1e300}],
                "events":[{"type":"dismiss","rev":-9223372036854775808,"id":"a"}]}}
                """#.utf8))
        let rendered = renderer.render(reply)
        let text = try #require(rendered)
        #expect(text.contains("ping") && text.contains("1e+19 ms") && text.contains("1e+300 ms"))
        #expect(text.contains("rev -9223372036854775808"))
    }
}
