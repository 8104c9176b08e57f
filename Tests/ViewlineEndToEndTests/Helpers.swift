import Foundation
import ViewlineProtocol
import ViewlineTestSupport

/// A fresh server process with an in-memory database unless told otherwise.
func startServer(_ arguments: [String] = [], admin: Bool = true, database: String = ":memory:") throws -> ServerProcess {
    try ServerProcess(["--db", database, "--demo"] + (admin ? ["--admin"] : []) + arguments)
}

/// A connected client whose welcome has been read.
func connect(_ server: ServerProcess) throws -> LineClient {
    let client = try LineClient(port: server.port)
    _ = try client.next()
    return client
}

func temporaryPath(_ name: String) -> String {
    NSTemporaryDirectory() + "viewline-e2e-\(UUID().uuidString)-\(name)"
}

extension JSON {
    var errorCode: String? { self["error"]?["code"]?.stringValue }
    var isOK: Bool { self["ok"] == true }
    var type: String? { self["type"]?.stringValue }
}
