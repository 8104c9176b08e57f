import ViewlineKit

/// The built-in places backend: the shipped catalog behind an artificial latency.
/// Ranking is CPU work: it runs on its own bounded pool, never on the threads that
/// run sessions and `attach` (a flood of searches gets "busy" errors, and every
/// other command keeps its speed). The pool is fair between client addresses (each
/// call is keyed by its session's address through `session.call`): one address holds
/// at most 32 of its places, and another address's search always gets one.
public struct PlacesServiceLive: PlacesService {
    let catalog: PlaceCatalog
    let latency: Duration
    let pool: BlockingPool

    public init(
        catalog: PlaceCatalog = .standard, latency: Duration,
        pool: BlockingPool = BlockingPool(threads: 1, queueLimit: 256, perKeyLimit: 32, name: "search")
    ) {
        self.catalog = catalog
        self.latency = latency
        self.pool = pool
    }

    public func search(_ query: String) async throws -> [Place] {
        if latency > .zero { try await Task.sleep(for: latency) }
        let catalog = catalog
        return try await pool.run { catalog.search(query) }
    }
}
