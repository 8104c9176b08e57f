import ViewlinePersistence
import ViewlineProtocol

/// Contacts (seed 001): the view shows only what the local database holds and is
/// displayed again whenever the table changes, whoever changed it; syncs only
/// write the database and only ever report errors.
extension Session {
    func openContacts() async throws {
        if !contactsOpen {
            // Start from what the database holds right now.
            _ = contactsView.apply(try await environment.database.contactsSnapshot())
            contactsOpen = true
            let changes = environment.database.observeContacts()
            contactsObservation = Task { [weak self] in
                do {
                    for try await snapshot in changes {
                        guard let self else { return }
                        await self.contactsChanged(snapshot)
                    }
                } catch {
                    // The observation ends only when the session closes or the database fails.
                }
            }
        }
        startSync()
    }

    func startSync() {
        guard tasks[.sync] == nil else { return }  // this session already waits on a sync
        run(.sync) { session in await session.performSync() }
    }

    private func performSync() async {
        let coordinator = environment.contactsSync
        if contactsOpen {
            contactsView.syncing = true
            display(.contacts)
        }
        var failure: (any Error)?
        do {
            _ = try await coordinator.sync()
        } catch {
            failure = error
        }
        if contactsOpen {
            // One display when the sync ends, read from the database: changes the
            // observation delivered meanwhile are in it (and were not shown one by one,
            // so every client sees the same sequence). Observation values older than
            // this read are ignored when they arrive.
            if let snapshot = try? await environment.database.contactsSnapshot() { _ = contactsView.apply(snapshot) }
            contactsView.syncing = false
            display(.contacts)
        }
        if let failure, !(failure is CancellationError) {
            showAlert(.error("Sync failed: \(Session.describe(failure))"))
        }
    }

    /// A new state of the table from the database observation.
    func contactsChanged(_ snapshot: ContactsSnapshot) {
        guard contactsOpen, contactsView.apply(snapshot) else { return }
        // While a sync runs, its end shows the result in one display.
        if !contactsView.syncing { display(.contacts) }
    }
}
