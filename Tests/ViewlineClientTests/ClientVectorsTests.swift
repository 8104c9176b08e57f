import Foundation
import Testing
import ViewlineClient
import ViewlineTestSupport

/// The shared vectors in protocol/vectors/ replayed through the Swift client, as the
/// Python and Node clients replay them: every inline line gets the reply its vector
/// promises, and every recorded transcript's commands, sent with `send`, bring the
/// recorded replies and events.
@Suite struct ClientVectorsTests {
    static let vectors = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("protocol/vectors")

    static func load(_ name: String) throws -> JSON {
        try JSON.parse(Array(try Data(contentsOf: vectors.appendingPathComponent(name))))
    }

    @Test func everyInlineVectorGetsTheReplyItPromises() async throws {
        let server = try ServerProcess(["--db", ":memory:", "--demo", "--admin"])
        let client = try await ViewlineClient.connect(to: .tcp(port: server.port))
        for vector in try Self.load("inline.json")["vectors"]?.arrayValue ?? [] {
            guard let line = vector["line"]?.stringValue, vector["cmd"] != "quit" else { continue }  // quit would end the session
            var code: String?
            do { try await client.send(line) } catch let error as ViewlineError { code = error.code.rawValue }
            if let expected = vector["error"]?.stringValue {
                #expect(code == expected, "\(line)")
            } else {
                #expect(!["bad_arguments", "bad_syntax", "unknown_command", "bad_request"].contains(code ?? ""), "\(line): \(code ?? "")")
            }
        }
        await client.close()
    }

    /// Recorded transcripts whose lines are all commands a client sends (`bad-input`
    /// sends broken lines on purpose: only a raw socket can).
    static let transcripts = ["alerts.json", "contacts.json", "drafts.json", "playlist.json", "search.json"]

    @Test(arguments: transcripts) func aTranscriptReplaysThroughTheClient(_ name: String) async throws {
        let transcript = try Self.load("transcripts/" + name)
        let arguments = (transcript["server_args"]?.arrayValue ?? []).compactMap(\.stringValue)
        let server = try ServerProcess(["--db", ":memory:", "--demo"] + arguments)
        let client = try await ViewlineClient.connect(to: .tcp(port: server.port))
        var messages = await client.messages().makeAsyncIterator()
        for step in transcript["steps"]?.arrayValue ?? [] {
            guard let line = step["send"]?.stringValue else { continue }  // the welcome: the client read it
            var failure: ViewlineError?
            do {
                if line.hasPrefix("{"), let object = try? JSON.parse(line), let command = object["cmd"]?.stringValue {
                    try await client.send(command, arguments: object["args"]?.objectValue ?? [:])
                } else {
                    try await client.send(line)
                }
            } catch let error as ViewlineError {
                failure = error
            }
            for expected in step["expect"]?.arrayValue ?? [] {
                let actual = try #require(await messages.next(), "\(name): the stream ended after \(line)")
                #expect(Self.matches(actual, expected), "\(name) after \(line):\n got \(actual.encoded)\nwant \(expected.encoded)")
                if expected["type"] == "reply" {
                    #expect(failure?.code.rawValue == expected["error"]?["code"]?.stringValue, "\(name): \(line)")
                }
            }
        }
        await client.close()
    }

    /// `expected` with `"$any"` for values that vary; a reply's `re` is the client's own id.
    static func matches(_ actual: JSON, _ expected: JSON, key: String = "") -> Bool {
        if expected == "$any" || key == "re" { return true }
        switch (actual, expected) {
        case (.object(let a), .object(let e)):
            return a.keys == e.keys && e.pairs.allSatisfy { pair in a[pair.key].map { matches($0, pair.value, key: pair.key) } ?? false }
        case (.array(let a), .array(let e)):
            return a.count == e.count && zip(a, e).allSatisfy { matches($0, $1) }
        default:
            return actual == expected
        }
    }
}
