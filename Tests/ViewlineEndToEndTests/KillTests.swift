import Foundation
import Synchronization
import Testing
import ViewlineTestSupport

#if canImport(Glibc)
    import Glibc
#endif

/// Nothing acknowledged is ever lost: SIGKILL the server at random moments while
/// clients write drafts, restart it on the same database, and check that every
/// user's pending draft is the last one acknowledged (or the one in flight at the
/// kill, which may or may not have made it). `VIEWLINE_KILLS` sets the number of
/// kills (CI runs a few; `VIEWLINE_KILLS=200 ./dev test` for the full run).
@Suite(.blocksItsThread) struct KillTests {
    static let kills = ProcessInfo.processInfo.environment["VIEWLINE_KILLS"].flatMap(Int.init) ?? 12
    static let users = (1...4).map { ("writer\($0)", "secret-\($0)") }

    /// What one writer knows of its drafts: the last one acknowledged, and those
    /// sent after it without a reply (each may or may not have been stored).
    struct Writes { var acknowledged: String?; var unconfirmed: [String] = [] }

    @Test(.timeLimit(.minutes(10))) func acknowledgedDraftsSurviveRandomSIGKILLs() throws {
        let database = temporaryPath("kills.sqlite")
        let usersFile = temporaryPath("users.json")
        let entries = Self.users.map { #"{"user":"\#($0.0)","password":"\#($0.1)"}"# }
        try "[\(entries.joined(separator: ","))]".write(toFile: usersFile, atomically: true, encoding: .utf8)
        var expected: [String: Writes] = [:]
        let acknowledgedCount = Atomic<Int>(0)
        var generator = SystemRandomNumberGenerator()
        for round in 0..<Self.kills {
            let server = try startServer(["--users", usersFile], database: database)
            // Every draft acknowledged before the last kill is there now.
            for (user, password) in Self.users {
                let client = try connect(server)
                #expect(try client.command("login \(user) \(password)").isOK)
                let text = try client.command("state draft")["result"]?["state"]?["text"]?.stringValue
                if let writes = expected[user], let acknowledged = writes.acknowledged {
                    #expect(
                        text == acknowledged || writes.unconfirmed.contains(text ?? ""),
                        "round \(round): \(user) has \(text ?? "nothing"), acknowledged \(acknowledged)")
                }
            }
            // Writers: one connection per user, one draft after another.
            let results = Mutex<[String: Writes]>(expected)
            let port = server.port
            let threads = Self.users.map { user, password in
                Thread {
                    guard let client = try? LineClient(port: port), (try? client.next()) != nil,
                        (try? client.command("login \(user) \(password)"))?.isOK == true
                    else { return }
                    for n in 0..<100_000 {
                        let text = "\(user) round \(round) draft \(n)"
                        results.withLock { $0[user, default: Writes()].unconfirmed.append(text) }
                        guard let reply = try? client.command("draft \(text)"), reply.isOK else { return }
                        acknowledgedCount.add(1, ordering: .relaxed)
                        results.withLock { $0[user] = Writes(acknowledged: text) }
                    }
                }
            }
            let before = acknowledgedCount.load(ordering: .relaxed)
            threads.forEach { $0.start() }
            // The kill comes at a random moment once the writers are writing (logging in
            // hashes a password: on a busy machine that alone can outlast a short delay).
            let writing = ContinuousClock.now + .seconds(10)
            while acknowledgedCount.load(ordering: .relaxed) - before < Self.users.count, ContinuousClock.now < writing {
                usleep(2_000)
            }
            usleep(UInt32.random(in: 0...130_000, using: &generator))
            server.signal(SIGKILL)
            _ = try server.waitForExit()
            while threads.contains(where: { !$0.isFinished }) { usleep(5_000) }
            expected = results.withLock { $0 }
        }
        // Writers got drafts in before every kill (else the test proves nothing).
        #expect(acknowledgedCount.load(ordering: .relaxed) >= Self.kills * Self.users.count)
    }
}
