import Foundation
import Testing
import ViewlineClient

/// The built `todo-server` driven by the Swift client, as an app would drive it: no
/// command table, the list decoded into the app's own type, the undo alert answered.
@Suite struct TodosFromSwiftTests {
    /// The app's own types for the `todos` view.
    struct TodoList: Decodable {
        struct Item: Decodable, Equatable {
            var id: Int
            var title: String
            var done: Bool
        }

        var items: [Item]
        var saving: Bool
    }

    /// Starts the todo-server built beside this test in a directory of its own (it
    /// saves `todos.json` there); returns it and its port.
    func startServer() throws -> (Process, Int) {
        let executable = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        var products = executable.deletingLastPathComponent()
        if products.lastPathComponent.hasSuffix(".xctest") { products = products.deletingLastPathComponent() }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("todos-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let server = Process()
        server.executableURL = products.appendingPathComponent("todo-server")
        server.arguments = ["0", "0"]
        server.currentDirectoryURL = directory
        let output = Pipe()
        server.standardOutput = output
        server.standardError = FileHandle.nullDevice
        try server.run()
        var line: [UInt8] = []
        while let byte = output.fileHandleForReading.readData(ofLength: 1).first, byte != 0x0A { line.append(byte) }
        let text = String(decoding: line, as: UTF8.self)
        guard text.hasPrefix("listening on "), let port = text.split(separator: ":").last.flatMap({ Int($0) }) else {
            server.terminate()
            throw CocoaError(.fileReadUnknown)
        }
        return (server, port)
    }

    @Test(.timeLimit(.minutes(1))) func aListIsKeptAndAnUndoneDeleteComesBack() async throws {
        let (server, port) = try startServer()
        defer { server.terminate() }
        let client = try await ViewlineClient.connect(to: .tcp(port: port))
        #expect(try await client.send("add buy milk")["id"] == 1)
        #expect(try await client.send("add", arguments: ["title": "walk the dog"])["id"] == 2)
        try await client.send("done 1")
        try await client.waitForDisplay("todos") { $0["saving"] == false && $0["items"]?.arrayValue?.first?["done"] == true }
        let list = try await client.state("todos", as: TodoList.self)
        #expect(list.items == [.init(id: 1, title: "buy milk", done: true), .init(id: 2, title: "walk the dog", done: false)])

        // Deleting asks whether to undo: Undo puts the item back where it was.
        let events = await client.events()
        try await client.send("delete 1")
        var asked: Alert?
        for await event in events {
            if case .alert(let alert) = event {
                asked = alert
                break
            }
        }
        let alert = try #require(asked)
        #expect(alert.message == "Deleted \"buy milk\". Undo?")
        try await alert.confirm()
        try await client.waitForDisplay("todos") { $0["items"]?.arrayValue?.count == 2 }
        #expect(try await client.state("todos", as: TodoList.self).items.map(\.title) == ["buy milk", "walk the dog"])
        await client.close()
    }
}
