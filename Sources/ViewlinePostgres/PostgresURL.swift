import Foundation
import PostgresNIO

/// Where the database is: `postgres://user[:password]@host[:port]/database`, as
/// libpq spells it. `?host=/run/dir` connects through the Unix socket in that
/// directory; `?sslmode=disable|prefer|require` picks TLS (default `prefer`).
///
/// Several servers, as libpq lists them — `postgres://u@db0:5432,db1:5432/viewline`
/// — name the members of a cluster that fails over: a node connects to the first
/// of them, in order, that is the primary (`target_session_attrs=read-write`, the
/// default with several servers, or `primary`), and moves to the promoted one when
/// the primary it used goes away or becomes a standby.
public struct PostgresURL: Sendable, CustomStringConvertible {
    /// One server of the URL.
    public struct Server: Sendable, Hashable, CustomStringConvertible {
        /// The server's host.
        public var host: String
        /// The server's port.
        public var port: Int

        /// `host:port` (`[host]:port` for an IPv6 address).
        public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
    }

    /// The servers the URL names, in the order they are tried (one unless the URL
    /// lists several).
    public var servers: [Server]
    /// The first server's host (`127.0.0.1` when the URL names none).
    public var host: String {
        get { servers[0].host }
        set { servers[0].host = newValue }
    }
    /// The first server's port (5432 when the URL names none).
    public var port: Int {
        get { servers[0].port }
        set { servers[0].port = newValue }
    }
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
    /// Whether a connection is kept only on a primary (`?target_session_attrs=`
    /// `read-write` or `primary`; the default with several servers): each server is
    /// asked `pg_is_in_recovery()` as it is connected to, and a standby is passed over.
    public var requiresPrimary: Bool

    /// A URL that cannot be used, with the reason.
    public struct Invalid: Error, CustomStringConvertible {
        public var description: String
    }

    /// Parses a `postgres://` (or `postgresql://`) URL; throws ``Invalid`` for any other
    /// scheme, an unknown `sslmode`, or a `target_session_attrs` a node cannot work
    /// with (it writes: `read-write`, `primary`, or `any` with one server).
    public init(_ string: String) throws {
        // Several servers (`h1:p1,h2:p2`) are no URL host: URLComponents reads the
        // first, and the list is read here.
        let (single, listed) = try Self.splitServers(string)
        guard let components = URLComponents(string: single),
            components.scheme == "postgres" || components.scheme == "postgresql"
        else {
            // Not the text itself: it may hold a password.
            throw Invalid(description: "the database URL is not a postgres:// (or postgresql://) URL")
        }
        let items = Dictionary((components.queryItems ?? []).map { ($0.name, $0.value ?? "") }, uniquingKeysWith: { _, last in last })
        if let host = items["host"], !host.hasPrefix("/") {
            throw Invalid(description: "?host= names a Unix socket's directory here; list servers as host1:port1,host2:port2 after the @")
        }
        if items["port"] != nil { throw Invalid(description: "?port= is not read; give each server's port after its host") }
        socketDirectory = items["host"]
        // URLComponents keeps an IPv6 literal's brackets.
        var firstHost = components.host.flatMap { $0.isEmpty ? nil : $0 } ?? "127.0.0.1"
        if firstHost.hasPrefix("[") && firstHost.hasSuffix("]") { firstHost = String(firstHost.dropFirst().dropLast()) }
        let first = Server(host: firstHost, port: components.port ?? 5432)
        guard (1...65535).contains(first.port) else { throw Invalid(description: "port \(first.port) is not a TCP port") }
        servers = [first] + listed
        user = components.user.flatMap { $0.isEmpty ? nil : $0 } ?? ProcessInfo.processInfo.environment["USER"] ?? "postgres"
        password = components.password
        let path = components.path.hasPrefix("/") ? String(components.path.dropFirst()) : components.path
        database = path.isEmpty ? user : path
        sslMode = items["sslmode"] ?? "prefer"
        guard ["disable", "prefer", "require"].contains(sslMode) else {
            throw Invalid(description: "sslmode must be disable, prefer or require, not \(sslMode)")
        }
        switch items["target_session_attrs"] {
        case "read-write", "primary": requiresPrimary = true
        case nil: requiresPrimary = servers.count > 1
        case "any" where servers.count == 1: requiresPrimary = false
        case let other:
            throw Invalid(
                description: "target_session_attrs must be read-write or primary\(servers.count == 1 ? " (or any)" : " with several servers"), "
                    + "not \"\(other ?? "")\": a node writes")
        }
        if Set(servers).count != servers.count {
            throw Invalid(description: "the URL lists a server twice")
        }
        if servers.count > 1 && socketDirectory != nil {
            throw Invalid(description: "?host=\(socketDirectory ?? "") names one server's socket; the URL lists several servers")
        }
    }

