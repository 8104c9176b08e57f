import GRDB

/// A contact as the local database holds it. The contacts view shows nothing else.
public struct Contact: Codable, Sendable, Equatable, FetchableRecord, PersistableRecord {
    public var name: String
    public var phone: String
    public var address: String

    public init(name: String, phone: String, address: String) {
        self.name = name
        self.phone = phone
        self.address = address
    }

    public static let databaseTableName = "contact"

    public enum Columns {
        public static let name = Column(CodingKeys.name)
    }
}
