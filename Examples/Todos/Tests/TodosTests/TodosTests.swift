import Foundation
import Synchronization
import Testing
import Todos
import ViewlineKit
import ViewlineTesting

/// Keeps what was saved, can be told to fail, and can hold saves until the test
/// releases them (so the test decides what happens first).
final class FakeTodoStore: TodoStore {
    private let state = Mutex<(saved: [[Todo]], failures: Int, holding: Bool, held: [CheckedContinuation<Void, Never>])>(([], 0, false, []))

    var saved: [[Todo]] { state.withLock { $0.saved } }
    func failNext() { state.withLock { $0.failures += 1 } }
    func hold() { state.withLock { $0.holding = true } }

    /// Lets the held saves go on, once one is waiting.
    func release() async throws {
        for _ in 0..<2000 where state.withLock({ $0.held.isEmpty }) { try await Task.sleep(for: .milliseconds(1)) }
        let held = state.withLock { state in
            defer { state.held = [] }
            return state.held
        }
        held.forEach { $0.resume() }
    }

    func save(_ items: [Todo]) async throws {
        if state.withLock({ $0.holding }) {
            await withCheckedContinuation { continuation in state.withLock { $0.held.append(continuation) } }
        }
        try state.withLock { state in
            if state.failures > 0 {
                state.failures -= 1
                throw ServiceError("todo-store", "disk full")
            }
            state.saved.append(items)
        }
    }
}

@Suite struct TodosTests {
    let store = FakeTodoStore()

    /// A test store over the fake: in this process by default, or (`.live`) behind a
    /// real server on a loopback port, driven over TCP by the same test body.
    func makeStore(_ mode: TestStore.Mode = .session) async throws -> TestStore {
        var services = Services()
        services.todoStore = store
        return try await TestStore(apps: [Todos.self], services: services, mode: mode)
    }

    @Test(arguments: TestStore.Mode.allCases)
    func addingAnItemShowsItAndSavesInTheBackground(mode: TestStore.Mode) async throws {
        let test = try await makeStore(mode)
        await test.send("add buy milk", reply: ["id": 1])
        // One display for the command, its last state: the item shown, saving.
        await test.receive(Todos.self) {
            $0.items = [Todo(id: 1, title: "buy milk", done: false)]
            $0.saving = true
        }
        await test.receive(Todos.self) { $0.saving = false }
        await test.finish()
        #expect(store.saved == [[Todo(id: 1, title: "buy milk", done: false)]])
    }

    @Test func aRecordOfTheFirstVersionComesBackWithNoFilterOnTheFirstPage() throws {
        // As release 1 wrote it: the items and the next id.
        let stored = try JSON.parse(#"{"items":[{"id":1,"title":"buy milk","done":false}],"nextID":2}"#)
        let state = try Todos.record!.read(stored, recordedVersion: 1).get()
        #expect(state.items == [Todo(id: 1, title: "buy milk", done: false)])
        #expect(state.filter == "" && state.visible.count == 1)
        // A record of this version keeps the filter.
        let current = try JSON.parse(
            #"{"items":[{"id":1,"title":"buy milk","done":false},{"id":2,"title":"call mum","done":true}],"filter":"milk","shown":10,"nextID":3}"#)
        let filtered = try Todos.record!.read(current, recordedVersion: 2).get()
        #expect(filtered.filter == "milk" && filtered.visible.map(\.title) == ["buy milk"])
    }

    @Test func aDeleteCanBeUndoneFromItsAlert() async throws {
        let test = try await makeStore()
        store.hold()
        let milk = Todo(id: 1, title: "buy milk", done: false)
        await test.send("add buy milk", reply: ["id": 1])
        await test.receive(Todos.self) {
            $0.items = [milk]
            $0.saving = true
        }
        try await store.release()
        await test.receive(Todos.self) { $0.saving = false }

        await test.send("delete 1", reply: ["deleted": 1])
        await test.receive(Todos.self) {
            $0.items = []
            $0.saving = true
        }
        await test.receiveAlert(Todos.undoAlert(for: milk))
        try await store.release()
        await test.receive(Todos.self) { $0.saving = false }

        await test.send("confirm", reply: ["alert": "a1", "answer": "confirm", "action": "Undo"])
        await test.receiveDismiss("a1")  // answered: taken down on every connection
        await test.receive(Todos.self) {
            $0.items = [milk]
            $0.saving = true
        }
        try await store.release()
        await test.receive(Todos.self) { $0.saving = false }
        await test.finish()
        #expect(store.saved == [[milk], [], [milk]])
    }

    @Test func aLiveFilterAndAPagingCommandShowTheMatchingItemsAPageAtATime() async throws {
        let test = try await makeStore()
        test.exhaustive = false  // the adds' and saves' displays are not what this test is about
        for number in 1...12 { await test.send("add \(number % 3 == 0 ? "buy" : "walk") \(number)") }
        func shown() -> (titles: [String], hasMore: Bool?) {
            let state = test.recorder.displays("todos").last
            return (state?["items"]?.arrayValue?.compactMap { $0["title"]?.stringValue } ?? [], state?["hasMore"]?.boolValue)
        }
        await test.send("filter", reply: ["shown": 10])
        #expect(shown().titles.count == 10 && shown().hasMore == true)
        await test.send("more", reply: ["shown": 12])
        #expect(shown().titles.count == 12 && shown().hasMore == false)
        await test.send("filter BUY", reply: ["shown": 4])
        #expect(shown().titles == ["buy 3", "buy 6", "buy 9", "buy 12"] && shown().hasMore == false)
        await test.send("done 6", reply: ["done": true])  // ids are the whole list's
        #expect(shown().titles.count == 4)
        await test.finish()
    }

    @Test func aFailedSaveStopsSavingAndSaysSo() async throws {
        let test = try await makeStore()
        store.failNext()
        await test.send("add call mom", reply: ["id": 1])
        await test.receive(Todos.self) {
            $0.items = [Todo(id: 1, title: "call mom", done: false)]
            $0.saving = true
        }
        await test.receive(Todos.self) { $0.saving = false }
        await test.receiveAlert(.error("Saving the list failed: disk full"))
        await test.finish()
    }

    @Test func unknownItemsAndMissingTitlesAreClearErrors() async throws {
        let test = try await makeStore()
        await test.send("done 7", fails: .noSuchTodo)
        await test.send("delete x", fails: .noSuchTodo)
        await test.send("add", fails: .badArguments)
        await test.finish()
    }

    /// A session recorded on `todo-server --admin` (add two items, check one off,
    /// delete one and undo it), downloaded from the inspector page as a test, played
    /// against this build: the recorded saves answered as they were, every event and
    /// reply compared with the recorded one.
    @Test func theRecordedUndoSessionStillPlaysTheSame() async throws {
        let recording = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Recordings/undo.jsonl")
        var services = Services()
        services.todoStore = store  // a backend: the replay answers its calls, never calls it
        try await Replay(Transcript(contentsOf: recording), apps: [Todos.self], services: services).run()
        #expect(store.saved.isEmpty)
    }
}
