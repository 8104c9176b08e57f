import Foundation

/// Debian's HAProxy in front of three nodes, run with the shipped configuration
/// (`deploy/haproxy.cfg`, every address from the environment): the line protocol
/// with PROXY v2 headers, a frontend per node (where `moved` points) and the page in
/// HTTP mode with `X-Forwarded-For`. Ports are picked free at once; the nodes are
/// started by the caller on them (``nodeArguments(_:)``). Stopped on `deinit`.
public final class LoadBalancer: @unchecked Sendable {
    /// One node's listeners, as HAProxy reaches them.
    public struct Node: Sendable {
        public let lines: Int
        public let web: Int
        public let operations: Int
        /// The per-node frontend: what the node advertises (`moved`).
        public let frontend: Int
    }

    /// Where clients connect for the line protocol.
    public let lines: Int
    /// Where browsers connect (the page and `/ws`).
    public let web: Int
    /// The three nodes' ports.
    public let nodes: [Node]
    private let process = Process()

    /// The shipped configuration, found from this file's place in the repository.
    public static var configuration: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("deploy/haproxy.cfg").path
    }

    /// Whether `haproxy` is installed (`./dev setup` installs it).
    public static var isInstalled: Bool { FileManager.default.isExecutableFile(atPath: "/usr/sbin/haproxy") }

    /// Starts HAProxy on free ports, for three nodes not started yet; its log goes to `logFile`.
    public init(logFile: String? = nil) throws {
        lines = try ServerProcess.freePort()
        web = try ServerProcess.freePort()
        nodes = try (0..<3).map { _ in
            Node(
                lines: try ServerProcess.freePort(), web: try ServerProcess.freePort(), operations: try ServerProcess.freePort(),
                frontend: try ServerProcess.freePort())
        }
        var environment = ProcessInfo.processInfo.environment
        environment["VIEWLINE_LB_LINES"] = "127.0.0.1:\(lines)"
        environment["VIEWLINE_LB_WEB"] = "127.0.0.1:\(web)"
        for (index, node) in nodes.enumerated() {
            environment["VIEWLINE_LB_NODE\(index)"] = "127.0.0.1:\(node.frontend)"
            environment["VIEWLINE_NODE\(index)_LINES"] = "127.0.0.1:\(node.lines)"
            environment["VIEWLINE_NODE\(index)_WEB"] = "127.0.0.1:\(node.web)"
            environment["VIEWLINE_NODE\(index)_OPS_HOST"] = "127.0.0.1"
            environment["VIEWLINE_NODE\(index)_OPS_PORT"] = "\(node.operations)"
        }
        process.executableURL = URL(fileURLWithPath: "/usr/sbin/haproxy")
        process.arguments = ["-db", "-f", Self.configuration]
        process.environment = environment
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        process.standardError = ServerProcess.errors(to: logFile)
        try process.run()
        // Listening once its frontend accepts.
        let deadline = ContinuousClock.now + .seconds(10)
        while (try? LineClient(port: lines)) == nil {
            guard ContinuousClock.now < deadline, process.isRunning else {
                process.terminate()
                throw LineClient.Failure(description: "haproxy did not start (see its log)")
            }
            Thread.sleep(forTimeInterval: 0.05)
        }
    }

    /// The arguments node `index` runs with behind this proxy: its own ports, the
    /// proxy trusted (it connects from 127.0.0.1), its frontend advertised.
    public func nodeArguments(_ index: Int) -> [String] {
        let node = nodes[index]
        return [
            "--port", "\(node.lines)", "--web-port", "\(node.web)", "--metrics-port", "\(node.operations)",
            "--trusted-proxy", "127.0.0.1", "--advertise", "127.0.0.1:\(node.frontend)",
        ]
    }

    deinit {
        process.terminate()
        process.waitUntilExit()
    }
}
