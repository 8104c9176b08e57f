import Testing
import ViewlineKit

@Suite struct ServerMessageTests {
    @Test func everyMessageStartsWithItsType() {
        let messages: [ServerMessage] = [
            .welcome(session: "s1", token: "t", server: "viewline/1.1"),
            .reply(re: 7, result: .success(["pong": true])),
            .reply(re: .null, result: .failure(ProtocolError(.unknownCommand, "nope"))),
            .display(rev: 1, view: "search", state: ["loading": true]),
            .alert(rev: 2, id: "a1", content: .error("boom")),
            .dismiss(rev: 3, id: "a1"),
            .bye(Bye(.quit, "bye")),
        ]
        for message in messages {
            let line = String(decoding: message.line, as: UTF8.self)
            #expect(line.hasPrefix("{\"type\":"))
            #expect(line.hasSuffix("}\n"))
            #expect(line.filter { $0 == "\n" }.count == 1)
        }
    }

    @Test func aReplyFromItsPartsIsTheSameLine() {
        // What a server writes for a result it holds encoded (`state`, `ping`).
        let result: JSON = ["view": "search", "state": ["query": "thai \"food\"", "loading": false, "results": [["rating": 4.5]]]]
        for re: JSON in [.null, 7, "x1"] {
            var line = ServerMessage.replyHead
            re.write(into: &line)
            line += ServerMessage.successfulReplyMiddle
            result.write(into: &line)
            line += ServerMessage.replyTail
            #expect(line == ServerMessage.reply(re: re, result: .success(result)).line)
        }
    }

    @Test func exactEncodings() {
        #expect(
            ServerMessage.reply(re: 7, result: .failure(ProtocolError(.noAlert, "no alert is presented"))).json.encoded
                == #"{"type":"reply","re":7,"ok":false,"error":{"code":"no_alert","message":"no alert is presented"}}"#)
        let alert = AlertContent(
            title: "Log in", message: "m", actions: [.confirm("Log in"), .cancel("Cancel")],
            fields: [AlertField(name: "password", label: "Password", secure: true)])
        #expect(
            ServerMessage.alert(rev: 13, id: "a4", content: alert).json.encoded
                == #"{"type":"alert","rev":13,"id":"a4","title":"Log in","message":"m","actions":[{"role":"confirm","label":"Log in"},{"role":"cancel","label":"Cancel"}],"fields":[{"name":"password","label":"Password","secure":true}]}"#
        )
    }

    @Test func linesWrittenFromTheirPartsMatchTheObject() {
        let tricky = "quote\" backslash\\ newline\n tab\t bell\u{7} del\u{7F} ラーメン"
        let messages: [ServerMessage] = [
            .reply(re: .string(tricky), result: .success(["text": .string(tricky), "list": [1, 2.5, .null]])),
            .reply(re: 3, result: .success("pong")),
            .display(rev: 42, view: tricky, state: ["query": .string(tricky), "results": []]),
        ]
        for message in messages {
            #expect(message.line == Array((message.json.encoded + "\n").utf8))
            if case .display(let rev, let view, let state) = message {
                var encodedState: [UInt8] = []
                state.write(into: &encodedState)
                #expect(ServerMessage.displayLine(rev: rev, view: view, encodedState: encodedState) == message.line)
            }
        }
        #expect(
            String(decoding: ServerMessage.display(rev: 2, view: "search", state: ["q": "a\"b"]).line, as: UTF8.self)
                == #"{"type":"display","rev":2,"view":"search","state":{"q":"a\"b"}}"# + "\n")
    }

    @Test func stringsAreEscaped() throws {
        let tricky = "quote\" backslash\\ newline\n tab\t bell\u{7} ラーメン"
        let encoded = JSON.string(tricky).encoded
        #expect(!encoded.contains("\n"))
        #expect(try JSON.parse(encoded) == .string(tricky))
    }

    @Test func numbersRoundTrip() throws {
        #expect(JSON.double(37.7636).encoded == "37.7636")
        #expect(JSON.double(2).encoded == "2")
        #expect(try JSON.parse("[1,2.5,-3]") == [1, 2.5, -3])
    }
}
