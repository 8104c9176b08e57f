import ViewlinePersistence
import ViewlineProtocol

/// The views a session shows; each `display` event carries one view's whole state.
public enum ViewName: String, Sendable, CaseIterable {
    case search, session, draft, contacts, playlist
}

public struct SearchViewState: Sendable, Equatable {
    public var query = ""
    public var loading = false
    public var results: [Place] = []

    public var json: JSON {
        ["query": .string(query), "loading": .bool(loading), "results": .array(results.map(\.json))]
    }
}

public struct SessionViewState: Sendable, Equatable {
    public var user: String?
    public var loggedIn: Bool { user != nil }

    public var json: JSON { ["user": user.map(JSON.string) ?? .null, "loggedIn": .bool(loggedIn)] }
}

public struct DraftViewState: Sendable, Equatable {
    public var text = ""
    public var pending = false
    public var saving = false

    public var json: JSON { ["text": .string(text), "pending": .bool(pending), "saving": .bool(saving)] }
}

public struct ContactsViewState: Sendable, Equatable {
    public var items: [Contact] = []
    public var syncing = false
    /// The version of the database state `items` came from (not on the wire).
    public var version = -1

    public init() {}

    /// Takes a database snapshot unless it is older than the one shown (a late
    /// observation value). Returns whether the items changed.
    public mutating func apply(_ snapshot: ContactsSnapshot) -> Bool {
        guard snapshot.version > version else { return false }
        version = snapshot.version
        guard snapshot.items != items else { return false }
        items = snapshot.items
        return true
    }

    public var json: JSON { ["items": .array(items.map(\.json)), "syncing": .bool(syncing)] }
}

public struct PlaylistViewState: Sendable, Equatable {
    public var items: [PlaylistItem] = []
    public var hasMore = false
    public var loading = false
    public var step: PlaylistStep = .idle

    public var json: JSON {
        [
            "items": .array(items.map { ["position": .int($0.position), "title": .string($0.title), "artist": .string($0.artist)] }),
            "hasMore": .bool(hasMore), "loading": .bool(loading), "step": .string(step.rawValue),
        ]
    }
}
