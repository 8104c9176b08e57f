import Foundation
import Testing
import ViewlineApps
import ViewlineKit
import ViewlinePersistence
import ViewlineTesting

/// The seed flows as a real server recorded them (`Recordings/record.py`, each
/// exported with `export <session>`), replayed against this build: the same
/// commands, the recorded backend answers and clock, every event and reply compared.
@Suite struct SeedFlowReplayTests {
    static let recordings = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Recordings")

    static func transcript(_ flow: String) throws -> Transcript {
        try Transcript(contentsOf: recordings.appendingPathComponent("\(flow).jsonl"))
    }

    /// A replay of `flow` on the seed apps as `viewline-server --demo` runs them,
    /// over an empty database of their own.
    static func replay(_ transcript: Transcript, passwords: [String] = ["wonderland"]) async throws -> Replay {
        var configuration = SeedApps.Configuration()
        configuration.demoUsers = true
        let faults = FaultInjector()
        let services = try await SeedApps.liveServices(configuration, store: SQLiteStore.inMemory(), faults: faults)
        return Replay(
            transcript, apps: SeedApps.all, services: services, faults: faults,
            secrets: ["password": passwords])
    }

    @Test(arguments: ["search", "drafts", "contacts", "playlist"])
    func aRecordedSeedFlowReplaysAsItRan(_ flow: String) async throws {
        let transcript = try Self.transcript(flow)
        #expect(!transcript.wasCut)
        #expect(transcript.count > 15)
        try await Self.replay(transcript, passwords: flow == "playlist" ? ["nope", "builder"] : ["wonderland"]).run()
    }

    @Test func aBackendThatAnswersOtherwiseFailsAtTheDisplayWithTheKeyThatChanged() async throws {
        // The recorded places backend now spells a name differently: the view shows it,
        // so the replay stops at that display, naming the result's key.
        let text = try String(contentsOf: Self.recordings.appendingPathComponent("search.jsonl"), encoding: .utf8)
        let answered = text.split(separator: "\n").firstIndex { $0.hasPrefix("{\"answer\":") && $0.contains("Copper Thai Kitchen") }!
        var lines = text.split(separator: "\n").map(String.init)
        lines[answered] = lines[answered].replacingOccurrences(of: "Copper Thai Kitchen", with: "Copper Thai Kitchn")
        let changed = try Transcript(text: lines.joined(separator: "\n"))
        let divergence = await #expect(throws: ReplayDivergence.self) { try await Self.replay(changed).run() }
        #expect(divergence?.command == "search thai")
        #expect(divergence?.step == answered + 1)
        #expect(divergence?.difference.contains(#"− state.results[0].name: "Copper Thai Kitchen""#) == true)
        #expect(divergence?.difference.contains(#"+ state.results[0].name: "Copper Thai Kitchn""#) == true)
    }

    @Test func aCallMadeWithOtherArgumentsFailsThere() async throws {
        let text = try String(contentsOf: Self.recordings.appendingPathComponent("search.jsonl"), encoding: .utf8)
        let changed = try Transcript(
            text: text.replacingOccurrences(of: #""backend":"search","arguments":"thai""#, with: #""backend":"search","arguments":"tai""#))
        let divergence = await #expect(throws: ReplayDivergence.self) { try await Self.replay(changed).run() }
        #expect(divergence?.command == "search thai")
        #expect(divergence?.difference.contains(#"− (the value): "tai""#) == true)
        #expect(divergence?.difference.contains(#"+ (the value): "thai""#) == true)
    }

    @Test func aSecretTheRecordingMaskedMustBeGiven() async throws {
        var replay = try await Self.replay(Self.transcript("drafts"))
        replay.secrets = [:]
        let divergence = await #expect(throws: ReplayDivergence.self) { try await replay.run() }
        #expect(divergence?.difference.contains("masked the secret \"password\"") == true)
        #expect(divergence?.step == 1)
    }
}
