import Testing
import ViewlineProtocol

/// A server line read back is the message that wrote it; a line a hostile or
/// broken server might send is refused (`nil`), never a crash.
@Suite struct ServerMessageParsingTests {
    static let messages: [ServerMessage] = [
        .welcome(session: "s1", token: String(repeating: "ab", count: 24), server: "viewline/1.3"),
        .welcome(session: "s1", token: String(repeating: "ab", count: 24), server: "viewline/1.3", maximumLineBytes: 65_536),
        .reply(re: .null, result: .success(["accepted": true, "query": "thai"])),
        .reply(re: 7, result: .success(.null)),
        .reply(re: "a", result: .failure(ProtocolError(.moved, "the session lives on 10.0.0.2:7878", address: "10.0.0.2:7878"))),
        .reply(re: .null, result: .failure(ProtocolError(.attachThrottled, "wait", retryAfter: 3))),
        .display(rev: 3, view: "search", state: ["query": "thai", "loading": false, "results": []]),
        .alert(rev: 4, id: "a1", content: .error("The search failed")),
        .alert(
            rev: 5, id: "a2",
            content: AlertContent(
                title: "Log in", message: "Log in to see your playlist",
                actions: [.confirm("Log in"), .cancel("Not now")],
                fields: [AlertField(name: "user", label: "User"), AlertField(name: "password", label: "Password", secure: true)])),
        .dismiss(rev: 6, id: "a2"),
        .bye(.moved),
        .bye(Bye(.refused, "max clients reached")),
    ]

    @Test(arguments: messages) func aLineReadBackIsTheMessageThatWroteIt(message: ServerMessage) {
        #expect(ServerMessage(line: message.line.dropLast()) == message)
        #expect(ServerMessage(line: message.line) == message)  // its newline too
    }

    @Test func aMovedErrorKeepsItsWebPage() {
        var error = ProtocolError(.moved, "elsewhere", address: "h:1")
        error.web = "http://h:2/"
        let message = ServerMessage.reply(re: .null, result: .failure(error))
        #expect(ServerMessage(line: message.line.dropLast()) == message)
    }

    @Test func keysALaterServerAddsAreIgnored() {
        let line = #"{"type":"welcome","protocol":1,"minor":9,"session":"s1","token":"t","server":"x","region":"eu"}"#
        #expect(ServerMessage(line: Array(line.utf8)) == .welcome(session: "s1", token: "t", server: "x"))
    }

    @Test(arguments: [
        "", "null", "[]", "{}", #"{"type":"display"}"#, #"{"type":"display","rev":"1","view":"v","state":{}}"#,
        #"{"type":"reply","re":null}"#, #"{"type":"reply","re":null,"ok":false,"error":{"code":"x"}}"#,
        #"{"type":"alert","rev":1,"id":"a","title":"t","message":"m","actions":[]}"#,
        #"{"type":"alert","rev":1,"id":"a","title":"t","message":"m","actions":[{"role":"confirm","label":"1"},{"role":"confirm","label":"2"},{"role":"cancel","label":"3"}]}"#,
        #"{"type":"alert","rev":1,"id":"a","title":"t","message":"m","actions":[{"role":"destroy","label":"x"}]}"#,
        #"{"type":"teleport"}"#, #"{"type":"welcome","protocol":1}"#,
    ])
    func aLineThatIsNoMessageIsRefused(line: String) {
        #expect(ServerMessage(line: Array(line.utf8)) == nil)
    }
}
