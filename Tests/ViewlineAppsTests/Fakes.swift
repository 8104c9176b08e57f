import Foundation
import Synchronization
import ViewlineApps
import ViewlineKit
import ViewlinePersistence

/// A places backend whose calls stay pending until the test answers them, so tests
/// decide the order in which searches finish. It ignores cancellation on purpose:
/// a late answer to a cancelled search must still never be displayed.
final class FakePlacesService: PlacesService {
    private struct Call { var query: String; var continuation: CheckedContinuation<[Place], any Error> }
    private let calls = Mutex<[Call]>([])
    private let received = Mutex<[String]>([])

    init() {}

    func search(_ query: String) async throws -> [Place] {
        try await withCheckedThrowingContinuation { continuation in
            received.withLock { $0.append(query) }
            calls.withLock { $0.append(Call(query: query, continuation: continuation)) }
        }
    }

    /// Queries received so far, in order.
    var queries: [String] { received.withLock { $0 } }

    /// Answers the pending call for `query`.
    func respond(to query: String, with result: Result<[Place], any Error>) {
        let call = calls.withLock { calls -> Call? in
            guard let index = calls.firstIndex(where: { $0.query == query }) else { return nil }
            return calls.remove(at: index)
        }
        precondition(call != nil, "no pending search for \(query)")
        call?.continuation.resume(with: result)
    }

    func waitForQueries(_ count: Int) async throws {
        for _ in 0..<2500 where queries.count < count { try await Task.sleep(for: .milliseconds(2)) }
    }

    static func place(_ name: String, cuisine: String = "thai") -> Place {
        Place(name: name, cuisine: cuisine, address: "1 Test St", lat: 1, lon: 2)
    }
}

/// A remote store in memory; `failures` makes the next saves fail with a message.
final class FakeRemoteStore: RemoteDraftStore {
    private let state = Mutex<(saved: [SavedDraft], failures: [String], calls: Int)>(([], [], 0))

    init() {}

    func failNext(_ messages: String...) { state.withLock { $0.failures += messages } }
    var saveCalls: Int { state.withLock { $0.calls } }

    func save(user: String, text: String) async throws -> SavedDraft {
        try state.withLock { state in
            state.calls += 1
            if !state.failures.isEmpty { throw ServiceError("save", state.failures.removeFirst()) }
            let draft = SavedDraft(
                id: Int64(state.saved.count + 1), user: user, text: text, savedAt: Date(timeIntervalSince1970: Double(state.saved.count)))
            state.saved.append(draft)
            return draft
        }
    }

    func saved(user: String) async throws -> [SavedDraft] {
        state.withLock { $0.saved.filter { $0.user == user }.reversed() }
    }
}

/// A remote contacts source whose data and failures the test sets.
final class FakeContactsSource: ContactsSource {
    private let state = Mutex<(contacts: [Contact], failure: String?, fetches: Int, gate: Bool)>(([], nil, 0, false))

    init(_ contacts: [Contact] = []) { state.withLock { $0.contacts = contacts } }

    var name: String { "fake" }
    func set(_ contacts: [Contact]) { state.withLock { $0.contacts = contacts } }
    func fail(with message: String?) { state.withLock { $0.failure = message } }
    var fetches: Int { state.withLock { $0.fetches } }
    /// While closed, fetches wait: lets a test ask for a second sync during the first.
    func hold(_ closed: Bool) { state.withLock { $0.gate = closed } }

    func fetch() async throws -> [Contact] {
        state.withLock { $0.fetches += 1 }
        while state.withLock({ $0.gate }) { try await Task.sleep(for: .milliseconds(1)) }
        return try state.withLock { state in
            if let failure = state.failure { throw ServiceError("sync", failure) }
            return state.contacts
        }
    }
}

/// A playlist backend with fixed lengths per user and scriptable failures.
final class FakePlaylistService: PlaylistService {
    private let state = Mutex<(failures: Int, offsets: [Int])>((0, []))
    let lengths: [String: Int]

    init(lengths: [String: Int] = ["alice": 32, "bob": 7]) { self.lengths = lengths }

    func failNext(_ count: Int = 1) { state.withLock { $0.failures += count } }
    var requestedOffsets: [Int] { state.withLock { $0.offsets } }

    func page(user: String, offset: Int, limit: Int) async throws -> PlaylistPage {
        try state.withLock { state in
            state.offsets.append(offset)
            if state.failures > 0 {
                state.failures -= 1
                throw ServiceError("playlist", "playlist server unavailable")
            }
        }
        let total = lengths[user] ?? 0
        let end = min(offset + limit, total)
        let items = (offset..<max(offset, end)).map { PlaylistItem(position: $0 + 1, title: "Song \($0 + 1)", artist: "Artist") }
        return PlaylistPage(items: items, total: total)
    }
}
