import Logging
import PostgresNIO

/// A connection of its own, for the statements a node's pool must never delay: its
/// lease renewals and its session-record batches. Behind the sessions' own queries
/// in a busy pool, a renewal would make the node stop serving for nothing, and a
/// batch would leave its records trailing until the node refuses commands (it
/// acknowledges nothing a crash would lose). Reconnects when a statement fails; one
/// that takes longer than its `timeout` fails (and drops the connection), so a
/// blackholed network cannot hang the loop that waits for it.
actor DedicatedConnection {
    private let url: PostgresURL
    private let id: Int
    private let logger: Logger
    private var connection: PostgresConnection?
    /// The server `connection` is to (an index in the URL's servers).
    private var server = 0
    /// The server the node writes to now (its health watch's finding).
    private let primary: @Sendable () -> Int
    /// The connect under way: statements that arrive meanwhile wait for it rather
    /// than open one each.
    private var opening: Task<PostgresConnection, any Error>?

    /// - Parameter id: the connection's number in postgres-nio's log lines.
    /// - Parameter primary: the server to use, as an index in `url`'s servers: the
    ///   node's primary, as its health watch last found it (a connection to another
    ///   is closed and opened again there).
    init(url: PostgresURL, id: Int, logger: Logger, primary: @escaping @Sendable () -> Int = { 0 }) {
        self.primary = primary
        self.url = url
        self.id = id
        self.logger = logger
    }

    deinit {
        // Closed before it goes (the connection must be closed before it is freed):
        // the close's callback holds it until then.
        guard let connection, !connection.isClosed else { return }
        connection.close().whenComplete { _ in _ = connection }
    }

    /// Runs `query`, whose one row holds one boolean, within `timeout`.
    func bool(_ query: PostgresQuery, timeout: Duration) async throws -> Bool {
        try await rows(query, timeout: timeout) { try $0.decode(Bool.self) }.last ?? false
    }

    /// Runs `query` within `timeout`, each row it returns through `transform`.
    func rows<T: Sendable>(
        _ query: PostgresQuery, timeout: Duration, _ transform: @escaping @Sendable (PostgresRow) throws -> T
    ) async throws -> [T] {
        let connection = try await open(within: timeout)
        let logger = logger
        do {
            return try await connection.withDeadline(timeout, closingOnCancel: true) {
                var values: [T] = []
                for try await row in try await connection.query(query, logger: logger) { values.append(try transform(row)) }
                return values
            }
        } catch {
            if self.connection === connection { self.connection = nil }
            try? await connection.close()
            throw error
        }
    }

    /// The connection, opened first if need be — to the node's primary, when the URL
    /// lists several servers — within `timeout` (the statement's own:
    /// a link slower than a fixed connect timeout but inside the statement's deadline
    /// still connects; a reconnect takes a few round trips).
    private func open(within timeout: Duration) async throws -> PostgresConnection {
        let target = primary()
        if let connection, !connection.isClosed {
            if server == target { return connection }
            // The primary moved: no statement of this node's goes to the old one.
            self.connection = nil
            try? await connection.close()
        }
        if let opening { return try await opening.value }
        let (url, id, logger) = (url, id, logger)
        let task = Task {
            try await url.connect(server: target, id: id, within: timeout, logger: logger)
        }
        server = target
        opening = task
        defer { opening = nil }
        let opened = try await task.value
        connection = opened
        return opened
    }
}
