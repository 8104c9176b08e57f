import ServiceLifecycle
import ViewlinePostgres

/// What the node's database needs while the node uses it — its health watch, and
/// its own pool when the cluster's stored node timeout differs from the one this
/// node was started with (the pool's server-side limits follow the agreed one): the
/// node settles on its ``DatabaseAccess`` as it starts, and this service of the
/// group runs it (``DatabaseAccess/run()``).
///
/// Placed before the node in the group, it outlives the node's drain: the group
/// shuts its services down in reverse order, so the pool and the watch stop only
/// once the node has said `bye` and written its last records. (A pool run by the
/// node itself saw the node's graceful shutdown and closed at once, and every
/// command of the drain failed.)
final class NodeDatabase: Service, Sendable {
    private let databases: AsyncStream<DatabaseAccess>
    private let continuation: AsyncStream<DatabaseAccess>.Continuation

    init() {
        (databases, continuation) = AsyncStream.makeStream(of: DatabaseAccess.self)
    }

    /// Runs `database` until the group's shutdown reaches this service.
    func serve(_ database: DatabaseAccess) {
        continuation.yield(database)
        continuation.finish()
    }

    /// The node has no database (SQLite).
    func notNeeded() {
        continuation.finish()
    }

    func run() async {
        await cancelWhenGracefulShutdown { [databases] in
            for await database in databases { await database.run() }
            // Nothing to run: like any service, it runs until the group's shutdown.
            try? await gracefulShutdown()
        }
    }
}
