import Synchronization
import Testing
import ViewlineKit
import ViewlineTesting

/// The runtime's rules, checked through a tiny view-model with the test store:
/// every reply and event is asserted, in order. Tests that take a mode run the same
/// body in-process and against a real server over TCP (`TestStore.Mode.live`).
@Suite struct SessionRuntimeTests {
    func services() -> Services {
        var services = Services()
        services.adder = FakeAdder()
        services.total = SharedObservation { AsyncThrowingStream { $0.yield(7) } }
        return services
    }

    @Test(arguments: TestStore.Mode.allCases) func aCommandRepliesFirstThenDisplaysTheNewState(mode: TestStore.Mode) async throws {
        let store = try await TestStore(apps: [Counter.self], services: services(), mode: mode)
        await store.send("increment", reply: ["count": 1])
        await store.receive(Counter.self) { $0.count = 1 }
        await store.send(#"{"id":3,"cmd":"increment","args":{"by":5}}"#, reply: ["count": 6])
        await store.receive(Counter.self) { $0.count = 6 }
        #expect(store.recorder.revs == [1, 2])
        await store.finish()
    }

    @Test func argumentsAreCheckedFromTheDeclaration() async {
        let store = TestStore(apps: [Counter.self], services: services())
        await store.send("increment twice", fails: .badArguments)
        await store.send("increment 0", fails: .badArguments)
        await store.send("increment 1 2", fails: .badArguments)
        await store.send(#"{"cmd":"increment","args":{"by":"two"}}"#, fails: .badArguments)
        await store.send(#"{"cmd":"increment","args":{"times":2}}"#, fails: .badArguments)
        await store.send("label", fails: .badArguments)
        await store.send("increment 101", fails: .tooBig)
        await store.send("teleport", fails: .unknownCommand)
        await store.send("label two  words", reply: ["label": "two words"])
        await store.receive(Counter.self) { $0.label = "two words" }
        await store.finish()
    }

    @Test func helpIsDerivedFromTheDeclarations() async throws {
        let store = TestStore(apps: [Counter.self], services: services())
        let help = try #require(try await store.send("help")?.get())
        let commands = try #require(help["commands"]?.arrayValue)
        let increment = try #require(commands.first { $0["name"] == "increment" })
        #expect(increment["usage"] == "increment [by]")
        #expect(increment["args"] == ["by"])
        #expect(commands.first { $0["name"] == "label" }?["usage"] == "label <text>")
        #expect(commands.compactMap { $0["name"]?.stringValue }.prefix(5) == ["help", "ping", "state", "wait", "quit"])
        #expect(
            help["views"] == [
                ["name": "counter", "state": "{count, label, busy}", "recorded": 1],
                ["name": "connections", "state": "{count}: the session's connections, once more than one", "builtin": true],
            ])
        #expect(help["services"]?.arrayValue?.first?["name"] == "adder")
        #expect(help["errors"]?.arrayValue?.contains { $0["code"] == "too_big" } == true)
        // Each argument's kind (protocol 1.2) and the view that declares the command.
        #expect(increment["arguments"] == [["name": "by", "kind": "integer", "minimum": 1, "maximum": 9_007_199_254_740_991, "required": false]])
        #expect(commands.first { $0["name"] == "ping" }?["builtin"] == true)
        await store.send(
            "help label",
            reply: [
                "command": [
                    "name": "label", "usage": "label <text>", "summary": "Name the counter.", "args": ["text"],
                    "arguments": [["name": "text", "kind": "text", "required": true]], "example": "label my counter", "view": "counter",
                ]
            ])
        await store.finish()
    }

    @Test(arguments: TestStore.Mode.allCases) func anAlertWaitsForItsAnswerAndCarriesItsFields(mode: TestStore.Mode) async throws {
        let store = try await TestStore(apps: [Counter.self], services: services(), mode: mode)
        await store.send("increment", reply: ["count": 1])
        await store.receive(Counter.self) { $0.count = 1 }
        await store.send("reset", reply: ["asked": true])
        let id = await store.receiveAlert(Counter.resetAlert)
        await store.send("confirm", fails: .badArguments)  // the note field is missing
        await store.send("confirm note=fresh", reply: ["alert": .string(id ?? ""), "answer": "confirm", "action": "Reset"])
        await store.receiveDismiss(id ?? "")  // answered: every connection takes it down
        await store.receive(Counter.self) {
            $0.count = 0
            $0.label = "fresh"
        }
        await store.send("cancel", fails: .noAlert)
        await store.finish()
    }

    @Test(arguments: TestStore.Mode.allCases) func latestWinsAndACancelledAlertIsDismissed(mode: TestStore.Mode) async throws {
        let services = services()
        let store = try await TestStore(apps: [Counter.self], services: services, mode: mode)
        await store.send("reset", reply: ["asked": true])
        let first = await store.receiveAlert(Counter.resetAlert)
        // A second reset replaces the first: its alert goes away unanswered.
        await store.send("reset", reply: ["asked": true])
        await store.receiveDismiss(first ?? "")
        await store.receiveAlert(Counter.resetAlert)

        await store.send("add 1", reply: ["accepted": true])
        await store.receive(Counter.self) { $0.busy = true }
        await store.send("add 2", reply: ["accepted": true])
        await store.receive(Counter.self)
        try await services.adder.waitFor(2)
        services.adder.release(2, total: 2)
        await store.receive(Counter.self) {
            $0.count = 2
            $0.busy = false
        }
        // The superseded call answers late: nothing of it may show.
        services.adder.release(1, total: 1)
        // A superseded call that fails late shows neither its state nor its alert.
        await store.send("add 3", reply: ["accepted": true])
        await store.receive(Counter.self) { $0.busy = true }
        await store.send("add 4", reply: ["accepted": true])
        await store.receive(Counter.self)
        try await services.adder.waitFor(2)
        services.adder.fail(3)
        services.adder.release(4, total: 6)
        await store.receive(Counter.self) {
            $0.count = 6
            $0.busy = false
        }
        await store.send("cancel", reply: ["alert": "a2", "answer": "cancel", "action": "Keep"])
        await store.receiveDismiss("a2")
        await store.finish()
    }

    @Test(arguments: TestStore.Mode.allCases) func anArmedFaultFailsTheBackendCallAndAlerts(mode: TestStore.Mode) async throws {
        let store = try await TestStore(apps: [Counter.self], services: services(), mode: mode)
        await store.send("fault adder 1 adder is down", reply: ["service": "adder", "count": 1])
        await store.send("add 3", reply: ["accepted": true])
        await store.receive(Counter.self) { $0.busy = true }
        await store.receive(Counter.self) { $0.busy = false }
        await store.receiveAlert(.error("adder is down"))
        await store.send("fault nothing", fails: .unknownService)
        await store.finish()
    }

    @Test func adminCommandsNeedAdmin() async {
        let store = TestStore(apps: [Counter.self], services: services(), admin: false)
        await store.send("fault adder", fails: .adminDisabled)
        await store.finish()
    }

    @Test(arguments: TestStore.Mode.allCases) func anUnassertedEventFailsAnExhaustiveTest(mode: TestStore.Mode) async throws {
        let store = try await TestStore(apps: [Counter.self], services: services(), mode: mode)
        await withKnownIssue {
            await store.send("increment", reply: ["count": 1])
            await store.finish()  // the display was never received
        }
    }

    @Test(arguments: TestStore.Mode.allCases) func aWrongStateFailsTheTest(mode: TestStore.Mode) async throws {
        let store = try await TestStore(apps: [Counter.self], services: services(), mode: mode)
        await store.send("increment", reply: ["count": 1])
        await withKnownIssue {
            await store.receive(Counter.self) { $0.count = 2 }
        }
        await store.finish()
    }

    @Test func oneSharedObservationServesEverySession() async throws {
        let starts = Atomic<Int>(0)
        let (stream, continuation) = AsyncThrowingStream.makeStream(of: Int.self)
        var services = services()
        services.total = SharedObservation {
            starts.add(1, ordering: .relaxed)
            return stream
        }
        let first = TestStore(apps: [Counter.self], services: services, id: "s1")
        let second = TestStore(apps: [Counter.self], services: services, id: "s2")
        await first.send("follow", reply: ["following": true])
        await second.send("follow", reply: ["following": true])
        continuation.yield(41)
        await first.receive(Counter.self) { $0.count = 41 }
        await second.receive(Counter.self) { $0.count = 41 }
        continuation.yield(42)
        await first.receive(Counter.self) { $0.count = 42 }
        await second.receive(Counter.self) { $0.count = 42 }
        #expect(starts.load(ordering: .relaxed) == 1)
        #expect(services.total.watcherCount == 2)
        await first.finish()
        await second.finish()
        for _ in 0..<1000 where services.total.watcherCount > 0 { try await Task.sleep(for: .milliseconds(1)) }
        #expect(services.total.watcherCount == 0)
    }

    @Test func aStateReadAfterAnyChangeShowsIt() async {
        let store = TestStore(apps: [Counter.self, Quiet.self], services: services())
        await store.send("state counter", reply: ["view": "counter", "state": ["count": 0, "label": "", "busy": false]])
        await store.send("state counter", reply: ["view": "counter", "state": ["count": 0, "label": "", "busy": false]])
        await store.send("increment", reply: ["count": 1])
        await store.receive(Counter.self) { $0.count = 1 }
        await store.send("state counter", reply: ["view": "counter", "state": ["count": 1, "label": "", "busy": false]])
        // A change shown to nobody (`display: false`), to this view or another one.
        await store.send("state quiet", reply: ["view": "quiet", "state": ["value": 0]])
        await store.send("quietly 5", reply: ["value": 5])
        await store.send("state quiet", reply: ["view": "quiet", "state": ["value": 5]])
        await store.send("state counter", reply: ["view": "counter", "state": ["count": 1, "label": "", "busy": false]])
        await store.send("quietly 6", reply: ["value": 6])
        await store.send("state", reply: ["views": ["counter": ["count": 1, "label": "", "busy": false], "quiet": ["value": 6]]])
        await store.send("state quiet", reply: ["view": "quiet", "state": ["value": 6]])
        await store.finish()
    }

    @Test func stateListsEveryViewInOrder() async {
        let store = TestStore(apps: [Counter.self], services: services())
        await store.send("state", reply: ["views": ["counter": ["count": 0, "label": "", "busy": false]]])
        await store.send("state nowhere", fails: .unknownView)
        await store.finish()
    }
}

/// A view-model whose one command changes its state without showing it.
enum Quiet: ViewModel {
    struct State: Codable, Sendable, Equatable {
        var value = 0
    }

    static let view = "quiet"
    static let stateSummary = "{value}"
    static func initialState(_ services: Services) -> State { State() }

    static let commands: [Command<Quiet>] = [
        Command("quietly", summary: "Set the value, shown to nobody.", arguments: [.optionalInteger("value", minimum: 0)]) { session, args in
            let value = args.int("value") ?? 0
            session.update(display: false) { $0.value = value }
            return ["value": .int(value)]
        }
    ]
}
