import Foundation
import Testing
import ViewlineClient
import ViewlineTestSupport

/// docs/swift-client.md's model block is `SearchScreen.swift`, verbatim, and works:
/// a search shows places, a log-in goes through, an alert reaches the screen.
@Suite struct SwiftClientGuideTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    @Test func theGuidesModelBlockIsTheFileTheTestsBuild() throws {
        let guide = try String(contentsOf: Self.root.appendingPathComponent("docs/swift-client.md"), encoding: .utf8)
        let blocks = guide.components(separatedBy: "```swift\n").dropFirst().map { $0.components(separatedBy: "```")[0] }
        let built = try String(contentsOf: Self.root.appendingPathComponent("Tests/ViewlineClientTests/SearchScreen.swift"), encoding: .utf8)
        #expect(blocks.contains(built), "docs/swift-client.md's SearchScreen block and Tests/ViewlineClientTests/SearchScreen.swift differ")
    }

    @Test(.timeLimit(.minutes(1))) @MainActor func theGuidesScreenSearchesLogsInAndShowsAnAlert() async throws {
        let server = try ServerProcess(["--db", ":memory:", "--demo", "--admin"])
        let client = try await ViewlineClient.connect(to: .tcp(port: server.port))
        let screen = SearchScreen(model: await ViewlineModel(client: client))
        try await screen.search("thai")
        while screen.isLoading || screen.places.isEmpty { try await Task.sleep(for: .milliseconds(10)) }
        #expect(screen.places.count > 1 && screen.places.map(\.rating) == screen.places.map(\.rating).sorted(by: >))
        try await screen.logIn(user: "alice", password: "wonderland")
        // A failing save asks again: the alert reaches the screen, and answering it takes it down.
        try await client.send("draft notes")
        try await client.send("fault save 1 disk full")
        try await client.send("save")
        while screen.alert == nil { try await Task.sleep(for: .milliseconds(10)) }
        #expect(screen.alert?.message.contains("disk full") == true)
        try await screen.alert?.cancel()
        while screen.alert != nil { try await Task.sleep(for: .milliseconds(10)) }
        await client.close()
    }

    @Test func theREADMEsSwiftExampleRuns() async throws {
        let readme = try String(contentsOf: Self.root.appendingPathComponent("README.md"), encoding: .utf8)
        let server = try ServerProcess(["--db", ":memory:", "--demo"])
        // The README's lines, with the port the test's server has.
        let client = try await ViewlineClient.connect(to: .tcp(port: server.port))
        try await client.send("search thai food")
        let search = try await client.waitForDisplay("search") { $0["loading"] == false }
        #expect((search["results"]?.arrayValue?.count ?? 0) > 0)
        let model = await ViewlineModel(client: client)
        #expect(await model.views["search"] == search)
        for line in [
            "let client = try await ViewlineClient.connect(to: .tcp(port: 7878))",
            "try await client.send(\"search thai food\")",
            "let search = try await client.waitForDisplay(\"search\") { $0[\"loading\"] == false }",
            "let model = await ViewlineModel(client: client)",
        ] {
            #expect(readme.contains(line), "README.md no longer says: \(line)")
        }
        await client.close()
    }

    /// The guide's "Waiting for what a command causes" block runs as written (the
    /// save made to fail once, so its alert comes), and says what this test runs.
    @Test(.timeLimit(.minutes(1))) func theGuidesSafeWaitRuns() async throws {
        let guide = try String(contentsOf: Self.root.appendingPathComponent("docs/swift-client.md"), encoding: .utf8)
        let server = try ServerProcess(["--db", ":memory:", "--demo", "--admin"])
        let client = try await ViewlineClient.connect(to: .tcp(port: server.port))
        try await client.send("login alice wonderland")
        try await client.send("draft notes")
        try await client.send("fault save 1 disk full")
        // The guide's lines:
        try await client.send("search thai food")
        let results = try await client.waitForDisplay("search") { $0["query"] == "thai food" && $0["loading"] == false }
        try await client.send("save")
        let alert = try await client.waitForAlert()
        try await alert.confirm()
        #expect((results["results"]?.arrayValue?.count ?? 0) > 0 && alert.message.contains("disk full"))
        #expect(await client.presentedAlert == nil)
        for line in [
            "try await client.send(\"search thai food\")",
            "let results = try await client.waitForDisplay(\"search\") { $0[\"query\"] == \"thai food\" && $0[\"loading\"] == false }",
            "try await client.send(\"save\")",
            "let alert = try await client.waitForAlert()",
            "try await alert.confirm()",
        ] {
            #expect(guide.contains(line), "docs/swift-client.md no longer says: \(line)")
        }
        await client.close()
    }
}
