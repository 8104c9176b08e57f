import Logging
import PostgresNIO

/// One connection of its own for a node's lease renewals: a pool busy with the
/// node's own load must never delay them (a node whose renewal waits behind its
/// sessions' queries would stop serving for nothing). Reconnects when a renewal
/// fails; a renewal that takes longer than `timeout` fails (and drops the
/// connection), so a blackholed network cannot hang the lease loop.
actor LeaseConnection {
    private let url: PostgresURL
    private let logger: Logger
    private var connection: PostgresConnection?

    init(url: PostgresURL, logger: Logger) {
        self.url = url
        self.logger = logger
    }

    deinit {
        // Closed before it goes (the connection must be closed before it is freed):
        // the close's callback holds it until then.
        guard let connection, !connection.isClosed else { return }
        connection.close().whenComplete { _ in _ = connection }
    }

    struct TimedOut: Error, CustomStringConvertible {
        var description: String { "the lease renewal timed out" }
    }

    /// Runs `query`, whose one row holds one boolean, on the lease connection within `timeout`.
    func bool(_ query: PostgresQuery, timeout: Duration) async throws -> Bool {
        let connection = try await open()
        let logger = logger
        do {
            return try await withThrowingTaskGroup(of: Bool?.self) { group in
                group.addTask {
                    var value = false
                    for try await row in try await connection.query(query, logger: logger) { value = try row.decode(Bool.self) }
                    return value
                }
                group.addTask {
                    try await Task.sleep(for: timeout)
                    throw TimedOut()
                }
                let value = try await group.next()!
                group.cancelAll()
                return value ?? false
            }
        } catch {
            self.connection = nil
            try? await connection.close()
            throw error
        }
    }

    private func open() async throws -> PostgresConnection {
        if let connection, !connection.isClosed { return connection }
        var configuration = try url.connectionConfiguration()
        configuration.options.connectTimeout = .seconds(2)
        let opened = try await PostgresConnection.connect(configuration: configuration, id: 2, logger: logger)
        connection = opened
        return opened
    }
}
