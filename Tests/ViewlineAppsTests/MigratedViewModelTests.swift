import Testing
import ViewlineApps
import ViewlineKit
import ViewlineTesting

// A view-model written against the API before `ViewSession` (1.3), ported by a fresh
// reader from the tutorial's "Moving a view-model" alone (edit 6), as an outside
// package would be: it must compile and behave as it did.

/// Where the ported view-model saves its notes.
protocol NotesStore: Sendable {
    func save(_ notes: [String]) async throws
}

enum NotesStoreKey: BackendKey {
    typealias Value = any NotesStore
    static let name = "notes-store"
    static let summary = "where the notes are saved"
}

final class RecordingNotesStore: NotesStore, @unchecked Sendable {
    private(set) var saved: [[String]] = []
    func save(_ notes: [String]) async throws { saved.append(notes) }
}

enum Notes: ViewModel {
    struct State: Codable, Sendable, Equatable {
        var notes: [String] = []
        var saving = false
        var owner: String?
    }
    static let view = "notes"
    static let stateSummary = "{notes, saving, owner}"
    static let busyFields = ["saving"]
    static func initialState(_ services: Services) -> State { State() }

    static let commands: [Command<Notes>] = [
        Command("note", summary: "Add a note.", arguments: [.text("text")]) { session, args in
            let user = try requireUser(in: session)
            session.update {
                $0.notes.append(args.string("text")); $0.owner = user
            }
            save(in: session)
            return ["count": .int(session.state.notes.count)]
        },
        Command("clear", summary: "Clear the notes after asking.") { session, _ in
            switch await session.ask(AlertContent(title: "Clear?", message: "Clear every note?", actions: [.confirm("Clear"), .cancel("Keep")])) {
            case .confirmed:
                session.update(display: false) { $0.notes = [] }
                session.display()
                return ["cleared": true]
            case .cancelled, .dismissed:
                return ["cleared": false]
            }
        },
    ]

    static func requireUser(in session: isolated ViewSession<Notes>) throws(ProtocolError) -> String {
        guard let user = session.user else { throw ProtocolError(.loginRequired, "log in first") }
        return user
    }

    static func save(in session: isolated ViewSession<Notes>) {
        let notes = session.state.notes
        session.update { $0.saving = true }
        session.run(TaskSlot("notes-save")) { session in
            do {
                try await session.call(NotesStoreKey.self) { store in try await store.save(notes) }
            } catch {
                session.showAlert(.error("Saving failed"))
            }
            session.update { $0.saving = false }
        }
    }

    static func userChanged(in session: isolated ViewSession<Notes>, from previous: String?) async {
        if session.user == nil { session.update { $0 = State() } }
        let searchQuery = session.sibling(Search.self) { $0.state.query }  // Search is another view-model of the same app
        session.logger.info("user changed", metadata: ["query": "\(searchQuery)"])
    }

    static func restored(in session: isolated ViewSession<Notes>) async {
        if session.hasDisplayed { session.display() }
    }
}

@Suite struct MigratedViewModelTests {
    @Test func aViewModelPortedWithTheMigrationNoteAloneRunsAsBefore() async throws {
        let harness = try await TestHarness()
        let notes = RecordingNotesStore()
        var services = harness.services
        services[NotesStoreKey.self] = notes
        let test = TestStore(apps: SeedApps.all + [Notes.self], services: services, faults: harness.faults, exhaustive: false)
        await test.send("note hello", fails: .loginRequired)
        _ = await test.send("login alice wonderland")
        await test.send("note hello", reply: ["count": 1])
        await test.receive(Notes.self) {
            $0.notes = ["hello"]
            $0.owner = "alice"
            $0.saving = true
        }
        await test.receive(Notes.self) { $0.saving = false }
        await test.finish()
        #expect(notes.saved == [["hello"]])
    }
}
