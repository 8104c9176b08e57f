import ViewlineKit

/// The built-in places backend: the shipped catalog behind an artificial latency.
public struct PlacesServiceLive: PlacesService {
    let catalog: PlaceCatalog
    let latency: Duration

    public init(catalog: PlaceCatalog = .standard, latency: Duration) {
        self.catalog = catalog
        self.latency = latency
    }

    public func search(_ query: String) async throws -> [Place] {
        if latency > .zero { try await Task.sleep(for: latency) }
        return catalog.search(query)
    }
}
