extension Duration {
    /// The duration in seconds, as PostgreSQL's `make_interval(secs => …)` and the
    /// server-side limits take it.
    var inSeconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}
