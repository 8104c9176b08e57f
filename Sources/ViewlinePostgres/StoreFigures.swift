import CoreMetrics

/// The PostgreSQL store's figures, through swift-metrics (whatever the process
/// bootstrapped; nothing without a bootstrap): calls by outcome, their latency, and
/// the contacts listener's reconnects. Made at first use, after the bootstrap.
package final class StoreFigures: Sendable {
    package static let shared = StoreFigures()

    enum Outcome: String, CaseIterable { case ok, unavailable, failed }

    private let calls: [Outcome: Counter]
    private let latency: Timer
    package let listenReconnects: Counter

    private init() {
        calls = Dictionary(
            uniqueKeysWithValues: Outcome.allCases.map {
                ($0, Counter(label: "viewline_store_calls_total", dimensions: [("store", "postgresql"), ("outcome", $0.rawValue)]))
            })
        latency = Timer(label: "viewline_store_call_duration_seconds", dimensions: [("store", "postgresql")])
        listenReconnects = Counter(label: "viewline_listen_reconnects_total")
    }

    func record(_ outcome: Outcome, since started: ContinuousClock.Instant) {
        calls[outcome]?.increment()
        latency.recordInterval(since: started)
    }
}

extension Timer {
    /// Records the time from `start` to now.
    func recordInterval(since start: ContinuousClock.Instant) {
        let (seconds, attoseconds) = (ContinuousClock.now - start).components
        recordNanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }
}
