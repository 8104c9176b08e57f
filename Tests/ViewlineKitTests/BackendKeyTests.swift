import Logging
import Synchronization
import Testing
import ViewlineKit
import ViewlineTesting

/// A backend is one typed key: the value a view-model calls, the name `fault`
/// breaks and `help` lists. A backend nobody provided is found at start, not at the
/// first call, and a call to one never stops the process.
@Suite struct BackendKeyTests {
    @Test func callHandsTheClosureTheBackendsService() async {
        var services = Services()
        services.adder = FakeAdder()
        let store = TestStore(apps: [Counter.self], services: services)
        await store.send("add 5", reply: ["accepted": true])
        await store.receive(Counter.self) { $0.busy = true }
        try? await services.adder.waitFor(1)
        #expect(services.adder.waiting == [5])
        services.adder.release(5, total: 5)
        await store.receive(Counter.self) {
            $0.count = 5
            $0.busy = false
        }
        await store.finish()
    }

    @Test func anApplicationListsTheDeclaredBackendsItsServicesLack() {
        let application = Application([Counter.self], services: Services())
        #expect(application.missingBackends == [Backend("adder", summary: "the slow adder behind `add`")])
        #expect(application.backends.map(\.name) == ["adder"])

        var services = Services()
        services.adder = FakeAdder()
        #expect(Application([Counter.self], services: services).missingBackends.isEmpty)
    }

    @Test func aServerRefusesToStartWithoutADeclaredBackendAndNamesIt() throws {
        var configuration = ServerConfiguration()
        configuration.port = 0
        #expect {
            _ = try ViewlineServer(apps: [Counter.self], services: Services(), configuration: configuration)
        } throws: { error in
            "\(error)".contains("\"adder\"") && "\(error)".contains("the slow adder")
        }
    }

    @Test func aTestStoreWithoutADeclaredBackendRecordsATestIssue() {
        withKnownIssue {
            _ = TestStore(apps: [Counter.self], services: Services())
        } matching: { issue in
            "\(issue)".contains("adder")
        }
    }

    @Test func aCallToAMissingBackendFailsTheCommandNotTheProcess() async throws {
        // A session built past the checks (as a custom transport could): the call
        // throws and the work's own error path runs: its alert says what is missing.
        let application = Application([Counter.self], services: Services())
        let sent = Mutex<[ServerMessage]>([])
        let session = Session(id: "s1", application: application) { message in sent.withLock { $0.append(message) } }
        await session.send("add 2")
        await session.send("wait")
        let alerts = sent.withLock { $0 }.compactMap { message -> AlertContent? in
            if case .alert(_, _, let content) = message { return content } else { return nil }
        }
        #expect(alerts.count == 1)
        #expect(alerts.first?.message.contains("adder") == true, "\(alerts)")
        #expect(await session.state(Counter.self).busy == false)
    }
}
