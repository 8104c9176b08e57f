import Foundation

#if canImport(Glibc)
    import CPseudoTerminal
    import Glibc
#endif

/// A real, throwaway PostgreSQL server from Debian's packages, through the one
/// starter every suite shares (`Tests/support/postgres`): `initdb` into a temporary
/// directory, started on a free loopback port, stopped and deleted with the value
/// (or at exit for ``shared``). ``shared`` is the server `dev test` started when
/// `VIEWLINE_TEST_POSTGRES` names it (each test makes its own database there). Never a mock.
public final class PostgresServer: @unchecked Sendable {
    /// The directory holding `data/` (the cluster), the socket and the log; `nil` for
    /// the server `VIEWLINE_TEST_POSTGRES` names (started and stopped by whoever started it).
    public let directory: String?
    public let port: Int
    /// The admin URL (database `postgres`).
    private let adminURL: String
    private var running = false
    private let lock = NSLock()
    /// For a server started here: a shell that removes it once its standard input ends,
    /// which this value holds open. A test process that crashes (no `deinit`, no
    /// `atexit`) still takes its server along; the kernel closes the pipe.
    private var watchdog: (process: Process, input: Pipe)?

    /// One server for the whole test process: `VIEWLINE_TEST_POSTGRES`'s, or one started
    /// here and stopped when the process exits.
    public static let shared: PostgresServer = {
        if let url = ProcessInfo.processInfo.environment["VIEWLINE_TEST_POSTGRES"], !url.isEmpty {
            return try! PostgresServer(url: url)
        }
        let server = try! PostgresServer()
        atexit { PostgresServer.shared.remove() }
        return server
    }()

    /// The starter script, beside this package's tests.
    static let script = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appending(path: "Tests/support/postgres").path

    /// `postgres://` URL of `database` (created with ``createDatabase()``).
    public func url(database: String = "postgres") -> String {
        "postgres://postgres@127.0.0.1:\(port)/\(database)?sslmode=disable"
    }

    /// Creates and starts a server of its own (a test that stops it needs one).
    public init() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("viewline-pg-\(UUID().uuidString.prefix(8))").path
        self.directory = directory
        adminURL = try Self.run([Self.script, "start", directory])
        port = try Self.port(of: adminURL)
        running = true
        watchdog = try? Self.watchdog(removing: directory)
    }

    /// A shell that waits for its standard input to end, then removes the server in
    /// `directory` (stops it, deletes the directory).
    private static func watchdog(removing directory: String) throws -> (process: Process, input: Pipe) {
        let process = Process()
        let input = Pipe()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", #"cat > /dev/null; exec "$0" remove "$1""#, script, directory]
        process.standardInput = input
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        return (process, input)
    }

    /// A server someone else started (`VIEWLINE_TEST_POSTGRES`): never stopped from here.
    init(url: String) throws {
        directory = nil
        adminURL = url
        port = try Self.port(of: url)
    }

    /// Starts the server again after ``stop()``, waiting until it accepts connections.
    public func start() throws {
        guard let directory else { return }
        _ = try Self.run([Self.script, "start", directory])
        lock.withLock { running = true }
    }

    /// Stops the server at once (`immediate`: clients see the connection drop, as in a crash).
    public func stop() {
        guard let directory, lock.withLock({ running }) else { return }
        _ = try? Self.run([Self.script, "stop", directory])
        lock.withLock { running = false }
    }

    /// Stops the server and deletes its directory (its watchdog has nothing left to do).
    func remove() {
        guard let directory else { return }
        if let watchdog = lock.withLock({ () -> (process: Process, input: Pipe)? in
            defer { self.watchdog = nil }
            return self.watchdog
        }) {
            watchdog.process.terminate()
        }
        _ = try? Self.run([Self.script, "remove", directory])
        lock.withLock { running = false }
    }

    /// A new empty database, so each test starts from nothing; returns its name.
    public func createDatabase() throws -> String {
        let url = try Self.run([Self.script, "createdb", adminURL])
        guard let name = URL(string: url)?.path.dropFirst(), !name.isEmpty else { throw Failure(description: "createdb said \(url)") }
        return String(name)
    }

    /// ``createDatabase()`` from an async test, on a thread of its own: `createdb`
    /// takes about 0.3 s, and an async test that waited for it on the cooperative
    /// pool would hold one of its few threads (two on a 2-core machine) from every
    /// other async test meanwhile. Swift picks this one wherever `await` can be used.
    public func createDatabase() async throws -> String {
        try await onItsOwnThread { try self.createDatabase() as String }
    }

    /// Runs `sql` in `database` with psql and returns its unaligned output, trimmed.
    public func query(_ sql: String, database: String) throws -> String {
        try Self.run([Self.script, "psql", url(database: database), "-c", sql])
    }

    /// ``query(_:database:)`` on a thread of its own, off the concurrency pool: a
    /// statement that holds locks or sleeps while the test goes on (a transaction
    /// another part waits for) must not take one of the pool's few threads meanwhile.
    public func queryOnItsOwnThread(_ sql: String, database: String) async throws -> String {
        try await onItsOwnThread { try self.query(sql, database: database) }
    }

    deinit {
        remove()
    }

    private static func port(of url: String) throws -> Int {
        guard let port = URL(string: url)?.port else { throw Failure(description: "no port in \(url)") }
        return port
    }

    /// Runs a program to its end with `posix_spawn` and `waitpid` and returns its
    /// standard output, trimmed; its standard error (a warning, say) is never read as
    /// output, only shown when the program fails (Foundation's `Process.waitUntilExit` can hang when the program
    /// leaves a daemon behind, as `pg_ctl start` does). Output goes to a file, not a
    /// pipe the daemon would keep, and no other descriptor of this process goes along.
    @discardableResult
    static func run(_ command: [String]) throws -> String {
        let outputPath = FileManager.default.temporaryDirectory.appendingPathComponent("viewline-pg-\(UUID().uuidString).out").path
        let errorPath = outputPath + ".err"
        defer {
            unlink(outputPath)
            unlink(errorPath)
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, outputPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_addopen(&actions, 2, errorPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        // Nothing else of this process goes with it: sockets NIO accepted are not
        // close-on-exec, and a daemon holding one keeps that connection open after the
        // server closed it (a test waiting for the close would wait for the daemon).
        vl_spawn_close_from(&actions, 3)
        let argv = command.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid = pid_t()
        let spawned = posix_spawn(&pid, command[0], &actions, nil, argv, environ)
        guard spawned == 0 else { throw Failure(description: "cannot start \(command[0]): error \(spawned)") }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
        let exitCode = (status & 0x7f) == 0 ? (status >> 8) & 0xff : -1
        let text = ((try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
        guard exitCode == 0 else {
            let errors = ((try? String(contentsOfFile: errorPath, encoding: .utf8)) ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
            throw Failure(description: "\(command.joined(separator: " ")) failed (\(exitCode)): \(text) \(errors)")
        }
        return text
    }

    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }
}
