import Synchronization
import Testing
import ViewlineProtocol
import ViewlineTesting

@testable import ViewlineKit

/// A view-model's change may read its own state, or display it, while the change
/// runs: it sees the state as it is changing. An update of the same view-model from
/// inside its change is made to a copy and dropped (the outer change holds the
/// state), never a crash of the server.
@Suite struct ReentrantUpdateTests {
    enum Mirror: ViewModel {
        struct State: Codable, Sendable, Equatable {
            var count = 3
            var seen: [Int] = []
        }
        static let view = "mirror"
        static let stateSummary = "{count, seen}"
        static func initialState(_ services: Services) -> State { State() }
        static let commands: [Command<Mirror>] = [
            Command("double", summary: "Twice the count, plus one, read inside the change.") { session, _ in
                session.update {
                    $0.seen.append(session.state.count)
                    $0.count = session.state.count * 2 + 1
                }
                return ["count": .int(session.state.count)]
            },
            Command("show", summary: "Display mid-change.") { session, _ in
                session.update(display: false) {
                    $0.count += 10
                    session.display()
                }
                return [:]
            },
            Command("nested", summary: "Update inside its own update.") { session, _ in
                session.update {
                    $0.count += 1
                    session.update { $0.count += 100 }
                    $0.seen.append(session.state.count)
                }
                return ["count": .int(session.state.count)]
            },
        ]
    }

    @Test func aChangeReadsItsOwnStateAsItIsChanging() async throws {
        let session = Session(id: "s1", application: Application([Mirror.self]), output: { _ in })
        _ = await session.send("double")
        #expect(await session.state(Mirror.self) == Mirror.State(count: 7, seen: [3]))
        _ = await session.send("double")
        #expect(await session.state(Mirror.self) == Mirror.State(count: 15, seen: [3, 7]))
    }

    @Test func aDisplayFromInsideAChangeShowsTheStateAsItIsChanging() async throws {
        let displays = Mutex<[JSON]>([])
        let session = Session(
            id: "s1", application: Application([Mirror.self]),
            output: { message in
                if case .display(_, let view, let state) = message, view == "mirror" { displays.withLock { $0.append(state) } }
            })
        _ = await session.send("show")
        #expect(displays.withLock { $0.last?["count"] } == 13)
        #expect(await session.state(Mirror.self).count == 13)
    }

    @Test func anUpdateInsideItsOwnUpdateIsDroppedNotACrash() async throws {
        let replies = Mutex<[JSON]>([])
        let session = Session(
            id: "s1", application: Application([Mirror.self]),
            output: { message in
                if case .reply(_, .success(let result)) = message { replies.withLock { $0.append(result) } }
            })
        await session.send("nested")
        #expect(replies.withLock { $0 } == [["count": 4]])
        #expect(await session.state(Mirror.self) == Mirror.State(count: 4, seen: [4]))
    }
}
