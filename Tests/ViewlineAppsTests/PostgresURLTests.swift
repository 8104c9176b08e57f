import Logging
import PostgresNIO
import Testing
import ViewlineTestSupport

@testable import ViewlinePostgres

/// A node's PostgreSQL URL, as libpq spells it: one server, or a cluster's members
/// listed in order, of which a node uses the primary.
@Suite struct PostgresURLTests {
    @Test func oneServerReadsAsBefore() throws {
        let url = try PostgresURL("postgres://viewline:secret@db.internal:6432/app?sslmode=disable")
        #expect(url.servers == [.init(host: "db.internal", port: 6432)])
        #expect((url.host, url.port, url.user, url.password, url.database) == ("db.internal", 6432, "viewline", "secret", "app"))
        #expect(!url.requiresPrimary)
        #expect(url.redacted == "postgres://viewline:***@db.internal:6432/app")
    }

    @Test func severalServersAreTriedInOrderForTheirPrimary() throws {
        let url = try PostgresURL("postgresql://viewline:secret@db0:5433,db1,[fd00::2]:5434/app?sslmode=require")
        #expect(url.servers.map(\.description) == ["db0:5433", "db1:5432", "[fd00::2]:5434"])
        #expect(url.requiresPrimary)
        #expect(url.database == "app" && url.password == "secret" && url.sslMode == "require")
        #expect(url.redacted == "postgres://viewline:***@db0:5433,db1:5432,[fd00::2]:5434/app")
        // An IPv6 literal first, as URLComponents reads it (with its brackets).
        #expect(try PostgresURL("postgres://u@[::1]:5433,db1/app").servers.first == .init(host: "::1", port: 5433))
        #expect(try PostgresURL("postgres://u@a,b/app?target_session_attrs=primary").requiresPrimary)
        #expect(try PostgresURL("postgres://u@a/app?target_session_attrs=read-write").requiresPrimary)
    }

    @Test func aURLANodeCannotWriteThroughIsRefused() {
        for (text, reason) in [
            ("postgres://u@a,b/app?target_session_attrs=any", "read-write or primary with several servers"),
            ("postgres://u@a/app?target_session_attrs=standby", "a node writes"),
            ("postgres://u@a,b:x/app", "server 2 of the URL's list is not host[:port]"),
            ("postgres://u@a,/app", "is not host[:port]"),
            ("postgres://u:p,ss w/rd@a/app", "must be percent-encoded"),
            ("postgres://u@,b/app", "begins with an empty server"),
            ("postgres://u@a,b/app?host=/run/postgresql", "names one server's socket"),
            ("postgres:///app?host=a,b&port=1,2", "?host= names a Unix socket's directory"),
            ("postgres://u@a/app?port=5433", "?port= is not read"),
            ("postgres://u@a:0/app", "port 0 is not a TCP port"),
            ("postgres://u@a/app?target_session_attrs=", "not \"\": a node writes"),
            ("mysql://u:secret@a/app", "is not a postgres://"),
            ("postgres://u@a,::1/app", "server 2 of the URL's list is not host[:port]"),
            ("postgres://u@a:5432,a/app", "lists a server twice"),
        ] {
            do {
                _ = try PostgresURL(text)
                Issue.record("\(text) was taken")
            } catch {
                #expect(error is PostgresURL.Invalid && "\(error)".contains(reason), "\(text): \(error)")
                #expect(!"\(error)".contains("secret") && !"\(error)".contains("ss w"))
            }
        }
    }

    /// The first server listed does not answer (nothing listens there); the second is
    /// the test's PostgreSQL, a primary: the health watch finds it, and calls go to it.
    @Test func aNodeUsesTheServerThatIsThePrimary() async throws {
        let server = PostgresServer.shared
        let single = try PostgresURL(server.url(database: try await server.createDatabase()))
        let listed = try PostgresURL(
            "postgres://\(single.user)@127.0.0.1:1,\(single.host):\(single.port)/\(single.database)?sslmode=disable")
        let database = DatabaseAccess(url: listed, operationTimeout: .seconds(20), logger: Logger(label: "test"))
        database.runInTask()
        defer { database.close() }
        // Within 300 s: the parallel suite can starve a connect's continuation past the
        // watch's 4 s for a while (the watch then tries again).
        let clock = ContinuousClock()
        let deadline = clock.now + .seconds(300)
        while database.health.primary != 1 && clock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
        #expect(database.health.primary == 1)
        var answer: [Int] = []
        while answer.isEmpty && clock.now < deadline {
            answer = (try? await database.collect("SELECT 40 + 2") { try $0.decode(Int.self) }) ?? []
        }
        #expect(answer == [42])

        let (connection, index, _) = try await listed.connectToPrimary(id: 9, within: .seconds(60), logger: Logger(label: "test"))
        #expect(index == 1)
        let state = try await connection.serverState(within: .seconds(60), logger: Logger(label: "test"))
        #expect(!state.standby && state.timeline >= 1)
        try await connection.close()
    }

    /// No server of the list is a primary: the error names each one's reason.
    @Test func noPrimaryNamesEachServersReason() async throws {
        let listed = try PostgresURL("postgres://u@127.0.0.1:1,127.0.0.1:2/app?sslmode=disable")
        do {
            _ = try await listed.connectToPrimary(id: 9, within: .seconds(2), logger: Logger(label: "test"))
            Issue.record("connected to a server that is not there")
        } catch let error as PostgresURL.NoPrimary {
            #expect(error.description.contains("127.0.0.1:1: "))
            #expect(error.description.contains("127.0.0.1:2: "))
        }
    }
}

