import CoreMetrics
import Foundation
import ViewlineKit
import ViewlinePersistence

/// Runs contact syncs one at a time: a sync asked for while one is running joins it
/// instead of starting a second fetch (a "fetch limiter"). In process the join is a
/// shared task; across nodes on one PostgreSQL it is the store's ``AppStore/singleFlight(_:_:)``
/// (an advisory lock), so concurrent syncs on every node make one fetch.
public actor ContactsSyncCoordinator {
    private let source: any ContactsSource
    private let store: any AppStore
    private let faults: FaultInjector
    private let clock: any WallClock
    private var running: Task<Bool, any Error>?
    public private(set) var fetchCount = 0

    public init(source: any ContactsSource, store: any AppStore, faults: FaultInjector, clock: any WallClock) {
        self.source = source
        self.store = store
        self.faults = faults
        self.clock = clock
    }

    /// Syncs, or joins the sync in progress. Returns whether the database changed.
    /// A failed sync changes no row.
    public func sync() async throws -> Bool {
        Self.syncs.increment()
        if let running { return try await running.value }
        let task = Task { try await self.fetchAndApply() }
        running = task
        defer { running = nil }
        return try await task.value
    }

    // swift-metrics, as the process bootstrapped it: syncs asked for, and the fetches
    // they made (single flight: many syncs, few fetches).
    private static let syncs = CoreMetrics.Counter(label: "viewline_contacts_syncs_total")
    private static let fetches = CoreMetrics.Counter(label: "viewline_contacts_fetches_total")

    private func fetchAndApply() async throws -> Bool {
        let joined = try await store.singleFlight("contacts-sync") { try await self.fetchOnce() }
        return joined ?? true
    }

    private func fetchOnce() async throws -> Bool {
        fetchCount += 1
        Self.fetches.increment()
        try faults.check("sync")
        let contacts = try await source.fetch()
        let document = JSON.array(contacts.map(\.json)).encoded
        return try await store.applyContacts(contacts, document: document, source: source.name, at: clock.now())
    }
}

extension Contact {
    public var json: JSON { ["name": .string(name), "phone": .string(phone), "address": .string(address)] }
}
