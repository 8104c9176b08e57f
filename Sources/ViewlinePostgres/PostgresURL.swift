import Foundation
import PostgresNIO

/// Where the database is: `postgres://user[:password]@host[:port]/database`, as
/// libpq spells it. `?host=/run/dir` connects through the Unix socket in that
/// directory; `?sslmode=disable|prefer|require` picks TLS (default `prefer`).
public struct PostgresURL: Sendable, CustomStringConvertible {
    /// The server's host (`127.0.0.1` when the URL names none).
    public var host: String
    /// The server's port (5432 when the URL names none).
    public var port: Int
    /// The role to connect as (`$USER` when the URL names none).
    public var user: String
    /// The role's password, if the URL holds one.
    public var password: String?
    /// The database's name (the user's name when the URL names none).
    public var database: String
    /// The directory of the server's Unix socket (`?host=/run/dir`): connect through
    /// it rather than TCP.
    public var socketDirectory: String?
    /// `disable`, `prefer` (the default) or `require` (`?sslmode=`).
    public var sslMode: String

    /// A URL that cannot be used, with the reason.
    public struct Invalid: Error, CustomStringConvertible {
        public var description: String
    }

    /// Parses a `postgres://` (or `postgresql://`) URL; throws ``Invalid`` for any other
    /// scheme or an unknown `sslmode`.
    public init(_ string: String) throws {
        guard let components = URLComponents(string: string),
            components.scheme == "postgres" || components.scheme == "postgresql"
        else { throw Invalid(description: "\(string) is not a postgres:// URL") }
        let items = Dictionary((components.queryItems ?? []).map { ($0.name, $0.value ?? "") }, uniquingKeysWith: { _, last in last })
        socketDirectory = items["host"].flatMap { $0.hasPrefix("/") ? $0 : nil }
        host = components.host.flatMap { $0.isEmpty ? nil : $0 } ?? "127.0.0.1"
        port = components.port ?? 5432
        user = components.user.flatMap { $0.isEmpty ? nil : $0 } ?? ProcessInfo.processInfo.environment["USER"] ?? "postgres"
        password = components.password
        let path = components.path.hasPrefix("/") ? String(components.path.dropFirst()) : components.path
        database = path.isEmpty ? user : path
        sslMode = items["sslmode"] ?? "prefer"
        guard ["disable", "prefer", "require"].contains(sslMode) else {
            throw Invalid(description: "sslmode must be disable, prefer or require, not \(sslMode)")
        }
    }

    /// The URL with the password hidden, for messages and logs.
    public var redacted: String {
        let credentials = password == nil ? user : "\(user):***"
        let socket = socketDirectory.map { "?host=\($0)" } ?? ""
        return "postgres://\(credentials)@\(host):\(port)/\(database)\(socket)"
    }

    public var description: String { redacted }

    /// The cluster's node timeout the server-side limits are set below (5 s, the
    /// default node timeout, unless set): a node sets it to the node timeout it runs
    /// with before it opens a connection.
    public var nodeTimeout: Duration = .seconds(5)

    /// What every connection a node opens asks the server to enforce on its own side,
    /// as fractions of ``nodeTimeout`` (5 s: 4.5 s, 2 s, 4.5 s): no statement runs
    /// longer than 90 % of it, no lock is waited for longer than 40 % (one session's
    /// lock cannot stall a node's other statements behind it for longer), no
    /// transaction is left open idle longer than 90 %; and a statement whose client
    /// went away (its deadline closed the connection) is aborted within 250 ms even
    /// while it waits on a lock, rather than committing after the caller was told it
    /// failed (`client_connection_check_interval`, PostgreSQL 14 or newer). Sent in the
    /// startup packet, so a pooled connection has them too; a statement they end fails
    /// with PostgreSQL's own error.
    package var serverSideLimits: [(String, String)] {
        let milliseconds = max(Int(nodeTimeout.seconds * 1000), 100)
        return [
            ("statement_timeout", "\(milliseconds * 9 / 10)"),
            ("lock_timeout", "\(milliseconds * 4 / 10)"),
            ("idle_in_transaction_session_timeout", "\(milliseconds * 9 / 10)"),
            ("client_connection_check_interval", "250"),
        ]
    }

    /// A `PostgresClient` configuration for this database (its host or socket,
    /// credentials and TLS), with the server-side limits every node connection carries.
    public var clientConfiguration: PostgresClient.Configuration {
        var configuration: PostgresClient.Configuration
        if let socketDirectory {
            configuration = PostgresClient.Configuration(
                unixSocketPath: "\(socketDirectory)/.s.PGSQL.\(port)", username: user, password: password, database: database)
        } else {
            configuration = PostgresClient.Configuration(
                host: host, port: port, username: user, password: password, database: database, tls: clientTLS)
        }
        configuration.options.additionalStartupParameters = serverSideLimits
        return configuration
    }

    package func connectionConfiguration() throws -> PostgresConnection.Configuration {
        var configuration: PostgresConnection.Configuration
        if let socketDirectory {
            configuration = PostgresConnection.Configuration(
                unixSocketPath: "\(socketDirectory)/.s.PGSQL.\(port)", username: user, password: password, database: database)
        } else {
            configuration = PostgresConnection.Configuration(
                host: host, port: port, username: user, password: password, database: database, tls: try connectionTLS())
        }
        configuration.options.additionalStartupParameters = serverSideLimits
        return configuration
    }

    private var clientTLS: PostgresClient.Configuration.TLS {
        switch sslMode {
        case "disable": return .disable
        case "require": return .require(.makeClientConfiguration())
        default: return .prefer(.makeClientConfiguration())
        }
    }

    private func connectionTLS() throws -> PostgresConnection.Configuration.TLS {
        switch sslMode {
        case "disable": return .disable
        case "require": return .require(try NIOSSLContext(configuration: .makeClientConfiguration()))
        default: return .prefer(try NIOSSLContext(configuration: .makeClientConfiguration()))
        }
    }
}
