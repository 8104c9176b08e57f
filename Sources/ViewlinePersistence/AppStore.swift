import Foundation

/// Where the seed apps keep what must survive a restart: users, drafts, saved drafts
/// and contacts. One protocol, two engines: ``SQLiteStore`` (embedded, one node) and
/// `PostgresStore` (several nodes over one database). App code sees only this, so the
/// same view-models run on both, and one test suite checks both.
///
/// Every write is durable when its method returns. In a cluster, a store over the
/// nodes' shared database writes for a session only while the node holds that
/// session's lease by the database's clock (ViewlineKit's `SessionFence`, checked in
/// the write's own transaction); the embedded store serves one node and has no lease.
public protocol AppStore: Sendable {
    // MARK: Users

    /// Stores a user's salted hash (never the password), replacing an older one.
    func storeUser(_ name: String, passwordHash: String) async throws
    /// Every user's hash by name.
    func passwordHashes() async throws -> [String: String]

    // MARK: Drafts

    /// Writes the user's pending draft.
    func setDraft(user: String, text: String, at date: Date) async throws
    /// The user's pending draft, if any.
    func pendingDraft(user: String) async throws -> Draft?
    /// Deletes the user's draft; with `text`, only if it still holds that text, so a
    /// draft edited during a save is not lost when the older text's save succeeds.
    /// Returns whether a draft was deleted.
    @discardableResult
    func deleteDraft(user: String, ifText text: String?) async throws -> Bool
    /// The built-in remote store's side: appends a saved draft.
    func insertSavedDraft(user: String, text: String, at date: Date) async throws -> SavedDraft
    /// The user's saved drafts, newest first.
    func savedDrafts(user: String) async throws -> [SavedDraft]

    // MARK: Contacts

    /// The contacts (by name) and the table's version, read in one transaction.
    func contactsSnapshot() async throws -> ContactsSnapshot
    /// Every new state of the contacts table, whoever wrote it, starting with the
    /// current one. One stream per server is enough: share it (`SharedObservation`).
    func observeContacts() -> AsyncThrowingStream<ContactsSnapshot, any Error>
    /// Replaces all contacts in one transaction, unless `document` (the remote data
    /// in canonical form) is what was last applied from `source`. Returns whether
    /// anything was written.
    @discardableResult
    func applyContacts(_ contacts: [Contact], document: String, source: String, at date: Date) async throws -> Bool
    /// Changes one contact's phone: a local edit, as another writer makes it.
    func updatePhone(name: String, phone: String) async throws

    // MARK: Coordination

    /// Runs `body` as the only run of `job` among every server on this store.
    ///
    /// A caller that had to wait while another run of `job` completed successfully
    /// joins that run instead: `body` is not called and the result is `nil`. So
    /// concurrent callers on any number of nodes make one run.
    func singleFlight(_ job: String, _ body: @escaping @Sendable () async throws -> Bool) async throws -> Bool?
}

extension AppStore {
    /// Deletes the user's draft, whatever it holds.
    @discardableResult
    public func deleteDraft(user: String) async throws -> Bool {
        try await deleteDraft(user: user, ifText: nil)
    }

    /// The contacts, by name.
    public func contacts() async throws -> [Contact] {
        try await contactsSnapshot().items
    }
}
