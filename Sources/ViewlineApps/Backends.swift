import Foundation
import ViewlinePersistence

/// The remote store behind `save` and `saved`.
public protocol RemoteDraftStore: Sendable {
    func save(user: String, text: String) async throws -> SavedDraft
    func saved(user: String) async throws -> [SavedDraft]
}

/// The remote contacts source a sync reads from.
public protocol ContactsSource: Sendable {
    /// A name for the source, under which the last applied document is remembered.
    var name: String { get }
    func fetch() async throws -> [Contact]
}

/// One item of a playlist.
public struct PlaylistItem: Sendable, Equatable, Codable {
    public var position: Int
    public var title: String
    public var artist: String

    public init(position: Int, title: String, artist: String) {
        self.position = position
        self.title = title
        self.artist = artist
    }
}

/// One page of a user's playlist.
public struct PlaylistPage: Sendable, Equatable, Codable {
    public var items: [PlaylistItem]
    /// How many items the whole playlist has.
    public var total: Int

    public init(items: [PlaylistItem], total: Int) {
        self.items = items
        self.total = total
    }
}

/// The playlist backend behind `playlist` and `more`.
public protocol PlaylistService: Sendable {
    func page(user: String, offset: Int, limit: Int) async throws -> PlaylistPage
}
