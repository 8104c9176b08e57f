import ViewlineProtocol

/// The search flow (seeds 002 and 004): loading first, then results or an error
/// alert; loading never sticks; the latest query wins.
extension Session {
    func startSearch(_ query: String) {
        searchView.query = query
        searchView.loading = true
        display(.search)
        run(.search) { session in await session.performSearch(query) }
    }

    private func performSearch(_ query: String) async {
        let places = environment.places
        do {
            let results = try await call(.search) { try await places.search(query) }
            // A newer search cancelled this one: its results must never show.
            guard !Task.isCancelled else { return }
            searchView.results = results
            searchView.loading = false
            display(.search)
        } catch {
            guard !Task.isCancelled, !(error is CancellationError) else { return }
            searchView.loading = false
            display(.search)
            showAlert(.error(Session.describe(error)))
        }
    }

    /// The text a person sees for a failure.
    static func describe(_ error: any Error) -> String {
        if let error = error as? ServiceError { return error.message }
        if let error = error as? ProtocolError { return error.message }
        return String(describing: error)
    }
}