    /// The URL with its server list cut to the first (what URLComponents can read),
    /// and the servers after the first.
    private static func splitServers(_ string: String) throws -> (String, [Server]) {
        guard let scheme = string.range(of: "://") else { return (string, []) }
        let rest = string[scheme.upperBound...]
        let authorityEnd = rest.firstIndex(where: { "/?#".contains($0) }) ?? rest.endIndex
        let authority = rest[..<authorityEnd]
        let hostsStart = authority.lastIndex(of: "@").map { authority.index(after: $0) } ?? authority.startIndex
        let hostList = authority[hostsStart...]
        guard hostList.contains(",") else { return (string, []) }
        let parts = hostList.split(separator: ",", omittingEmptySubsequences: false)
        var servers: [Server] = []
        for (number, part) in parts.enumerated().dropFirst() {
            guard let server = Self.server(part) else {
                // Not echoed: a password with a `/` in it ends the authority early,
                // and this part would be a piece of it.
                throw Invalid(
                    description: "server \(number + 1) of the URL's list is not host[:port] "
                        + "(a password holding , / @ or a space must be percent-encoded)")
            }
            servers.append(server)
        }
        guard !parts[0].isEmpty else { throw Invalid(description: "the URL's server list begins with an empty server") }
        return (String(string[..<hostsStart]) + parts[0] + String(string[authorityEnd...]), servers)
    }

    /// `host`, `host:port`, `[v6]` or `[v6]:port`.
    private static func server(_ text: Substring) -> Server? {
        var host = text
        var port = 5432
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { return nil }
            host = text[text.index(after: text.startIndex)..<close]
            let after = text[text.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":"), let number = Int(after.dropFirst()) else { return nil }
                port = number
            }
        } else if text.filter({ $0 == ":" }).count > 1 {
            return nil  // an IPv6 address goes in brackets
        } else if let colon = text.lastIndex(of: ":") {
            guard let number = Int(text[text.index(after: colon)...]) else { return nil }
            host = text[..<colon]
            port = number
        }
        guard !host.isEmpty, (1...65535).contains(port), !host.contains(where: { " /@?#".contains($0) }) else { return nil }
        return Server(host: String(host), port: port)
    }

    /// The URL with the password hidden, for messages and logs.
    public var redacted: String {
        let credentials = password == nil ? user : "\(user):***"
        var query = socketDirectory.map { ["host=\($0)"] } ?? []
        if requiresPrimary && servers.count == 1 { query.append("target_session_attrs=read-write") }
        let servers = servers.map(\.description).joined(separator: ",")
        return "postgres://\(credentials)@\(servers)/\(database)\(query.isEmpty ? "" : "?" + query.joined(separator: "&"))"
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
    /// with PostgreSQL's own error. Neither reaches a commit that waits for a
    /// synchronous standby: that one stays pending and commits when the standby
    /// answers (docs/deploying.md, "Two limits remain").
    package var serverSideLimits: [(String, String)] {
        let milliseconds = max(Int(nodeTimeout.seconds * 1000), 100)
        return [
            ("statement_timeout", "\(milliseconds * 9 / 10)"),
            ("lock_timeout", "\(milliseconds * 4 / 10)"),
            ("idle_in_transaction_session_timeout", "\(milliseconds * 9 / 10)"),
            ("client_connection_check_interval", "250"),
        ]
    }

    /// A `PostgresClient` configuration for this database's first server (its host
    /// or socket, credentials and TLS), with the server-side limits every node
    /// connection carries.
    public var clientConfiguration: PostgresClient.Configuration { clientConfiguration(server: 0) }

    /// ``clientConfiguration`` for the server at `index` in ``servers``.
    public func clientConfiguration(server index: Int) -> PostgresClient.Configuration {
        let (host, port) = (servers[index].host, servers[index].port)
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

    package func connectionConfiguration(server index: Int = 0) throws -> PostgresConnection.Configuration {
        let (host, port) = (servers[index].host, servers[index].port)
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
