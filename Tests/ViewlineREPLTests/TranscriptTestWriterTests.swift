import Foundation
import Testing
import ViewlineProtocol
import ViewlineREPL

/// `viewline --test-from`: a recorded session written out as a Swift test.
@Suite struct TranscriptTestWriterTests {
    static let todos = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Examples/Todos/Tests/TodosTests")

    @Test func theCheckedInTestIsWhatTheWriterWritesFromItsRecording() throws {
        let transcript = try String(contentsOf: Self.todos.appendingPathComponent("Recordings/undo.jsonl"), encoding: .utf8)
        let written = try TranscriptTestWriter(name: "aTestWrittenFromTheRecordedUndoSessionPasses", apps: ["Todos"]).source(from: transcript)
        let checkedIn = try String(contentsOf: Self.todos.appendingPathComponent("WrittenFromARecordingTests.swift"), encoding: .utf8)
        // The checked-in file is the written test from its doc comment on (its imports add the app's module).
        let body = try #require(written.range(of: "/// Written by")).lowerBound
        #expect(checkedIn.hasSuffix(String(written[body...])))
    }

    @Test func aCommandsCallIsAnsweredBeforeItIsSentAndItsEventsComeAfterItsReply() throws {
        let transcript = """
            {"transcript":1,"session":"s1","server":"viewline/1.3","views":["draft"],"began":"2026-12-02T00:00:00Z","steps":5,"cut":false}
            {"command":{"cmd":"saved"},"connection":1}
            {"call":1,"backend":"save","arguments":{"user":"alice"}}
            {"answer":1,"error":{"code":"unavailable","message":"disk full"}}
            {"event":{"type":"alert","rev":1,"id":"a1","title":"Error","message":"x","actions":[]}}
            {"reply":{"type":"reply","re":null,"ok":false,"error":{"code":"unavailable","message":"disk full"}}}
            """
        let lines = try TranscriptTestWriter(apps: ["Drafts"]).source(from: transcript).split(separator: "\n").map(String.init)
        let answer = try #require(lines.firstIndex { $0.contains("test.answer(call: 1") })
        let send = try #require(lines.firstIndex { $0.contains("test.send(") })
        let receive = try #require(lines.firstIndex { $0.contains("test.receive(event:") })
        #expect(answer < send && send < receive)
        #expect(lines[answer].contains(#"throwing: ProtocolError(ErrorCode(rawValue: "unavailable"), "disk full"))"#))
        #expect(lines[send].contains(#"fails: ErrorCode(rawValue: "unavailable")"#))
        #expect(lines.contains { $0.contains("TestStore(apps: [Drafts.self], services: services, answeringCalls: true)") })
    }

    @Test func hostileStringsStayInsideTheirLiterals() throws {
        // A raw string's end (`"#`), an escape in a raw string (`\#(`), a newline in a comment.
        let value: JSON = ["text": .string(##"a "# b \#(boom) c"##)]
        let literal = TranscriptTestWriter.literal(value)
        // The JSON text holds `"#` and `\#`: two `#`s, which it holds in neither place.
        #expect(literal.hasPrefix("##\"") && literal.hasSuffix("\"##"), "\(literal)")
        let inside = literal.dropFirst(3).dropLast(3)
        #expect(!inside.contains("\"##") && !inside.contains("\\##") && inside == value.encoded[...])
        #expect(TranscriptTestWriter.string("x\"\\\n\u{1B}") == #""x\"\\\n\u{1b}""#)
        let transcript = """
            {"transcript":1,"session":"s1\\n@Test func injected() {}","server":"v","views":[],"began":"b","steps":0,"cut":false}
            """
        let source = try TranscriptTestWriter().source(from: transcript)
        #expect(!source.contains("\n@Test func injected"))
    }

    @Test func aTextThatIsNotATranscriptIsRefusedWithItsLine() {
        #expect(throws: TranscriptTestWriter.Failure.self) { try TranscriptTestWriter().source(from: "{\"cmd\":\"ping\"}") }
        let failure = #expect(throws: TranscriptTestWriter.Failure.self) {
            try TranscriptTestWriter().source(from: "{\"transcript\":1}\n[1,2]")
        }
        #expect(failure?.line == 2)
    }
}
