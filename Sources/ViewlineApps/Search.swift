import Synchronization
import ViewlineKit

/// Search (seeds 002 and 004): loading first, then results or an error alert;
/// loading never sticks; the latest query wins.
public enum Search: ViewModel {
    public struct State: Codable, Sendable, Equatable {
        public var query = ""
        public var loading = false
        public var results: [Place] = []

        public init(query: String = "", loading: Bool = false, results: [Place] = []) {
            self.query = query
            self.loading = loading
            self.results = results
        }
    }

    public static let view = "search"
    public static let stateSummary = "{query, loading, results:[{name, cuisine, address, lat, lon, rating, price}]}"
    public static let busyFields = ["loading"]
    public static func initialState(_ services: Services) -> State { State() }
    public static let backends: [any BackendKey.Type] = [PlacesKey.self]

    /// `search`'s argument.
    static let query = ArgumentKey.text("query").described("what to look for: a cuisine, a dish or a place")

    public static let commands: [Command<Search>] = [
        Command(
            "search", summary: "Search places by name, cuisine, dish or neighbourhood; the latest search wins.",
            arguments: [query.argument], example: "search thai food", live: true,
            primary: true
        ) { session, args in
            let query = args[Search.query]
            guard query.utf8.count <= maximumQueryBytes else {
                throw ProtocolError(.badArguments, "a query is at most \(maximumQueryBytes) bytes (got \(query.utf8.count))")
            }
            session.update {
                $0.query = query
                $0.loading = true
            }
            session.run(.search) { session in await perform(query, in: session) }
            return ["accepted": true, "query": .string(query)]
        }
    ]

    /// The longest query `search` takes: longer than any real search, short enough
    /// that ranking it costs well under a millisecond (PROTOCOL §8).
    public static let maximumQueryBytes = 256

    /// Restored on another node: a search that was loading runs again (its answer was lost with the node).
    public static func restored(in session: isolated ViewSession<Search>) async {
        let state = session.state
        guard state.loading else { return }
        session.run(.search) { session in await perform(state.query, in: session) }
    }

    private static func perform(_ query: String, in session: isolated ViewSession<Search>) async {
        do {
            let results = try await session.call(PlacesKey.self, with: query) { places in try await places.search(query) }
            // A newer search replaced this one: the runtime drops its results.
            session.update {
                $0.results = results
                $0.loading = false
            }
        } catch {
            session.update { $0.loading = false }
            session.showAlert(.error(ServiceError.describe(error)))
        }
    }
}

extension TaskSlot {
    static let search = TaskSlot("search")
}

extension Search {
    /// How a search is recorded for a restart or a failover: release 1 of the seed
    /// apps records its wire form (version 1); release 2
    /// (``SeedApps/release``) records `{terms, loading, results}` (version 2: `query`
    /// renamed), with the migration from version 1 — two releases of one app, for
    /// rehearsing a rolling deploy.
    public static var record: StateRecord<State>? {
        SeedApps.release.load(ordering: .relaxed) >= 2 ? recordV2 : .codable()
    }

    /// Release 2's record of a search: the query is kept as `terms`.
    struct RecordedV2: Codable {
        var terms: String
        var loading: Bool
        var results: [Place]
    }

    static let recordV2 = StateRecord<State>.codable(
        as: RecordedV2.self, version: 2,
        record: { RecordedV2(terms: $0.query, loading: $0.loading, results: $0.results) },
        restore: { State(query: $0.terms, loading: $0.loading, results: $0.results) }
    )
    .migrating(from: 1) { state in
        // 1 → 2: `query` became `terms`.
        state["terms"] = state["query"] ?? ""
        state["query"] = nil
    }
}
