import Foundation
import ViewlineKit
import ViewlinePersistence

/// The built-in remote store: keeps saved drafts in its own table, after a latency.
public struct RemoteDraftStoreLive: RemoteDraftStore {
    let store: any AppStore
    let latency: Duration
    let clock: any WallClock

    public init(store: any AppStore, latency: Duration, clock: any WallClock) {
        self.store = store
        self.latency = latency
        self.clock = clock
    }

    public func save(user: String, text: String) async throws -> SavedDraft {
        if latency > .zero { try await Task.sleep(for: latency) }
        return try await store.insertSavedDraft(user: user, text: text, at: clock.now())
    }

    public func saved(user: String) async throws -> [SavedDraft] {
        if latency > .zero { try await Task.sleep(for: latency) }
        return try await store.savedDrafts(user: user)
    }
}
