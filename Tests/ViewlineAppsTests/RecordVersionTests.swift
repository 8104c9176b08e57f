import Foundation
import Testing
import ViewlinePersistence
@testable import ViewlineKit

/// A view's record across releases: release 1 records `{text}`, release 2 renamed it
/// `body` and added `tags`, with a migration. A record is read by the release that
/// restores it — migrated when older, refused (never reset) when it cannot be read —
/// over the real single-node directory (SQLite), as a restart between releases does.
@Suite struct RecordVersionTests {
    enum NotesV1: ViewModel {
        struct State: Codable, Sendable, Equatable { var text = "" }
        static let view = "notes"
        static let stateSummary = "{text}"
        static func initialState(_ services: Services) -> State { State() }
        static let commands: [Command<NotesV1>] = [
            Command("note", summary: "Write the note.", arguments: [.text("text")]) { session, args in
                let text = args.string("text")
                session.update { $0.text = text }
                return [:]
            }
        ]
    }

    enum NotesV2: ViewModel {
        struct State: Codable, Sendable, Equatable {
            var body = ""
            var tags: [String] = []
        }
        static let view = "notes"
        static let stateSummary = "{body, tags}"
        static func initialState(_ services: Services) -> State { State() }
        static let commands: [Command<NotesV2>] = [
            Command("note", summary: "Write the note.", arguments: [.text("text")]) { session, args in
                let text = args.string("text")
                session.update { $0.body = text }
                return [:]
            }
        ]
        static let record: StateRecord<State>? = StateRecord.codable(version: 2)
            .migrating(from: 1) { state in
                // 1 → 2: `text` became `body`; `tags` is new.
                state["body"] = state["text"] ?? ""
                state["text"] = nil
                state["tags"] = []
            }
    }

    /// Release 2 again, forgetting its migration: a record of release 1 is unreadable.
    enum NotesV2WithoutMigration: ViewModel {
        typealias State = NotesV2.State
        static let view = "notes"
        static let stateSummary = "{body, tags}"
        static func initialState(_ services: Services) -> State { State() }
        static let commands: [Command<NotesV2WithoutMigration>] = []
        static let record: StateRecord<State>? = StateRecord.codable(version: 2)
    }

    /// A release whose notes are cheap to lose: an unreadable record restarts them.
    enum NotesLenient: ViewModel {
        typealias State = NotesV2.State
        static let view = "notes"
        static let stateSummary = "{body, tags}"
        static func initialState(_ services: Services) -> State { State(body: "fresh") }
        static let commands: [Command<NotesLenient>] = []
        static let record: StateRecord<State>? = StateRecord.codable(version: 2, whenUnreadable: .startAtInitialState)
    }

    /// Release 1 again, its notes declared cheap to lose.
    enum NotesV1Lenient: ViewModel {
        typealias State = NotesV1.State
        static let view = "notes"
        static let stateSummary = "{text}"
        static func initialState(_ services: Services) -> State { State() }
        static let commands: [Command<NotesV1Lenient>] = []
        static let record: StateRecord<State>? = StateRecord.codable(whenUnreadable: .startAtInitialState)
    }

