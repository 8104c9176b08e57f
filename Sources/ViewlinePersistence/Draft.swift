import Foundation
import GRDB

/// A user's unsaved draft, kept locally until it is saved or discarded.
public struct Draft: Codable, Sendable, Equatable, FetchableRecord, PersistableRecord {
    public var user: String
    public var text: String
    public var updatedAt: Date

    public init(user: String, text: String, updatedAt: Date) {
        self.user = user
        self.text = text
        self.updatedAt = updatedAt
    }

    public static let databaseTableName = "draft"

    public enum Columns {
        public static let user = Column(CodingKeys.user)
        public static let text = Column(CodingKeys.text)
    }
}

/// A draft that reached the (built-in) remote store.
public struct SavedDraft: Codable, Sendable, Equatable, FetchableRecord, MutablePersistableRecord {
    public var id: Int64?
    public var user: String
    public var text: String
    public var savedAt: Date

    public init(id: Int64? = nil, user: String, text: String, savedAt: Date) {
        self.id = id
        self.user = user
        self.text = text
        self.savedAt = savedAt
    }

    public static let databaseTableName = "remoteSavedDraft"

    /// Saved drafts kept per user: saving one more drops the oldest (PROTOCOL §8).
    public static let maximumPerUser = 100
    /// The longest draft text, in bytes.
    public static let maximumTextBytes = 4096

    public enum Columns {
        public static let id = Column(CodingKeys.id)
        public static let user = Column(CodingKeys.user)
        public static let savedAt = Column(CodingKeys.savedAt)
    }

    public mutating func didInsert(_ inserted: InsertionSuccess) { id = inserted.rowID }
}
