import Testing
import ViewlineProtocol
import ViewlineREPL

/// What the REPL tracks from the messages passing by: the presented alert, answers
/// typed as y/n or a label, and completion candidates.
@Suite struct ClientSessionTests {
    let saveAlert: JSON = [
        "type": "alert", "rev": 1, "id": "a1", "title": "Error", "message": "Saving failed",
        "actions": [["role": "confirm", "label": "Save"], ["role": "cancel", "label": "Discard"]],
    ]

    func session(presenting alert: JSON? = nil) -> ClientSession {
        var client = ClientSession()
        client.observe([
            "type": "reply", "re": nil, "ok": true,
            "result": ["commands": [["name": "cancel"], ["name": "confirm"], ["name": "contacts"], ["name": "search"]]],
        ])
        if let alert { client.observe(alert) }
        return client
    }

    @Test func yesNoAndLabelsAnswerThePresentedAlert() {
        let client = session(presenting: saveAlert)
        #expect(client.alertRole(for: "y") == "confirm")
        #expect(client.alertRole(for: "n") == "cancel")
        #expect(client.alertRole(for: "discard") == "cancel")
        #expect(client.alertRole(for: "Save") == "confirm")
        #expect(client.alertRole(for: "search ramen") == nil)
        #expect(session().alertRole(for: "y") == nil)  // nothing presented: y is just a word
    }

    @Test func anOKOnlyAlertHasNoNo() {
        let ok: JSON = ["type": "alert", "rev": 1, "id": "a2", "title": "Error", "message": "x", "actions": [["role": "confirm", "label": "OK"]]]
        #expect(session(presenting: ok).alertRole(for: "n") == nil)
    }

    @Test func answeringOrADismissClearsTheAlert() {
        var answered = session(presenting: saveAlert)
        answered.observe(["type": "reply", "re": nil, "ok": true, "result": ["alert": "a1", "answer": "confirm", "action": "Save"]])
        #expect(answered.presentedAlert == nil)
        var dismissed = session(presenting: saveAlert)
        dismissed.observe(["type": "dismiss", "rev": 2, "id": "a1"])
        #expect(dismissed.presentedAlert == nil)
    }

    @Test func endOthersGivesTheTokenToResumeWith() {
        var client = session()
        client.observe(["type": "welcome", "session": "s1", "token": "old", "server": "viewline/1.2", "protocol": 1])
        client.observe(["type": "reply", "re": nil, "ok": true, "result": ["ended": 1, "token": "new"]])
        #expect(client.token == "new")
        // Another command's result that happens to hold a token is not taken for it.
        client.observe(["type": "reply", "re": nil, "ok": true, "result": ["token": "other", "user": "x"]])
        #expect(client.token == "new")
    }

    /// A `help` reply as a server of 1.2 sends it: typed arguments, views.
    func helped() -> ClientSession {
        var client = ClientSession()
        let commands = [
            CommandSpec("search", summary: "Search.", arguments: [.text("query").described("what to look for")]),
            CommandSpec("saved", summary: "Saved drafts.", arguments: [.optionalInteger("page", minimum: 1, maximum: 10)]),
            CommandSpec("login", summary: "Log in.", arguments: [.word("user"), .word("password", secure: true)]),
            CommandSpec("state", summary: "Show a view.", arguments: [.optionalWord("view")]),
            CommandSpec("help", summary: "Help.", arguments: [.optionalWord("command")]),
        ]
        client.observe([
            "type": "reply", "re": nil, "ok": true,
            "result": [
                "commands": .array(commands.map(\.json)), "views": [["name": "search"], ["name": "session"], ["name": "draft"]],
            ],
        ])
        return client
    }

    @Test func afterTheCommandCompletionOffersViewsAndCommandsWhereTheyGo() {
        #expect(helped().argumentCompletions(for: "state s") == ["search", "session"])
        #expect(helped().argumentCompletions(for: "help lo") == ["login"])
        #expect(helped().argumentCompletions(for: "search th") == nil)
        #expect(helped().argumentCompletions(for: "state search x") == nil)
    }

    @Test func theHintSaysWhatEachArgumentTakesFromHelpsDeclarations() {
        #expect(helped().argumentHint(for: "search ") == "search <query>\n  query: text to the end of the line — what to look for")
        #expect(helped().argumentHint(for: "SAVED ") == "saved [page]\n  page: a whole number from 1 to 10, optional")
        #expect(helped().argumentHint(for: "login alice ") == "login <user> <password>\n  user: one word\n  password: one word, secret")
        #expect(helped().argumentHint(for: "teleport ") == nil)
    }

    @Test func completionOffersConfirmAndCancelFirstWhileAnAlertIsUp() {
        #expect(session().completions(for: "c") == ["cancel", "confirm", "contacts"])
        #expect(session(presenting: saveAlert).completions(for: "").prefix(2) == ["confirm", "cancel"])
        #expect(session().completions(for: "SE") == ["search"])
    }

    @Test(arguments: [
        (["type": "bye", "reason": "server shutting down", "code": "shutdown"] as JSON, false),
        (["type": "bye", "reason": "session moved", "code": "moved"] as JSON, false),
        (["type": "bye", "reason": "client quit", "code": "quit"] as JSON, true),
        (["type": "bye", "reason": "session ended", "code": "ended"] as JSON, true),
        (["type": "bye", "reason": "session expired", "code": "expired"] as JSON, true),
        (["type": "bye", "reason": "ended by another connection of the session", "code": "revoked"] as JSON, true),
        (["type": "bye", "reason": "server shutting down"] as JSON, false),  // a server before 1.1
        (["type": "bye", "reason": "session ended"] as JSON, true),
    ])
    func onlyAByeThatEndsTheSessionStopsTheREPLFromResuming(bye: JSON, final: Bool) {
        var client = ClientSession()
        client.observe(bye)
        #expect(client.ended == final)
    }
}

/// `help` from a hostile server feeds Tab completion and argument hints, which print
/// to the terminal: no control character of it gets there.
@Suite struct ClientSessionHostileHelpTests {
    @Test func completionsAndHintsCarryNoControlCharacters() {
        var client = ClientSession()
        let title = "\u{1B}]0;owned\u{07}"
        client.observe([
            "type": "reply", "re": nil, "ok": true,
            "result": [
                "commands": [
                    [
                        "name": .string("se\u{1B}[1march"), "usage": .string("search \(title)"),
                        "arguments": [["name": .string("q\u{9B}31m"), "kind": "text", "summary": .string("\u{1B}]52;c;cGF5\u{07}")]],
                    ],
                    ["name": "sea"],
                ],
                "views": [["name": .string("vi\u{1B}ew")]],
            ],
        ])
        let hint = client.argumentHint(for: "se\u{FFFD}[1march ")
        #expect(hint?.contains("owned") == true && hint?.contains("cGF5") == true)
        #expect(client.completions(for: "se").count == 2 && client.argumentCompletions(for: "state v")?.count == 1)
        let printed = client.completions(for: "se").joined() + (client.argumentCompletions(for: "state v") ?? []).joined() + (hint ?? "")
        #expect(!printed.unicodeScalars.contains { $0.value < 0x20 && $0 != "\n" || (0x7F...0x9F).contains($0.value) })
        #expect(printed.contains("\u{FFFD}"))
    }
}
