import Synchronization
import Testing
import ViewlineKit
import ViewlineProtocol

@testable import ViewlineTesting

/// A TestStore failure says what differs, key path by key path (expected −,
/// received +), for displays, alerts and replies: never two one-line blobs to compare
/// by eye.
@Suite struct TestStoreDiffTests {
    enum Places: ViewModel {
        struct Place: Codable, Sendable, Equatable {
            var name: String
            var stars: Int
        }

        struct State: Codable, Sendable, Equatable {
            var query = ""
            var results: [Place] = []
        }

        static let view = "places"
        static let stateSummary = "{query, results}"
        static func initialState(_ services: Services) -> State { State() }

        static let commands: [Command<Places>] = [
            Command("find", summary: "Find places.", arguments: [.word("query")]) { session, args in
                session.update {
                    $0.query = args.string("query")
                    $0.results = [Place(name: "Thai Place", stars: 4), Place(name: "Noodle Bar", stars: 5)]
                }
                return ["found": 2]
            },
            Command("warn", summary: "Show an alert.") { session, _ in
                session.showAlert(AlertContent(title: "Careful", message: "Hot sauce", actions: [.confirm("OK")]))
                return nil
            },
        ]
    }

    /// The issues `body` records, as their text.
    func issues(_ body: () async -> Void) async -> [String] {
        let recorded = Mutex<[String]>([])
        await withKnownIssue(isIntermittent: true) {
            await body()
        } matching: { issue in
            recorded.withLock { $0.append(issue.comments.map(\.rawValue).joined(separator: "\n")) }
            return true
        }
        return recorded.withLock { $0 }
    }

    @Test func aDisplayThatDiffersPrintsOnlyTheChangedPaths() async throws {
        let store = TestStore(apps: [Places.self], services: Services())
        let found = await issues {
            await store.send("find thai", reply: ["found": 2])
            await store.receive(Places.self) {
                $0.query = "thai"
                $0.results = [Places.Place(name: "Thai Palace", stars: 4), Places.Place(name: "Noodle Bar", stars: 5)]
            }
        }
        #expect(
            found == [
                """
                places state differs (− expected, + received):
                  − results[0].name: "Thai Palace"
                  + results[0].name: "Thai Place"
                """
            ])
        await store.finish()
    }

    @Test func aReplyAndAnAlertThatDifferPrintTheirPaths() async throws {
        let store = TestStore(apps: [Places.self], services: Services())
        let found = await issues {
            await store.send("find thai", reply: ["found": 3, "more": true])
            store.skipReceived()
            await store.send("warn")
            await store.receiveAlert(AlertContent(title: "Careful", message: "Mild sauce", actions: [.confirm("OK")]))
        }
        #expect(
            found == [
                """
                the reply to "find thai" differs (− expected, + received):
                  − found: 3
                  + found: 2
                  − more: true
                  + more: (absent)
                """,
                """
                alert a1 differs (− expected, + received):
                  − message: "Mild sauce"
                  + message: "Hot sauce"
                """,
            ])
        await store.finish()
    }

    @Test func longStringsAreCutToWhereTheyDiffer() {
        let prefix = String(repeating: "a", count: 100)
        let report = JSONDifference.report("x", expected: ["text": .string(prefix + "bcd")], actual: ["text": .string(prefix + "bXd")])
        // From 20 characters before the first difference ("c" against "X").
        let before = String(repeating: "a", count: 19) + "b"
        #expect(
            report == """
                x differs (− expected, + received):
                  − text: "…\(before)cd"
                  + text: "…\(before)Xd"
                """)
        #expect(JSONDifference.changes(expected: [1, 2], actual: [1, 2, 3]) == [.init(path: "[2]", expected: nil, actual: 3)])
    }
}
