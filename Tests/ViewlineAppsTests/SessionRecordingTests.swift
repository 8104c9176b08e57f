import Foundation
import Testing
import ViewlineApps
import ViewlineKit
import ViewlineTesting

/// What a session's recording keeps, and what it must not: secrets, an error's
/// text, more memory than it counts. Each exported as `export` gives it and read
/// back as a replay reads it.
@Suite struct SessionRecordingTests {
    /// The session's transcript, as `export` gives it (a test store's session is in
    /// no server's registry for `export` to find).
    static func export(_ test: TestStore) async throws -> (text: String, transcript: Transcript) {
        let result = try await test.session.transcript()
        let text = try #require(result["transcript"]?.stringValue)
        return (text, try Transcript(text: text))
    }

    @Test func endOthersNewTokenIsMaskedAndAReplayDoesNotCompareIt() async throws {
        let harness = try await TestHarness()
        let test = harness.makeStore()
        test.exhaustive = false
        let reply = try #require(try await test.send("end-others")?.get())
        let token = try #require(reply["token"]?.stringValue)
        let (text, transcript) = try await Self.export(test)
        #expect(!text.contains(token))
        #expect(text.contains(#""masked":["result.token"]"#))
        // Played again, the build makes a token of its own: not a difference.
        try await Replay(transcript, apps: SeedApps.all, services: harness.services, faults: harness.faults).run()
    }

    @Test func everyAlertFieldIsMaskedButThoseThePresentedAlertDeclaresPlain() async throws {
        let harness = try await TestHarness()
        let test = harness.makeStore()
        test.exhaustive = false
        // No alert up: both fields masked (a password typed before its alert came).
        await test.send("confirm user=bob password=EARLY-SECRET", fails: .noAlert)
        await test.send("playlist")
        _ = try await test.recorder.waitUntil { $0.contains { if case .alert = $0 { true } else { false } } }
        // The log-in alert is up: `user` is its plain field, a misspelt one is masked too.
        await test.send("confirm user=bob pasword=TYPO-SECRET", fails: .badArguments)
        let (text, transcript) = try await Self.export(test)
        #expect(!text.contains("EARLY-SECRET") && !text.contains("TYPO-SECRET"))
        let commands = transcript.text.split(separator: "\n").filter { $0.contains(#""cmd":"confirm""#) }
        #expect(commands.count == 2)
        #expect(commands[0].contains(#""masked":["fields.user","fields.password"]"#), "\(commands[0])")
        #expect(commands[1].contains(#""user":"bob""#) && commands[1].contains(#""masked":["fields.pasword"]"#), "\(commands[1])")
    }

    @Test func aBackendErrorOfAnotherTypeIsKeptAsItsTypeAlone() async throws {
        struct DatabaseDown: Error, CustomStringConvertible {
            var description: String { "connect to postgres://app:S3cretPw@db.internal failed" }
        }
        let harness = try await TestHarness()
        let test = harness.makeStore()
        test.exhaustive = false
        await test.send("search thai")
        try await harness.places.waitForQueries(1)
        harness.places.respond(to: "thai", with: .failure(DatabaseDown()))
        _ = try await test.recorder.waitUntil { $0.contains { if case .alert = $0 { true } else { false } } }
        let (text, transcript) = try await Self.export(test)
        let answer = try #require(text.split(separator: "\n").first { $0.hasPrefix(#"{"answer":1,"#) })
        #expect(answer == #"{"answer":1,"error":{"type":"DatabaseDown"}}"#)
        // The search view shows an error's text in its alert: the alert the user saw
        // is recorded as sent, and a replay, which has only the type, says so there.
        let divergence = await #expect(throws: ReplayDivergence.self) {
            try await Replay(transcript, apps: SeedApps.all, services: harness.services, faults: harness.faults).run()
        }
        #expect(divergence?.difference.contains("+ message: \"an error of type DatabaseDown (its text was not recorded)\"") == true)
    }

    @Test func whatAnswersForTheServerIsNotRecordedOnAnyEventLoop() async throws {
        let harness = try await TestHarness()
        let test = harness.makeStore()
        test.exhaustive = false
        await test.send("help")
        await test.send("sessions")
        await test.send("slowlog")
        await test.send("ping")
        let (text, _) = try await Self.export(test)
        #expect(!text.contains(#""cmd":"help""#) && !text.contains(#""cmd":"sessions""#) && !text.contains(#""cmd":"slowlog""#))
        #expect(text.contains(#""cmd":"ping""#))
    }

    @Test func manySmallFieldsAreCountedForWhatTheyHoldNotTheirText() async throws {
        let harness = try await TestHarness()
        let test = harness.makeStore()
        test.exhaustive = false
        let fields = (0..<256).map { "f\($0)=1" }.joined(separator: " ")
        await test.send("confirm \(fields)", fails: .noAlert)
        let recording = try #require(test.session.recording)
        // 256 keys and values, each a node of its own in memory: far more than its ~1.5 KB of text.
        #expect(recording.bytes >= 256 * 2 * 32)
    }

    @Test func aReplayRunsWithTheAdminModeItWasRecordedIn() async throws {
        let transcript = try Transcript(
            text: """
                {"transcript":1,"session":"s1","server":"viewline/1.3","views":[],"admin":false,"began":"2026-12-02T00:00:00Z","steps":2,"cut":false}
                {"command":{"cmd":"fault","args":{"service":"search"}},"connection":1}
                {"reply":{"type":"reply","re":null,"ok":false,"error":{"code":"admin_disabled","message":"fault is an admin command; start the server with --admin"}}}
                """)
        try await Replay(transcript, apps: []).run()
    }

    @Test func onlyWhatTheStepSaysWasMaskedIsASecret() async throws {
        // Someone searched for the mask's own text: a value like any other.
        let harness = try await TestHarness()
        let test = harness.makeStore()
        test.exhaustive = false
        await test.send("search •••")
        let (text, transcript) = try await Self.export(test)
        #expect(!text.contains("masked"))
        #expect(transcript.count >= 2)
    }

    @Test func anAnswerThatNoLongerDecodesStopsTheReplayAtThatAnswer() async throws {
        let text = try String(contentsOf: SeedFlowReplayTests.recordings.appendingPathComponent("search.jsonl"), encoding: .utf8)
        var lines = text.split(separator: "\n").map(String.init)
        let answer = try #require(lines.firstIndex { $0.hasPrefix(#"{"answer":1,"#) })
        lines[answer] = #"{"answer":1,"value":{"oops":1}}"#
        let divergence = await #expect(throws: ReplayDivergence.self) {
            try await SeedFlowReplayTests.replay(try Transcript(text: lines.joined(separator: "\n"))).run()
        }
        #expect(divergence?.step == answer)
        #expect(divergence?.difference.contains("does not decode") == true, "\(String(describing: divergence))")
    }
}