    @Test func aMigrationTurnsAStoredRecordOfTheOldVersionIntoTheNewState() throws {
        let fixture = try JSON.parse(#"{"text":"buy milk"}"#)  // as release 1 wrote it
        #expect(try NotesV2.record!.read(fixture, recordedVersion: 1).get() == NotesV2.State(body: "buy milk", tags: []))
        #expect(try NotesV2.record!.read(["body": "x", "tags": ["a"]], recordedVersion: 2).get() == NotesV2.State(body: "x", tags: ["a"]))
        #expect(NotesV2.record!.read(fixture, recordedVersion: 3) == .failure(.newer))
        #expect(NotesV2WithoutMigration.record!.read(fixture, recordedVersion: 1) == .failure(.noMigration(from: 1)))
        guard case .failure(.decode) = NotesV1.record!.read(["body": "x"], recordedVersion: 1) else {
            Issue.record("a state of another shape must not decode")
            return
        }
    }

    @Test func aStateThatIsNotDecodableIsDeclaredNotRecorded() {
        enum Shown: ViewModel {
            struct State: Encodable, Sendable { var count = 0 }
            static let view = "shown"
            static let stateSummary = "{count}"
            static func initialState(_ services: Services) -> State { State() }
            static let commands: [Command<Shown>] = []
        }
        #expect(Shown.record == nil)
        #expect(NotesV1.record?.version == 1)
    }

    /// One SQLite file, and a node of each release over it in turn (one process holds
    /// the file: the directory is shared, each node is a new life).
    final class Deploys {
        let directory: SQLiteSessionDirectory
        var lives: [Application] = []

        init() throws {
            let path = NSTemporaryDirectory() + "viewline-records-\(UUID().uuidString).sqlite"
            let lock = try SQLiteSessionDirectory.lock(path: path)
            directory = SQLiteSessionDirectory(try SQLiteStore.open(path: path), lock: lock, expireAfter: .seconds(300))
        }

        /// A node of the release serving `model`, the previous one gone (its records written).
        func release(_ model: any ViewModel.Type) async throws -> Application {
            if let previous = lives.last {
                await previous.cluster!.flush()
                try await directory.leave(previous.cluster!.node)
            }
            return try await node(model, address: "127.0.0.1:7878")
        }

        /// A node of the release serving `model` at `address`, beside those running
        /// (as in a rolling deploy: they share the directory, each with its lease).
        func node(_ model: any ViewModel.Type, address: String) async throws -> Application {
            let cluster = Cluster(directory: directory, address: address, nodeTimeout: .seconds(600))
            let application = Application([model], services: Services(), cluster: cluster)
            try await cluster.renew()  // with its release and record versions
            cluster.hold(application.sessions)
            lives.append(application)
            return application
        }
    }

    @Test func aRestartIntoANewReleaseMigratesTheRecordAndAnOlderOneNeverResetsIt() async throws {
        let deploys = try Deploys()
        let one = try await deploys.release(NotesV1.self)
        let session = Session(id: "s1", application: one, output: { _ in })
        _ = await session.handle(Request(id: .null, name: "note", arguments: Arguments(["text": "buy milk"])), from: 0)
        one.cluster!.changed(session)

        // Release 2 migrates it.
        let two = try await deploys.release(NotesV2.self)
        guard case .restored(let restored) = try await two.cluster!.locate(session.token, application: two) else {
            Issue.record("release 2 must restore release 1's record")
            return
        }
        #expect(await restored.state(NotesV2.self) == NotesV2.State(body: "buy milk", tags: []))
        two.cluster!.changed(restored)

        // Rolled back to release 1: it cannot read version 2. The attach is refused with
        // `unavailable` (a node of the newer release can restore it: the client tries
        // again), and the record stays as release 2 wrote it.
        let back = try await deploys.release(NotesV1.self)
        do {
            _ = try await back.cluster!.locate(session.token, application: back)
            Issue.record("an older release must not restore a newer record")
        } catch let error as ProtocolError {
            #expect(error.code == .unavailable && error.retryAfter != nil)
        }
        let seen = back.unreadableRecords.withLock { $0 }.last
        #expect(seen?.view == "notes" && seen?.recordedVersion == 2 && seen?.version == 1 && seen?.reason == .newer && seen?.refused == true)

        // Release 2 again: the session, untouched.
        let again = try await deploys.release(NotesV2.self)
        guard case .restored(let kept) = try await again.cluster!.locate(session.token, application: again) else {
            Issue.record("the record an older release refused must still restore")
            return
        }
        #expect(await kept.state(NotesV2.self).body == "buy milk")
    }

    @Test func aRecordWithoutItsMigrationIsRefusedUnlessTheViewMayStartAgain() async throws {
        let deploys = try Deploys()
        let one = try await deploys.release(NotesV1.self)
        let session = Session(id: "s1", application: one, output: { _ in })
        _ = await session.handle(Request(id: .null, name: "note", arguments: Arguments(["text": "keep me"])), from: 0)
        one.cluster!.changed(session)

        let forgetful = try await deploys.release(NotesV2WithoutMigration.self)
        do {
            _ = try await forgetful.cluster!.locate(session.token, application: forgetful)
            Issue.record("a record without its migration must not restore")
        } catch let error as ProtocolError {
            #expect(error.code == .recordUnreadable)
        }
        #expect(forgetful.unreadableRecords.withLock { $0 }.last?.reason == .noMigration(from: 1))

        // A view declared cheap to lose starts again; the rest of the session comes back.
        let lenient = try await deploys.release(NotesLenient.self)
        guard case .restored(let restored) = try await lenient.cluster!.locate(session.token, application: lenient) else {
            Issue.record("a lenient view must not block the restore")
            return
        }
        #expect(await restored.state(NotesLenient.self).body == "fresh")
        #expect(lenient.unreadableRecords.withLock { $0 }.last?.refused == false)
    }

    /// A view declared cheap to lose still never starts afresh over a newer record:
    /// that would overwrite what the newer release wrote (a rolling deploy's newer
    /// node, or the release rolled forward again, reads it).
    @Test func aNewerRecordIsRefusedEvenWhereTheViewMayStartAgain() async throws {
        let deploys = try Deploys()
        let two = try await deploys.release(NotesV2.self)
        let session = Session(id: "s1", application: two, output: { _ in })
        _ = await session.handle(Request(id: .null, name: "note", arguments: Arguments(["text": "written by release 2"])), from: 0)
        two.cluster!.changed(session)

        let back = try await deploys.release(NotesV1Lenient.self)
        do {
            _ = try await back.cluster!.locate(session.token, application: back)
            Issue.record("an older release must not restore a newer record, lenient or not")
        } catch let error as ProtocolError {
            #expect(error.code == .unavailable && error.retryAfter != nil)
        }
        #expect(back.unreadableRecords.withLock { $0 }.last?.refused == true)

        let again = try await deploys.release(NotesV2.self)
        guard case .restored(let kept) = try await again.cluster!.locate(session.token, application: again) else {
            Issue.record("the record the older release refused must still restore")
            return
        }
        #expect(await kept.state(NotesV2.self).body == "written by release 2")
    }

    /// Many attaches of one session at once on a node that cannot read its record
    /// (a client's tabs, retries): each is told to try again, none that the session is
    /// gone, and the record is untouched.
    @Test func concurrentAttachesOfANewerRecordAreAllToldToTryAgain() async throws {
        let deploys = try Deploys()
        let two = try await deploys.release(NotesV2.self)
        let session = Session(id: "s1", application: two, output: { _ in })
        _ = await session.handle(Request(id: .null, name: "note", arguments: Arguments(["text": "kept"])), from: 0)
        two.cluster!.changed(session)
        let back = try await deploys.release(NotesV1.self)
        let codes = await withTaskGroup(of: String.self) { group in
            for _ in 0..<8 {
                group.addTask {
                    do {
                        _ = try await back.cluster!.locate(session.token, application: back)
                        return "found"
                    } catch let error as ProtocolError {
                        return error.code.rawValue
                    } catch {
                        return "\(error)"
                    }
                }
            }
            return await group.reduce(into: [String]()) { $0.append($1) }
        }
        #expect(codes == Array(repeating: "unavailable", count: 8))
        // Once, in the log and in `inspect`, however many asked.
        #expect(back.unreadableRecords.withLock { $0 }.count == 1)
        let again = try await deploys.release(NotesV2.self)
        guard case .restored(let kept) = try await again.cluster!.locate(session.token, application: again) else {
            Issue.record("the record must still restore on release 2")
            return
        }
        #expect(await kept.state(NotesV2.self).body == "kept")
    }

    /// A node of the older release left owning a newer record (its give-back failed,
    /// or its claim committed after its caller gave up) hands it to a live node of the
    /// newer release and sends the client there: never `moved` back and forth.
    @Test func anOlderNodeOwningANewerRecordHandsItToANodeThatReadsIt() async throws {
        let deploys = try Deploys()
        let two = try await deploys.node(NotesV2.self, address: "127.0.0.1:7002")
        let one = try await deploys.node(NotesV1.self, address: "127.0.0.1:7001")
        let session = Session(id: "s1", application: two, output: { _ in })
        _ = await session.handle(Request(id: .null, name: "note", arguments: Arguments(["text": "written by 2"])), from: 0)
        two.cluster!.changed(session)
        await two.cluster!.flush()
        await session.close()  // gone from node two; its record stays
        let lookup = String(session.token.prefix(16))
        try await deploys.directory.handOver(lookup: lookup, by: two.cluster!.node, to: one.cluster!.nodeID)

        guard case .moved(let address, _) = try await one.cluster!.locate(session.token, application: one) else {
            Issue.record("the older node must send the client to the node that reads the record")
            return
        }
        #expect(address == "127.0.0.1:7002")
        guard case .restored(let restored) = try await two.cluster!.locate(session.token, application: two) else {
            Issue.record("the newer node must restore the record handed to it")
            return
        }
        #expect(await restored.state(NotesV2.self).body == "written by 2")
    }

    /// A record that is not JSON, or holds no views, or a version that is not a
    /// number, is refused as unreadable: never a session at its initial states.
    @Test func aCorruptRecordIsRefusedNeverRestoredBlank() async throws {
        let one = try Application([NotesV1.self], services: Services())
        for text in ["not json {", #"{"id":"s1","vews":{}}"#, #"{"id":"s1","views":{"notes":{"text":"x"}},"versions":{"notes":"1"}}"#] {
            let (_, states, unreadable) = Session.readRecord(text, application: one)
            #expect(states.isEmpty && unreadable.count == 1 && unreadable.allSatisfy(\.refused), "\(text)")
        }
        let (_, states, unreadable) = Session.readRecord(#"{"id":"s1","views":{"notes":{"text":"x"}}}"#, application: one)
        #expect(states.count == 1 && unreadable.isEmpty)
    }
}
