import Logging
import PostgresNIO
import ViewlinePersistence
import ViewlinePostgres

/// One node's `LISTEN viewline_contacts`: a dedicated connection that hears every
/// committed contacts change, from any node, and re-reads the table once per change.
///
/// It never gives up: when the connection drops (database restarted, network), it
/// reconnects with backoff and reads the table again, so a change made while it was
/// away is not missed. Sessions keep showing their last state meanwhile. A link that
/// goes silent drops nothing a listener would hear, so the connection is probed
/// (``probeInterval``, each probe within ``probeDeadline``, which closes it): a
/// silent one is replaced within seconds rather than missing changes for good.
struct ContactsListener: Sendable {
    let store: PostgresStore
    let url: PostgresURL
    /// How often the listening connection is probed, and how long a probe may take.
    static let probeInterval = Duration.seconds(2)
    static let probeDeadline = Duration.seconds(2)

    func stream() -> AsyncThrowingStream<ContactsSnapshot, any Error> {
        let (stream, continuation) = AsyncThrowingStream.makeStream(of: ContactsSnapshot.self, bufferingPolicy: .bufferingNewest(1))
        // Owned by the stream: cancelled when its consumer stops reading (onTermination).
        let task = Task {
            var shown = -1
            var backoff = Duration.milliseconds(100)
            while !Task.isCancelled {
                do {
                    try await listenOnce { snapshot in
                        backoff = .milliseconds(100)
                        guard snapshot.version != shown else { return }
                        shown = snapshot.version
                        continuation.yield(snapshot)
                    }
                } catch {
                    if Task.isCancelled { break }
                    StoreFigures.shared.listenReconnects.increment()
                    store.logger.warning(
                        "contacts listener lost the database; reconnecting",
                        metadata: [
                            "error": "\(String(describing: error))", "retry-in": "\(backoff)",
                        ])
                }
                try? await Task.sleep(for: backoff)
                backoff = min(backoff * 2, .seconds(5))
            }
            continuation.finish()
        }
        continuation.onTermination = { _ in task.cancel() }
        return stream
    }

    /// Connects, listens, reads the current state, then re-reads at every
    /// notification whose version is newer than the last read. Returns or throws
    /// when the connection ends.
    private func listenOnce(_ deliver: (ContactsSnapshot) -> Void) async throws {
        let database = store.database
        let server = database.primaryServer
        let connection = try await url.connect(server: server, id: 0, within: .seconds(10), logger: store.logger)
        let logger = store.logger
        let probe = Task {
            while !Task.isCancelled {
                try await Task.sleep(for: Self.probeInterval)
                // The node's primary moved: listen there (closing ends the listen).
                if database.primaryServer != server {
                    try? await connection.close()
                    return
                }
                // Fails (and closes the connection, ending the listen) past its deadline.
                _ = try await connection.withDeadline(Self.probeDeadline) {
                    try await connection.query("SELECT 1", logger: logger).collect().count
                }
            }
        }
        defer { probe.cancel() }
        do {
            try await connection.listen(on: PostgresStore.contactsChannel) { notifications in
                // Listening now: whatever changed before is in this read.
                var read = try await store.contactsSnapshot()
                deliver(read)
                for try await notification in notifications {
                    // A transaction that wrote several statements notifies several versions:
                    // the first read already holds the later ones.
                    if let version = Int(notification.payload), version <= read.version { continue }
                    read = try await store.contactsSnapshot()
                    deliver(read)
                }
            }
        } catch {
            try? await connection.close()
            throw error
        }
        try? await connection.close()
    }
}