/// Which of several primaries a node writes to, and what a synchronous standby list
/// lets a deposed primary do.
@Suite struct ClusterMembersTests {
    /// Two servers on the same timeline (two clusters, or a split brain): every node
    /// uses the same one, whatever order its URL lists them in. Here one PostgreSQL
    /// named twice (`127.0.0.1` and `localhost`) is such a pair.
    @Test func twinsAreChosenInOneOrderWhateverTheListsOrder() async throws {
        #expect(PostgresURL.Server(host: "a", port: 2).precedes(.init(host: "B", port: 1)))
        #expect(PostgresURL.Server(host: "a", port: 1).precedes(.init(host: "a", port: 2)))
        #expect(!PostgresURL.Server(host: "b", port: 1).precedes(.init(host: "A", port: 9)))
        let single = try PostgresURL(PostgresServer.shared.url(database: "postgres"))
        for (list, chosen) in [("127.0.0.1:\(single.port),localhost:\(single.port)", 0), ("localhost:\(single.port),127.0.0.1:\(single.port)", 1)] {
            let url = try PostgresURL("postgres://\(single.user)@\(list)/postgres?sslmode=disable")
            let (connection, index, _) = try await url.connectToPrimary(id: 9, within: .seconds(60), logger: Logger(label: "test"))
            try await connection.close()
            #expect(index == chosen, "\(list)")
        }
    }

    /// Every server answers and none is on the newest timeline a node saw, not even as
    /// a standby (the promoted member was rebuilt from the old primary): the node is
    /// told which older timeline's primary is the cluster's now. While one server does
    /// not answer, it is not (that one may be the promoted member).
    @Test func aNewestTimelineNoServerHoldsAnyMoreIsToldApart() async throws {
        let single = try PostgresURL(PostgresServer.shared.url(database: "postgres"))
        let logger = Logger(label: "test")
        let both = try PostgresURL("postgres://\(single.user)@127.0.0.1:\(single.port),localhost:\(single.port)/postgres?sslmode=disable")
        let oneGone = try PostgresURL("postgres://\(single.user)@127.0.0.1:\(single.port),127.0.0.1:1/postgres?sslmode=disable")
        do {
            _ = try await both.connectToPrimary(id: 9, within: .seconds(60), notOlderThan: 99, logger: logger)
            Issue.record("a primary older than the newest timeline seen was taken")
        } catch let error as PostgresURL.NoPrimary {
            #expect(error.newestTimelineGone.map { $0 >= 1 && $0 < 99 } == true)
            #expect(error.description.contains("deposed primary"))
        }
        // What a standby's pg_wal holds is read as its timeline too (a superuser here).
        let (connection, _, timeline) = try await both.connectToPrimary(id: 9, within: .seconds(60), logger: logger)
        let held = try await connection.newestWALTimeline(within: .seconds(60), logger: logger)
        try await connection.close()
        #expect(held == timeline)
        do {
            _ = try await oneGone.connectToPrimary(id: 9, within: .seconds(60), notOlderThan: 99, logger: logger)
            Issue.record("a primary older than the newest timeline seen was taken")
        } catch let error as PostgresURL.NoPrimary {
            #expect(error.newestTimelineGone == nil)
        }
    }

    /// A commit waits for N standbys; when more are named (or `*`), a deposed primary
    /// still finds N to confirm its commits, and a node warns at start.
    @Test func synchronousStandbyNamesSaysHowManyMayConfirm() {
        #expect(PostgresSessionDirectory.synchronousStandbys("") == nil)
        for (setting, waitsFor, candidates) in [
            ("\"b\"", 1, 1 as Int?), ("b, c", 1, 2), ("*", 1, nil), ("FIRST 1 (b, c)", 1, 2), ("ANY 2 (b, c, d)", 2, 3),
            ("2 (b, c)", 2, 2), ("ANY 1 (*)", 1, nil),
        ] {
            let parsed = PostgresSessionDirectory.synchronousStandbys(setting)
            #expect(parsed?.waitsFor == waitsFor && parsed?.candidates == candidates, "\(setting)")
        }
    }
}

/// A server fenced read-only (`default_transaction_read_only`, as an old primary is
/// fenced) is no primary, as libpq's `target_session_attrs=read-write` has it.
@Suite struct ReadOnlyServerTests {
    @Test func aServerThatIsReadOnlyByDefaultIsPassedOver() async throws {
        let server = PostgresServer.shared
        let single = try PostgresURL(server.url(database: try await server.createDatabase()))
        let logger = Logger(label: "test")
        let admin = try await single.connect(server: 0, id: 9, within: .seconds(60), logger: logger)
        try await admin.query(
            PostgresQuery(unsafeSQL: "ALTER DATABASE \"\(single.database)\" SET default_transaction_read_only = on"), logger: logger
        ).collect()
        try await admin.close()
        let fenced = try PostgresURL(
            "postgres://\(single.user)@\(single.host):\(single.port)/\(single.database)?sslmode=disable&target_session_attrs=read-write")
        do {
            _ = try await fenced.connectToPrimary(id: 9, within: .seconds(60), logger: logger)
            Issue.record("a read-only server was taken for a primary")
        } catch let error as PostgresURL.NoPrimary {
            #expect(error.description.contains("a standby, or read-only"))
        }
    }
}
