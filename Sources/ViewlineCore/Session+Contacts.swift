import ViewlinePersistence
import ViewlineProtocol

/// Contacts (seed 001): the view shows only what the local database holds and is
/// displayed again whenever the table changes, whoever changed it; syncs only
/// write the database and only ever report errors.
extension Session {
    func openContacts() {
        if !contactsOpen {
            contactsOpen = true
            let changes = environment.database.observeContacts()
            contactsObservation = Task { [weak self] in
                do {
                    for try await items in changes {
                        guard let self else { return }
                        await self.contactsChanged(items)
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
        do {
            _ = try await coordinator.sync()
            // Show the database's state before this work counts as done, so `wait`
            // returns after the display; the observation would deliver it a moment later.
            if contactsOpen, let items = try? await environment.database.contacts() {
                contactsChanged(items, force: true)
            }
        } catch {
            if contactsOpen {
                contactsView.syncing = false
                display(.contacts)
            }
            if !(error is CancellationError) {
                showAlert(.error("Sync failed: \(Session.describe(error))"))
            }
        }
    }

    /// New rows from the database (observation or a read after sync).
    func contactsChanged(_ items: [Contact], force: Bool = false) {
        guard contactsOpen else { return }
        let syncing = force ? false : contactsView.syncing
        let next = ContactsViewState(items: items, syncing: syncing)
        guard next != contactsView || rev == 0 || force && contactsView.syncing else { return }
        contactsView = next
        display(.contacts)
    }
}
