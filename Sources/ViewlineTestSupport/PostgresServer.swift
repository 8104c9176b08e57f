import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A real, throwaway PostgreSQL server from Debian's packages: `initdb` into a
/// temporary directory, `pg_ctl start` on a free loopback port, stopped and
/// deleted with the value (or at exit for ``shared``). As root, the data
/// directory belongs to the `postgres` system user and the server runs as it
/// (initdb refuses root). Never a mock.
public final class PostgresServer: @unchecked Sendable {
    /// The directory holding `data/` (the cluster), the socket and the log.
    public let directory: String
    public let port: Int
    private var running = false
    private let lock = NSLock()

    /// One server for the whole test process, stopped when it exits.
    public static let shared: PostgresServer = {
        let server = try! PostgresServer()
        atexit {
            PostgresServer.shared.stop()
            try? FileManager.default.removeItem(atPath: PostgresServer.shared.directory)
        }
        return server
    }()

    /// `postgres://` URL of `database` (created with ``createDatabase(_:)``).
    public func url(database: String = "postgres") -> String {
        "postgres://postgres@127.0.0.1:\(port)/\(database)?sslmode=disable"
    }

    /// Where Debian installs the server's programs (the newest version there).
    public static var binDirectory: String? {
        let root = "/usr/lib/postgresql"
        let versions = (try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []
        return versions.compactMap(Int.init).sorted().last.map { "\(root)/\($0)/bin" }
    }

    /// Creates and starts a cluster. `fsync` off: tests kill nodes, not this server.
    public init() throws {
        guard let bin = Self.binDirectory else {
            throw Failure(description: "PostgreSQL is not installed (apt-get install postgresql)")
        }
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("viewline-pg-\(UUID().uuidString.prefix(8))").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        port = try Self.freePort()
        if getuid() == 0 { try Self.run("/bin/chown", ["postgres:postgres", directory]) }
        try asServerUser("\(bin)/initdb", ["-D", "\(directory)/data", "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"])
        try start()
    }

    /// Starts the server (again, after ``stop()``), waiting until it accepts connections.
    public func start() throws {
        guard let bin = Self.binDirectory else { return }
        let options = "-p \(port) -k \(directory) -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200"
        try asServerUser("\(bin)/pg_ctl", ["-D", "\(directory)/data", "-l", "\(directory)/log", "-o", options, "-w", "-t", "30", "start"])
        lock.withLock { running = true }
    }

    /// Stops the server at once (`immediate`: clients see the connection drop, as in a crash).
    public func stop() {
        guard lock.withLock({ running }), let bin = Self.binDirectory else { return }
        try? asServerUser("\(bin)/pg_ctl", ["-D", "\(directory)/data", "-m", "immediate", "-w", "stop"])
        lock.withLock { running = false }
    }

    /// A new empty database, so each test starts from nothing.
    public func createDatabase(_ name: String = "t\(UUID().uuidString.prefix(8).lowercased())") throws -> String {
        guard let bin = Self.binDirectory else { throw Failure(description: "PostgreSQL is not installed") }
        try asServerUser("\(bin)/psql", ["-h", "127.0.0.1", "-p", "\(port)", "-U", "postgres", "-q", "-c", "CREATE DATABASE \(name)"])
        return name
    }

    /// Runs `sql` in `database` with psql and returns its unaligned output, trimmed.
    public func query(_ sql: String, database: String) throws -> String {
        guard let bin = Self.binDirectory else { throw Failure(description: "PostgreSQL is not installed") }
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("viewline-pg-\(UUID().uuidString).query").path
        defer { unlink(path) }
        try asServerUser("/bin/sh", ["-c", "\"$0\" -h 127.0.0.1 -p \(port) -U postgres -d \(database) -Atc \"$1\" > \(path)", "\(bin)/psql", sql])
        return ((try? String(contentsOfFile: path, encoding: .utf8)) ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
    }

    deinit {
        stop()
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Runs a server program, as the `postgres` user when we are root.
    private func asServerUser(_ program: String, _ arguments: [String]) throws {
        if getuid() == 0 {
            try Self.run("/usr/sbin/runuser", ["-u", "postgres", "--", program] + arguments)
        } else {
            try Self.run(program, arguments)
        }
    }

    /// Runs a program to its end with `posix_spawn` and `waitpid` (Foundation's
    /// `Process.waitUntilExit` can hang when the program leaves a daemon behind, as
    /// `pg_ctl start` does). Output goes to a file, not a pipe the daemon would keep.
    private static func run(_ program: String, _ arguments: [String]) throws {
        let outputPath = FileManager.default.temporaryDirectory.appendingPathComponent("viewline-pg-\(UUID().uuidString).out").path
        defer { unlink(outputPath) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, outputPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        let argv = ([program] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid = pid_t()
        let spawned = posix_spawn(&pid, program, &actions, nil, argv, environ)
        guard spawned == 0 else { throw Failure(description: "cannot start \(program): error \(spawned)") }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
        let exitCode = (status & 0x7f) == 0 ? (status >> 8) & 0xff : -1
        guard exitCode == 0 else {
            let text = (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
            throw Failure(description: "\(program) \(arguments.joined(separator: " ")) failed (\(exitCode)): \(text)")
        }
    }

    /// A port nobody listens on right now.
    static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer -> Bool in
                bind(fd, pointer, length) == 0 && getsockname(fd, pointer, &length) == 0
            }
        }
        guard bound else { throw Failure(description: "no free port") }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }
}
