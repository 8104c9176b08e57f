import Testing
import ViewlineKit

@Suite struct InlineTokenizerTests {
    @Test(arguments: try Vectors.load("inline.json"))
    func sharedInlineVector(_ vector: JSON) throws {
        let line = try #require(vector["line"]?.stringValue)
        if let words = vector["words"]?.arrayValue {
            #expect(try InlineTokenizer.split(line).map(JSON.string) == words, "\(line)")
        }
        let decoded = RequestDecoder.decode(line: line, commands: Vectors.commands)
        if let code = vector["error"]?.stringValue {
            guard case .failure(let failure)? = decoded else {
                Issue.record("\(line) should fail with \(code)")
                return
            }
            #expect(failure.error.code.rawValue == code, "\(line)")
            #expect(failure.re == .null)
        } else {
            let parsed = try Vectors.commands.inlineArguments(words: InlineTokenizer.split(line))
            #expect(JSON.string(parsed.name) == vector["cmd"], "\(line)")
            #expect(JSON.object(parsed.args) == vector["args"], "\(line)")
            guard case .success(let request)? = decoded else {
                Issue.record("\(line) should parse")
                return
            }
            #expect(request == (try Vectors.commands.request(name: parsed.name, args: parsed.args)))
            #expect(request.id == .null)
        }
    }

    @Test func quoteIsTheInverseOfSplit() throws {
        for word in ["plain", "two words", "say \"hi\"", "back\\slash", "", "tab\there", "new\nline", "ラーメン"] {
            #expect(try InlineTokenizer.split("search " + InlineTokenizer.quote(word)) == ["search", word])
        }
    }

    @Test(arguments: ["search  ラーメン\tbar", "search back\\slash it's", "\t search a\u{7}b ", "search \"quoted words\" x"])
    func linesDecodeAsTheTokenizerSplitsThem(_ line: String) throws {
        let expected = try Vectors.commands.request(words: InlineTokenizer.split(line))
        guard case .success(let request)? = RequestDecoder.decode(line: line, commands: Vectors.commands) else {
            Issue.record("\(line) should parse")
            return
        }
        #expect(request == expected)
    }

    @Test func blankLinesAreIgnored() {
        #expect(RequestDecoder.decode(line: "", commands: Vectors.commands) == nil)
        #expect(RequestDecoder.decode(line: "   \t ", commands: Vectors.commands) == nil)
        #expect(RequestDecoder.decode(line: "\r", commands: Vectors.commands) == nil)
    }

    @Test func crlfIsAccepted() throws {
        guard case .success(let request)? = RequestDecoder.decode(line: "search thai\r", commands: Vectors.commands) else {
            Issue.record("CRLF line should parse")
            return
        }
        #expect(request.name == "search" && request.arguments.string("query") == "thai")
    }

    @Test func invalidUTF8IsBadEncoding() {
        guard case .failure(let failure)? = RequestDecoder.decode(line: [0x73, 0x65, 0xFF, 0xFE], commands: Vectors.commands) else {
            Issue.record("invalid UTF-8 should fail")
            return
        }
        #expect(failure.error.code == .badEncoding)
    }
}
