/// The contacts table at one moment, with the table's version: a counter that
/// triggers bump on every change, whoever makes it. Readers that combine direct
/// reads with a database observation use it to tell a newer state from an older
/// one delivered late.
public struct ContactsSnapshot: Sendable, Equatable {
    public var version: Int
    public var items: [Contact]

    public init(version: Int, items: [Contact]) {
        self.version = version
        self.items = items
    }
}
