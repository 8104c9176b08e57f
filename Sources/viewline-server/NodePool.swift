import PostgresNIO
import ServiceLifecycle

/// The node's own database pool, when the cluster's stored node timeout differs from
/// the one this node was started with (its server-side limits follow the agreed
/// one): the node makes it as it starts, and this service of the group runs it.
///
/// Placed before the node in the group, it outlives the node's drain: the group
/// shuts its services down in reverse order, so the pool stops only once the node
/// has said `bye` and written its last records. (Run by the node itself, the pool
/// saw the node's graceful shutdown and closed at once, and every command of the
/// drain failed.)
final class NodePool: Service, Sendable {
    private let clients: AsyncStream<PostgresClient>
    private let continuation: AsyncStream<PostgresClient>.Continuation

    init() {
        (clients, continuation) = AsyncStream.makeStream(of: PostgresClient.self)
    }

    /// Runs `client` until the group's shutdown reaches this service.
    func serve(_ client: PostgresClient) {
        continuation.yield(client)
        continuation.finish()
    }

    /// The node needs no pool of its own.
    func notNeeded() {
        continuation.finish()
    }

    func run() async {
        await cancelWhenGracefulShutdown { [clients] in
            for await client in clients { await client.run() }
            // No pool of its own: like any service, it runs until the group's shutdown.
            try? await gracefulShutdown()
        }
    }
}
