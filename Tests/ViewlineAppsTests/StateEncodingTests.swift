import Testing
import ViewlineApps
import ViewlineKit

/// The demo apps' states are written straight to bytes (`JSON.bytes(encoding:)`), as
/// the text of their trees: what clients get did not change.
@Suite struct StateEncodingTests {
    static func tree(_ value: some Encodable) throws -> [UInt8] {
        var out: [UInt8] = []
        try JSON(encoding: value).write(into: &out)
        return out
    }

    @Test func aSearchsStatesAreWrittenAsTheirTrees() throws {
        for query in ["pizza", "thai food", "café", "zzzz"] {
            let results = PlaceCatalog.standard.search(query)
            for state in [Search.State(query: query, loading: true), Search.State(query: query, loading: false, results: results)] {
                #expect(try JSON.bytes(encoding: state) == Self.tree(state))
            }
        }
    }

    @Test func theOtherAppsStatesAreWrittenAsTheirTrees() throws {
        let draft = Drafts.State(text: "a \"draft\"\n", pending: true)
        #expect(try JSON.bytes(encoding: draft) == Self.tree(draft))
        #expect(try JSON.bytes(encoding: Account.State(user: "alice")) == Self.tree(Account.State(user: "alice")))
        #expect(try JSON.bytes(encoding: Contacts.State()) == Self.tree(Contacts.State()))
    }
}
