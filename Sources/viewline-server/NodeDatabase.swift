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

    /// Runs `database` until the group's shutdown reaches this service, beside any
    /// served before (the first, over the group's clients, is served before the node
    /// first calls: its health watch is what finds the primary of a URL that lists
    /// several servers).
    func serve(_ database: DatabaseAccess) {
        continuation.yield(database)
    }

    /// The node has settled on its database (or has none: SQLite).
    func settled() {
        continuation.finish()
    }

    func run() async {
        await cancelWhenGracefulShutdown { [databases] in
            await withDiscardingTaskGroup { group in
                for await database in databases { group.addTask { await database.run() } }
                // Nothing more to run: like any service, it runs until the group's shutdown.
                group.addTask { try? await gracefulShutdown() }
            }
        }
    }
}
