import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The real `viewline-server` binary, started on port 0 for tests that need a
/// separate process (signals, SIGKILL, restarts on the same database).
public final class ServerProcess {
    public let process: Process
    public let port: Int
    private let output: Pipe
    /// The server's standard input, held open while this object lives: the server runs
    /// with `--stop-at-end-of-input`, so a test process that crashes (or drops this
    /// object without stopping it) does not leave it running.
    private let input = Pipe()

    /// The directory holding the built products (next to the test bundle).
    public static var productsDirectory: URL {
        let executable = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        var directory = executable.deletingLastPathComponent()
        if directory.lastPathComponent.hasSuffix(".xctest") { directory = directory.deletingLastPathComponent() }
        return directory
    }

    /// A TCP port on 127.0.0.1 free a moment ago: for a server that must come back on
    /// the port its clients know (a restart).
    public static func freePort() throws -> Int {
        let probe = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(probe) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(probe, $0, length) } }
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(probe, $0, &length) }
        }
        guard bound == 0, named == 0 else { throw LineClient.Failure(description: "no free port: errno \(errno)") }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// Starts the server with `arguments`; its log (at `logLevel`) goes to `logFile`, or nowhere.
    /// Where a child process's standard error goes: `logFile` (made empty first), or nowhere.
    static func errors(to logFile: String?) -> FileHandle? {
        guard let logFile else { return FileHandle.nullDevice }
        _ = FileManager.default.createFile(atPath: logFile, contents: nil)
        return FileHandle(forWritingAtPath: logFile)
    }

    public init(_ arguments: [String], executable: String = "viewline-server", logFile: String? = nil, logLevel: String = "warning") throws {
        _ = BrokenPipes.ignored
        process = Process()
        process.executableURL = Self.productsDirectory.appendingPathComponent(executable)
        let stopsWithInput = executable == "viewline-server" ? ["--stop-at-end-of-input"] : []
        process.arguments = ["--port", "0", "--log-level", logLevel] + stopsWithInput + arguments
        process.standardInput = input
        output = Pipe()
        process.standardOutput = output
        process.standardError = Self.errors(to: logFile)
        try process.run()
        // The first line is "listening on HOST:PORT".
        var line: [UInt8] = []
        let handle = output.fileHandleForReading
        while true {
            let byte = handle.readData(ofLength: 1)
            guard let value = byte.first else { break }
            if value == 0x0A { break }
            line.append(value)
        }
        let text = String(decoding: line, as: UTF8.self)
        guard text.hasPrefix("listening on "), let port = text.split(separator: ":").last.flatMap({ Int($0) }) else {
            process.terminate()
            throw LineClient.Failure(description: "server did not start: \(text)")
        }
        self.port = port
        // With --metrics-port and --web-port, the next lines say where those listen.
        var webPort: Int?
        var metricsPort: Int?
        for _ in 0..<((arguments.contains("--web-port") ? 1 : 0) + (arguments.contains("--metrics-port") ? 1 : 0)) {
            var bytes: [UInt8] = []
            while true {
                let byte = handle.readData(ofLength: 1)
                guard let value = byte.first, value != 0x0A else { break }
                bytes.append(value)
            }
            let text = String(decoding: bytes, as: UTF8.self)
            let port = text.split(separator: ":").last.flatMap { Int($0.split(separator: "/").first ?? "") }
            if text.hasPrefix("web on ") { webPort = port } else if text.hasPrefix("metrics on ") { metricsPort = port }
        }
        self.webPort = webPort
        self.metricsPort = metricsPort
    }

    /// The operations listener's port (`/metrics`, `/readyz`), when started with `--metrics-port`.
    public let metricsPort: Int?

    /// The web listener's port (the page and `/ws`), when started with `--web-port`.
    public let webPort: Int?

    public func signal(_ number: Int32) { kill(process.processIdentifier, number) }

    /// Closes the server's standard input, as this process's end would: the server
    /// shuts down as on SIGTERM.
    public func endInput() { try? input.fileHandleForWriting.close() }

    /// Waits for the process to end and returns its exit status. `timeout` bounds
    /// how long the process may run: once the kernel has ended it, Foundation's
    /// reaping (its own thread, which a loaded machine can hold back for longer) is
    /// waited for without one.
    public func waitForExit(timeout: Duration = .seconds(10)) throws -> Int32 {
        let deadline = ContinuousClock.now + timeout
        while process.isRunning {
            if hasEnded {
                process.waitUntilExit()
                break
            }
            guard ContinuousClock.now < deadline else { throw LineClient.Failure(description: "server did not exit") }
            usleep(10_000)
        }
        return process.terminationStatus
    }

    /// ``waitForExit(timeout:)`` from an async test, on a thread of its own: the wait
    /// polls for up to `timeout`, and an async test that polled on the cooperative
    /// pool would hold one of its few threads (two on a 2-core machine) from every
    /// other async test meanwhile. Swift picks this one wherever `await` can be used.
    public func waitForExit(timeout: Duration = .seconds(10)) async throws -> Int32 {
        let process = HandedOver(self)
        return try await onItsOwnThread { try process.value.waitForExit(timeout: timeout) as Int32 }
    }

    /// Whether the kernel has ended the process: it is a zombie (state `Z` in
    /// `/proc/PID/stat`, after the name in parentheses) or gone.
    private var hasEnded: Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(process.processIdentifier)/stat", encoding: .utf8) else { return true }
        guard let name = stat.lastIndex(of: ")") else { return false }
        return stat[name...].dropFirst().drop(while: { $0 == " " }).first == "Z"
    }

    deinit {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }
}
