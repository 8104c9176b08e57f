import Testing

@testable import ViewlineKit

/// A view-model's string declarations checked against its `State`: `stateSummary`
/// must name every field the state encodes, and each busy field must be a boolean
/// of it.
@Suite struct DeclarationTests {
    enum Typo: ViewModel {
        struct State: Codable, Sendable, Equatable {
            var query = ""
            var loading = false
            var results: [String] = []
        }
        static let view = "typo"
        static let stateSummary = "{query, loadng, results:[…]}"
        static let busyFields = ["loadng", "query"]
        static func initialState(_ services: Services) -> State { State() }
        static let commands: [Command<Typo>] = []
    }

    @Test func aSummaryOrBusyFieldThatMissesTheStateIsAnIssue() {
        let issues = Application([Typo.self]).declarationIssues
        #expect(issues.count == 3, "\(issues)")
        #expect(issues.contains { $0.contains("encodes \"loading\"") })
        #expect(issues.contains { $0.contains("busy field \"loadng\"") })
        #expect(issues.contains { $0.contains("busy field \"query\"") })
    }

    @Test func declarationsThatAgreeHaveNone() {
        #expect(Application([Counter.self]).declarationIssues.isEmpty)
    }

    @Test func theSummarysTopLevelNames() {
        #expect(ViewDescription.topLevelNames(of: "{items:[{name, phone, address}], syncing}") == ["items", "syncing"])
        #expect(ViewDescription.topLevelNames(of: "{query, loading, results:[{name, lat, lon}]}") == ["query", "loading", "results"])
        #expect(ViewDescription.topLevelNames(of: "{user?, count}") == ["user", "count"])
        #expect(ViewDescription.topLevelNames(of: "{}") == [])
    }
}
