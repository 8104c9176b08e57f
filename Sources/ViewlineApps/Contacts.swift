import ViewlineKit
import ViewlinePersistence

/// Contacts (seed 001): the view shows only what the local database holds and is
/// displayed again whenever the table changes, whoever changed it; syncs only write
/// the database and only ever report errors. One database observation serves every
/// session that shows the view.
public enum Contacts: ViewModel {
    /// Shown as `{items, syncing}`.
    public struct State: Codable, Sendable, Equatable {
        public var items: [Contact] = []
        public var syncing = false
        /// Whether the view was opened (and follows the database).
        public var open = false
        /// The version of the database state `items` came from.
        public var version = -1

        public init() {}

        enum CodingKeys: String, CodingKey { case items, syncing }

        /// Takes a database snapshot unless it is older than the one shown (a late
        /// observation value). Returns whether the items changed.
        public mutating func apply(_ snapshot: ContactsSnapshot) -> Bool {
            guard snapshot.version > version else { return false }
            version = snapshot.version
            guard snapshot.items != items else { return false }
            items = snapshot.items
            return true
        }
    }

    public static let view = "contacts"
    public static let stateSummary = "{items:[{name, phone, address}], syncing}"
    public static let busyFields = ["syncing"]
    public static func initialState(_ services: Services) -> State { State() }
    public static let backends: [any BackendKey.Type] = [ContactsSyncKey.self]

    public static let commands: [Command<Contacts>] = [
        Command("contacts", summary: "Open the contacts view (local database) and start a background sync.", primary: true) { session, _ in
            if !session.state.open {
                // Start from what the database holds right now.
                let snapshot = try await session.services.store.contactsSnapshot()
                session.update(display: false) {
                    _ = $0.apply(snapshot)
                    $0.open = true
                }
                session.observe(session.services.contactsObservation) { session, snapshot in
                    changed(snapshot, in: session)
                }
            }
            startSync(in: session)
            return ["accepted": true]
        },
        Command("sync", summary: "Sync contacts from the remote source (one sync at a time, server-wide).") { session, _ in
            startSync(in: session)
            return ["accepted": true]
        },
    ]

    /// Restored on another node: a view that was opened follows the store again, an
    /// empty one included (its items come back; a sync that was running there is not
    /// resumed).
    public static func restored(in session: isolated ViewSession<Contacts>) async {
        session.update(display: false) { $0.syncing = false }
        guard session.hasDisplayed else { return }
        session.update(display: false) { $0.open = true }
        session.observe(session.services.contactsObservation) { session, snapshot in
            changed(snapshot, in: session)
        }
    }

    private static func startSync(in session: isolated ViewSession<Contacts>) {
        guard !session.isRunning(.sync) else { return }  // this session already waits on a sync
        session.run(.sync) { session in await sync(in: session) }
    }

    private static func sync(in session: isolated ViewSession<Contacts>) async {
        if session.state.open { session.update { $0.syncing = true } }
        var failure: (any Error)?
        do {
            _ = try await session.services.contactsSync.sync()
        } catch {
            failure = error
        }
        if session.state.open {
            // One display when the sync ends, read from the database: changes the
            // observation delivered meanwhile are in it (and were not shown one by one,
            // so every client sees the same sequence). Observation values older than
            // this read are ignored when they arrive.
            let snapshot = try? await session.services.store.contactsSnapshot()
            session.update {
                if let snapshot { _ = $0.apply(snapshot) }
                $0.syncing = false
            }
        }
        if let failure, !(failure is CancellationError) {
            session.showAlert(.error("Sync failed: \(ServiceError.describe(failure))"))
        }
    }

    /// A new state of the table from the shared observation.
    private static func changed(_ snapshot: ContactsSnapshot, in session: isolated ViewSession<Contacts>) {
        let state = session.state
        guard state.open else { return }
        // While a sync runs, its end shows the result in one display.
        let changed = session.update(display: false) { $0.apply(snapshot) }
        if changed && !state.syncing { session.display() }
    }
}

extension TaskSlot {
    static let sync = TaskSlot("sync")
}
