import Foundation
import Testing
import ViewlineProtocol
import ViewlineTestSupport

/// A rolling deploy of a cluster: nodes of release 1 of the seed apps replaced one at
/// a time by release 2 (`--seed-release 2`: the search view records its state in a
/// new form, version 2, migrated from 1), and rolled back. Two releases own sessions
/// side by side; no session is lost, no view reset, and a record of release 2 is
/// never read (or overwritten) by a node of release 1.
@Suite(.blocksItsThread) struct RollingDeployTests {
    let server = PostgresServer.shared

    func node(_ database: String, release: Int) throws -> ServerProcess {
        try ServerProcess(["--postgres", server.url(database: database), "--admin", "--demo", "--seed-release", "\(release)"])
    }

    /// A session on `node` that searched for `query`, and its token.
    func session(on node: ServerProcess, searching query: String) throws -> String {
        let client = try LineClient(port: node.port)
        let token = try #require(try client.next()["token"]?.stringValue)
        #expect(try client.command("search \(query)").isOK)
        #expect(try client.command("wait").isOK)
        return token
    }

    /// Stops `node` cleanly (its records written, its sessions handed over at once).
    func stop(_ node: ServerProcess) throws {
        node.signal(SIGTERM)
        _ = try node.waitForExit(timeout: .seconds(30))
    }

    /// `attach TOKEN` on `node`, again while the answer is `unavailable` (a node that
    /// runs the release that reads the record may be starting): the last answer.
    func attach(_ token: String, on node: ServerProcess, for time: Duration = .seconds(15)) throws -> (JSON, LineClient) {
        let deadline = ContinuousClock.now + time
        while true {
            let client = try connect(node)
            let answer = try client.command("attach \(token)")
            if answer.errorCode != "unavailable" || ContinuousClock.now > deadline { return (answer, client) }
            Thread.sleep(forTimeInterval: 0.3)
        }
    }

    /// The search a client attached with a snapshot shows.
    func shownQuery(_ client: LineClient) throws -> JSON? {
        try client.read(until: { $0["view"] == "search" }).last?["state"]?["query"]
    }

    @Test func aRollingUpgradeMigratesSessionsAndARollbackNeverResetsThem() throws {
        let database = try server.createDatabase()
        let a = try node(database, release: 1)
        let b = try node(database, release: 1)
        let onA = try session(on: a, searching: "pizza")
        let onB = try session(on: b, searching: "ramen")

        // Upgrade: a is replaced by a node of release 2, which migrates a's session.
        try stop(a)
        let a2 = try node(database, release: 2)
        var (answer, client) = try attach(onA, on: a2)
        #expect(answer["result"]?["snapshot"] == true, "\(answer)")
        #expect(try shownQuery(client) == "pizza")
        #expect(try client.command("search pizza al taglio").isOK)
        #expect(try client.command("wait").isOK)
        // The other release owns its own sessions meanwhile: b serves its session, and
        // sends a2's to a2.
        (answer, _) = try attach(onB, on: b)
        #expect(answer.isOK, "\(answer)")
        (answer, _) = try attach(onA, on: b)
        #expect(answer.errorCode == "moved" && answer["error"]?["address"] == .string("127.0.0.1:\(a2.port)"), "\(answer)")
        // Both releases are in the directory, each with its record versions (as b
        // listed the live nodes at its last lease renewal).
        let admin = try connect(b)
        var nodes: [JSON] = []
        let deadline = ContinuousClock.now + .seconds(10)
        repeat {
            nodes = try admin.command("info")["result"]?["cluster"]?["nodes"]?.arrayValue ?? []
            if nodes.contains(where: { $0["release"] == "viewline/1.3 seed-apps/2" }) { break }
            Thread.sleep(forTimeInterval: 0.2)
        } while ContinuousClock.now < deadline
        let releases = Set(nodes.compactMap { $0["release"]?.stringValue })
        #expect(releases == ["viewline/1.3", "viewline/1.3 seed-apps/2"], "\(nodes)")
        #expect(nodes.contains { $0["release"] == "viewline/1.3 seed-apps/2" && $0["records"]?["search"] == 2 })
        #expect(try connect(a2).command("inspect")["result"]?["node"]?["release"] == "viewline/1.3 seed-apps/2")

        // Rolled back while a2 goes: no node left reads the session's record, so b
        // refuses it with `unavailable` and a retry (the record is kept as written).
        try stop(a2)
        (answer, _) = try attach(onA, on: b, for: .zero)
        #expect(answer.errorCode == "unavailable" && answer["error"]?["retryAfter"] != nil, "\(answer)")
        // A node of release 2 comes back: b sends the client there, and the session is
        // as release 2 left it (never reset, never overwritten by release 1).
        let c = try node(database, release: 2)
        (answer, _) = try attach(onA, on: b)
        #expect(answer.errorCode == "moved" && answer["error"]?["address"] == .string("127.0.0.1:\(c.port)"), "\(answer)")
        (answer, client) = try attach(onA, on: c)
        #expect(answer["result"]?["snapshot"] == true, "\(answer)")
        #expect(try shownQuery(client) == "pizza al taglio")

        // The upgrade finishes: b goes, and its session comes back on c, migrated.
        try stop(b)
        (answer, client) = try attach(onB, on: c)
        #expect(answer["result"]?["snapshot"] == true, "\(answer)")
        #expect(try shownQuery(client) == "ramen")
    }
}
