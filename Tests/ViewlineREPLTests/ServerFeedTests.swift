import Testing
import ViewlineClient

@testable import ViewlineREPL

/// The REPL shows what the client heard in wire order: a command's reply where it
/// came among the events, whichever of the reply and the client's hand-over the
/// REPL learns of first; the client's own requests are told apart.
@Suite struct ServerFeedTests {
    static let display: JSON = ["type": "display", "rev": 1, "view": "search", "state": ["query": "thai"]]
    static let reply: JSON = ["type": "reply", "re": 7, "ok": true, "result": ["accepted": true]]
    static let later: JSON = ["type": "display", "rev": 2, "view": "search", "state": ["query": "thai", "loading": false]]

    func drain(_ feed: inout ServerFeed) -> [String] {
        var shown: [String] = []
        while let output = feed.next() {
            switch output {
            case .message(let message): shown.append("message \(message["type"]?.stringValue ?? "?") \(message["rev"]?.intValue ?? 0)")
            case .ownReply(let message): shown.append("own \(message["re"]?.intValue ?? 0)")
            case .connection(let state): shown.append("connection \(state)")
            case .unanswered: shown.append("unanswered")
            case .finished: shown.append("finished")
            }
        }
        return shown
    }

    @Test func aReplyHeardBeforeItsHandOverWaitsForItAndKeepsItsPlace() {
        var feed = ServerFeed()
        feed.await(1)
        feed.append([.message(Self.display), .message(Self.reply), .message(Self.later)])
        #expect(drain(&feed) == ["message display 1"])  // the reply is held until the client hands it over
        #expect(feed.awaiting == 1)
        feed.append([.answered(request: 1, .success(Self.reply))])
        #expect(drain(&feed) == ["message reply 0", "message display 2"])
        #expect(feed.awaiting == nil)
    }

    @Test func aHandOverBeforeTheReplyIsHeardShowsTheReplyWhereItCame() {
        var feed = ServerFeed()
        feed.await(1)
        feed.append([.answered(request: 1, .success(Self.reply)), .message(Self.display)])
        #expect(drain(&feed) == ["message display 1"])
        #expect(feed.awaiting == 1)
        feed.append([.message(Self.reply)])
        #expect(drain(&feed) == ["message reply 0"])
        #expect(feed.awaiting == nil)
    }

    @Test func theClientsOwnRepliesAreToldApart() {
        var feed = ServerFeed()
        let resume: JSON = ["type": "reply", "re": 3, "ok": true, "result": ["session": "s1", "snapshot": true]]
        // Idle: any reply is the client's own (a keepalive, a resume's attach), and the
        // welcome of the connection it resumed on is not shown.
        let welcome: JSON = ["type": "welcome", "session": "s9"]
        feed.append([.connection(.reconnecting), .message(welcome), .message(resume), .connection(.connected)])
        #expect(drain(&feed) == ["connection reconnecting", "own 3", "connection connected"])
        // While a command waits: a reply that is not its own.
        feed.await(2)
        feed.append([.message(resume), .message(Self.reply), .answered(request: 2, .success(Self.reply))])
        #expect(drain(&feed) == ["own 3", "message reply 0"])
    }

    @Test func aCommandWithNoReplyIsReportedOnceAndTheEndComesAfter() {
        var feed = ServerFeed()
        feed.await(1)
        feed.append([.message(Self.display), .answered(request: 1, .failure(Timeout(what: "the reply"))), .finished])
        #expect(drain(&feed) == ["message display 1", "unanswered", "finished"])
        #expect(feed.awaiting == nil)
    }
}
