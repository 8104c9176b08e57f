import Foundation
import PostgresNIO

/// Where the database is: `postgres://user[:password]@host[:port]/database`, as
/// libpq spells it. `?host=/run/dir` connects through the Unix socket in that
/// directory; `?sslmode=disable|prefer|require` picks TLS (default `prefer`).
public struct PostgresURL: Sendable, CustomStringConvertible {
    public var host: String
    public var port: Int
    public var user: String
    public var password: String?
    public var database: String
    public var socketDirectory: String?
    public var sslMode: String

    /// A URL that cannot be used, with the reason.
    public struct Invalid: Error, CustomStringConvertible {
        public var description: String
    }

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

    /// A `PostgresClient` configuration for this database (its host or socket,
    /// credentials and TLS).
    public var clientConfiguration: PostgresClient.Configuration {
        if let socketDirectory {
            return PostgresClient.Configuration(
                unixSocketPath: "\(socketDirectory)/.s.PGSQL.\(port)", username: user, password: password, database: database)
        }
        return PostgresClient.Configuration(host: host, port: port, username: user, password: password, database: database, tls: clientTLS)
    }

    package func connectionConfiguration() throws -> PostgresConnection.Configuration {
        if let socketDirectory {
            return PostgresConnection.Configuration(
                unixSocketPath: "\(socketDirectory)/.s.PGSQL.\(port)", username: user, password: password, database: database)
        }
        return PostgresConnection.Configuration(host: host, port: port, username: user, password: password, database: database, tls: try connectionTLS())
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
