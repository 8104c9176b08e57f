import Foundation
import Synchronization
import Testing
import ViewlineTestSupport
import ViewlineTesting

@testable import ViewlineKit

/// A view-model with a secret argument, for what the inspector must never show.
enum Vault: ViewModel {
    struct State: Codable, Sendable, Equatable {
        var opened = 0
    }

    static let view = "vault"
    static let stateSummary = "{opened}"
    static func initialState(_ services: Services) -> State { State() }

    static let commands: [Command<Vault>] = [
        Command("open", summary: "Open the vault.", arguments: [.word("user"), .word("password", secure: true)]) { session, _ in
            session.update { $0.opened += 1 }
            return ["opened": true]
        }
    ]
}

/// `inspect`: the node's sessions, and one session's timeline, events and states at
/// any rev the event log still reaches — with no secret in the clear.
@Suite struct InspectTests {
    func application(admin: Bool = true, inspectorToken: String? = nil) -> Application {
        var services = Services()
        services.adder = FakeAdder()
        var configuration = ServerConfiguration()
        configuration.admin = admin
        configuration.inspectorToken = inspectorToken
        return Application([Counter.self, Vault.self], services: services, configuration: configuration)
    }

    /// The replies to `lines`, sent in turn from one connection of `session`.
    func replies(to lines: [String], on session: Session, connection: Int = 9) async throws -> [Result<JSON, ProtocolError>] {
        let replies = Mutex<[Result<JSON, ProtocolError>]>([])
        await session.connect(
            SessionConnection(
                send: { message in if case .reply(_, let result) = message { replies.withLock { $0.append(result) } } }, close: {}),
            as: connection)
        for line in lines {
            let request = try #require(RequestDecoder.decode(line: line, commands: session.application.commands)).get()
            _ = await session.handle(request, from: connection)
        }
        await session.detach(connection)
        return replies.withLock { $0 }
    }

    func inspect(_ line: String, on session: Session) async throws -> JSON {
        let replies = Mutex<[Result<JSON, ProtocolError>]>([])
        await session.connect(
            SessionConnection(
                send: { message in if case .reply(_, let result) = message { replies.withLock { $0.append(result) } } }, close: {}),
            as: 9)
        let request = try #require(RequestDecoder.decode(line: line, commands: session.application.commands)).get()
        _ = await session.handle(request, from: 9)
        await session.detach(9)
        return try #require(try replies.withLock { $0 }.last?.get())
    }

    @Test func theListShowsEachSessionAndWhatItLastDid() async throws {
        let application = application()
        let watched = Session(id: "s1", application: application, output: { _ in })
        let admin = Session(id: "s2", application: application, output: { _ in })
        for session in [watched, admin] { _ = try application.sessions.register(session).get() }
        _ = await watched.send("increment 3")
        let list = try await inspect("inspect", on: admin)
        let sessions = try #require(list["sessions"]?.arrayValue)
        #expect(list["count"] == 2 && list["recording"] == true)
        let row = try #require(sessions.first { $0["session"] == "s1" })
        #expect(row["rev"] == 1 && row["lastCommand"] == "increment" && row["views"] == ["counter"])
        // The issue's spelling lists them too: no session is called `sessions`.
        let spelled = try await inspect("inspect sessions", on: admin)
        #expect(spelled["count"] == 2 && spelled["sessions"]?.arrayValue?.count == 2)
    }

    @Test func aSessionsStatesAtAnEarlierRevAndWhatCameAfter() async throws {
        let application = application()
        let watched = Session(id: "s1", application: application, output: { _ in })
        let admin = Session(id: "s2", application: application, output: { _ in })
        for session in [watched, admin] { _ = try application.sessions.register(session).get() }
        _ = await watched.send("increment 1")  // rev 1: count 1
        _ = await watched.send("increment 2")  // rev 2: count 3
        _ = await watched.send("label hello")  // rev 3
        let atOne = try await inspect("inspect s1 1", on: admin)
        #expect(atOne["states"]?["counter"]?["count"] == 1)
        #expect(atOne["states"]?["counter"]?["label"] == "")
        #expect(atOne["events"]?.arrayValue?.compactMap { $0["rev"]?.intValue } == [2, 3])
        let commands = atOne["timeline"]?.arrayValue?.filter { $0["kind"] == "command" }.compactMap { $0["command"]?.stringValue }
        #expect(commands == ["increment", "label"])
        let now = try await inspect("inspect s1", on: admin)
        #expect(now["oldestRev"] == 0 && now["from"] == 0)
        #expect(now["states"]?["counter"]?["count"] == 0)  // nothing displayed yet at rev 0: the initial state
        #expect(try await inspect("inspect s1 3", on: admin)["states"]?["counter"]?["count"] == 3)
    }

    @Test func aSecretArgumentIsNeverRecordedInTheClear() async throws {
        let application = application()
        let watched = Session(id: "s1", application: application, output: { _ in })
        let admin = Session(id: "s2", application: application, output: { _ in })
        for session in [watched, admin] { _ = try application.sessions.register(session).get() }
        _ = await watched.send("open alice wonderland-secret")
        _ = await watched.send(#"confirm a9 user=bob password=hunter2-secret"#)  // no alert: refused, still recorded
        let inspection = try await inspect("inspect s1", on: admin)
        let text = inspection.encoded
        #expect(!text.contains("wonderland-secret") && !text.contains("hunter2-secret"))
        let open = try #require(inspection["timeline"]?.arrayValue?.first { $0["command"] == "open" })
        #expect(open["arguments"] == ["user": "alice", "password": "•••"])
    }

    @Test func aTokenGivenToAttachIsASecretToo() async throws {
        let application = application()
        let watched = Session(id: "s1", application: application, output: { _ in })
        let admin = Session(id: "s2", application: application, output: { _ in })
        for session in [watched, admin] { _ = try application.sessions.register(session).get() }
        _ = await watched.send("attach \(admin.token) 3")
        let inspection = try await inspect("inspect s1", on: admin)
        #expect(!inspection.encoded.contains(admin.token))
        let attach = try #require(inspection["timeline"]?.arrayValue?.first { $0["command"] == "attach" })
        #expect(attach["arguments"] == ["token": "•••", "lastRev": 3])
    }

    @Test func aTimelineCountsAgainstTheServersEventLogBudget() async throws {
        let budget = EventLogBudget(limit: 64 << 10)
        let timeline = SessionTimeline(maximumBytes: 1 << 20, budget: budget)
        let many = JSON.object(JSONObject((0..<1000).map { (key: "f\($0)", value: JSON.string("x")) }))
        for rev in 0..<200 {
            timeline.record(
                .command(name: "confirm", arguments: Arguments(["fields": many]), connection: 1, failed: nil), rev: rev, at: .now,
                duration: nil)
        }
        // The budget is spent: the timeline keeps its newest entry and drops the rest.
        #expect(timeline.count <= SessionTimeline.maximumEntries && timeline.bytes <= 64 << 10 + 200_000)
        #expect(timeline.count < 200)
        let application = Application([Counter.self])
        let confirm = application.handler(for: Request(name: "confirm"))
        #expect(SessionTimeline.shown(Arguments(["fields": many]), of: confirm).json["fields"]?.objectValue?.pairs.count == 17)
        // A command the timeline has no declaration for shows nothing of its arguments.
        #expect(SessionTimeline.shown(Arguments(["user": "alice"]), of: nil) == Arguments(["user": "•••"]))
    }

    /// The ring keeps the newest entries in order, whether its slots or its bytes run
    /// out first, and as it grows.
    @Test func aTimelineKeepsItsNewestEntriesInOrder() {
        func record(_ count: Int, into timeline: SessionTimeline) {
            for rev in 0..<count {
                timeline.record(.command(name: "ping", arguments: Arguments(), connection: 1, failed: nil), rev: rev, at: .now, duration: .zero)
            }
        }
        let bySlots = SessionTimeline(maximumBytes: 1 << 20)
        record(300, into: bySlots)
        #expect(bySlots.entries(from: 0).map(\.rev) == Array(172..<300))
        // 116 bytes an entry: twenty fit, and the ring wraps inside its 32 slots.
        let byBytes = SessionTimeline(maximumBytes: 116 * 20)
        record(50, into: byBytes)
        #expect(byBytes.entries(from: 0).map(\.rev) == Array(30..<50) && byBytes.bytes == 116 * 20)
        #expect(byBytes.entries(from: 45).map(\.rev) == Array(45..<50) && byBytes.lastCommand?.rev == 49)
    }

    /// An entry is one cache line, and what it packs reads back as it was given: its
    /// kind, its size, its failure, and its duration to a microsecond (to a
    /// millisecond past a few seconds).
    @Test func aTimelineEntryFitsOneCacheLineAndReadsBackWhatItWasGiven() throws {
        #expect(MemoryLayout<SessionTimeline.Entry>.stride == 64)
        let timeline = SessionTimeline(maximumBytes: 1 << 20)
        let started = Moment.now
        timeline.record(.call(backend: "adder", failed: "the adder is down"), rev: 3, at: started, duration: .milliseconds(1500))
        timeline.record(
            .command(name: "search", arguments: Arguments(["query": "thai"]), connection: 2, failed: "badArgument"), rev: 4,
            at: started, duration: .microseconds(7))
        timeline.record(.connection(9, what: "attach"), rev: 5, at: started, duration: nil)
        // The path every command takes: a success without arguments, from its two moments.
        timeline.recordCommand(
            "ping", arguments: Arguments(), of: nil, connection: 4, failed: nil, rev: 6, causedEvents: false, from: started,
            to: Moment(nanoseconds: started.nanoseconds + 2_500))
        let entries = timeline.entries(from: 0)
        try #require(entries.count == 4)
        #expect(entries.map(\.what) == [.call, .command, .connection, .command])
        #expect(entries.map(\.failed) == ["the adder is down", "badArgument", nil, nil])
        #expect(entries.map(\.size) == [96 + 5 + 17, 112 + 6 + 11 + 32 + 5 + 16 + 4, 96 + 6, 112 + 4])
        let seconds = entries.map { SessionTimeline.seconds(nanoseconds: Double($0.duration)) }
        #expect(abs(seconds[0] - 1.5) < 1e-4 && abs(seconds[1] - 7e-6) < 1e-9 && entries[2].duration < 0)
        #expect(seconds[3] == 2.5e-6 && entries[3].name == "ping" && entries[3].arguments == nil && entries[3].connection == 4)
        // All four began at `started`: one offset from the timeline's start.
        #expect(Set(entries.map(\.at)).count == 1 && entries[0].at >= 0)
        #expect(entries[1].json(at: Date())["durationMs"]?.doubleValue.map { abs($0 - 0.007) < 1e-6 } == true)
        #expect(entries[1].connection == 2 && entries[1].arguments == ["query": "thai"] && entries[2].connection == 9)
    }

    /// A success run at once and again in a row with the same arguments — one
    /// connection, one rev, no event — is counted in the entry before it, up to 256
    /// runs, which then reads as its last run; anything else (another connection, an
    /// event, an error, other arguments, an awaiting command) is an entry of its own.
    @Test func aCommandRunAgainInARowIsOneEntryWithItsCount() throws {
        let timeline = SessionTimeline(maximumBytes: 1 << 20)
        let application = Application([Counter.self])
        let declared = try #require(application.handler(for: Request(name: "ping")))
        let start = Moment.now
        func ping(
            _ micros: Int64, after seconds: Int64 = 0, connection: Int = 1, rev: Int = 7, causedEvents: Bool = false, failed: String? = nil
        ) {
            let begun = Moment(nanoseconds: start.nanoseconds + seconds * 1_000_000_000)
            timeline.recordCommand(
                "ping", arguments: Arguments(), of: declared, connection: connection, failed: failed, rev: rev, causedEvents: causedEvents,
                from: begun, to: Moment(nanoseconds: begun.nanoseconds + micros * 1000))
        }
        ping(3)
        ping(9, after: 10)
        ping(4, after: 20)
        var entries = timeline.entries(from: 0)
        try #require(entries.count == 1)
        #expect(entries[0].repeats == 3 && entries[0].duration == 9_000 && entries[0].size == 112 + 4)
        #expect(entries[0].json(at: Date())["repeats"] == 3)
        // It reads as its last run (the list's "last active" comes from it).
        let first = try #require(timeline.lastCommand?.at)
        ping(1, after: 30)
        #expect(try #require(timeline.lastCommand?.at) - first == 10_000_000_000 && timeline.count == 1)
        ping(1, connection: 2)  // another connection
        ping(1, connection: 2, rev: 8)  // after an event
        ping(1, connection: 2, rev: 8, causedEvents: true)  // it caused one
        ping(1, connection: 2, rev: 9)  // so the next is at a new rev: a new entry
        ping(2, connection: 2, rev: 9)
        ping(1, connection: 2, rev: 9, failed: "unavailable")
        timeline.recordCommand(
            "state", arguments: Arguments(["view": "search"]), of: nil, connection: 2, failed: nil, rev: 9, causedEvents: false, from: start,
            to: start)
        timeline.recordCommand(
            "state", arguments: Arguments(["view": "search"]), of: nil, connection: 2, failed: nil, rev: 9, causedEvents: false, from: start,
            to: start)
        entries = timeline.entries(from: 0)
        #expect(entries.map(\.repeats) == [4, 1, 1, 1, 2, 1, 1, 1])
        #expect(entries.map(\.rev) == [7, 7, 8, 8, 9, 9, 9, 9])
        #expect(entries[1].json(at: Date())["repeats"] == nil)
        for _ in 0..<300 { ping(1, connection: 3, rev: 10) }
        #expect(timeline.entries(from: 10).map(\.repeats) == [256, 44])
        // The same arguments again are counted too; other arguments are another entry.
        let state = try #require(application.handler(for: Request(name: "state")))
        for view in ["counter", "counter", "counter", "search"] {
            timeline.recordCommand(
                "state", arguments: Arguments(["view": .string(view)]), of: state, connection: 3, failed: nil, rev: 10, causedEvents: false,
                from: start, to: start)
        }
        #expect(timeline.entries(from: 10).map(\.repeats) == [256, 44, 3, 1])
        #expect(timeline.entries(from: 10).last?.arguments == ["view": "search"])
        // An awaiting command (`end-others` changes the token without an event) is
        // never counted in the one before it.
        let awaiting = try #require(application.handler(for: Request(name: "end-others")))
        for _ in 0..<2 {
            timeline.recordCommand(
                "end-others", arguments: Arguments(), of: awaiting, connection: 3, failed: nil, rev: 10, causedEvents: false, from: start,
                to: start)
        }
        #expect(timeline.entries(from: 10).map(\.repeats) == [256, 44, 3, 1, 1, 1])
        // Arguments cut short may differ past the cut: never counted as the same.
        let long = String(repeating: "a", count: SessionTimeline.maximumTextBytes + 10)
        for last in ["x", "y", "y"] {
            timeline.recordCommand(
                "state", arguments: Arguments(["view": .string(long + last)]), of: state, connection: 3, failed: nil, rev: 10,
                causedEvents: false, from: start, to: start)
        }
        #expect(timeline.entries(from: 10).map(\.repeats) == [256, 44, 3, 1, 1, 1, 1, 1, 1])
    }

    @Test func backendCallsAreTimedIntoTheTimeline() async throws {
        let application = application()
        let adder = try #require(application.services.adder)
        let watched = Session(id: "s1", application: application, output: { _ in })
        let admin = Session(id: "s2", application: application, output: { _ in })
        for session in [watched, admin] { _ = try application.sessions.register(session).get() }
        _ = await watched.send("add 5")
        try await adder.waitFor(1)
        adder.fail(5)
        _ = await watched.send("wait")
        let timeline = try #require(try await inspect("inspect s1", on: admin)["timeline"]?.arrayValue)
        let call = try #require(timeline.first { $0["kind"] == "call" })
        #expect(call["backend"] == "adder" && call["error"]?.stringValue?.contains("the adder failed") == true)
        #expect(call["durationMs"]?.doubleValue != nil)
    }

    /// A server started with an inspector token and no `--admin` records timelines, and
    /// opens `inspect` and `info` to a connection that gives the token — that
    /// connection alone, and none of the other admin commands.
    @Test func anInspectorTokenOpensTheInspectorsCommandsToItsConnectionAlone() async throws {
        let token = "0123456789abcdef-inspector"
        let application = application(admin: false, inspectorToken: token)
        let session = Session(id: "s1", application: application, output: { _ in })
        _ = try application.sessions.register(session).get()
        _ = await session.send("increment")
        let before = try await replies(to: ["inspect"], on: session)
        #expect(before.first?.failure?.code == .adminDisabled)
        #expect(before.first?.failure?.message.contains("inspector <token>") == true)
        let given = try await replies(to: ["inspector \(token)", "inspect s1", "info", "fault search", "sessions"], on: session)
        #expect(try given[0].get() == ["inspector": true])
        #expect(try given[1].get()["recording"] == true)
        #expect(try given[1].get()["timeline"]?.arrayValue?.isEmpty == false)
        #expect(try given[2].get()["sessions"]?["live"] == 1)
        #expect(given[3].failure?.code == .adminDisabled, "fault stays an admin command")
        #expect(given[4].failure?.code == .adminDisabled)
        // Another connection (and the same number once it left) must give it again.
        #expect(try await replies(to: ["info"], on: session, connection: 10).first?.failure?.code == .adminDisabled)
        #expect(try await replies(to: ["info"], on: session).first?.failure?.code == .adminDisabled)
    }

    /// A wrong token is `bad_token` after a second, and is never recorded in the clear.
    @Test func aWrongInspectorTokenIsRefusedAndNeverRecorded() async throws {
        let application = application(admin: false, inspectorToken: "0123456789abcdef-inspector")
        let session = Session(id: "s1", application: application, output: { _ in })
        let started = ContinuousClock.now
        let replies = try await replies(to: ["inspector guess-0123456789", "inspect"], on: session)
        #expect(ContinuousClock.now - started >= Session.wrongInspectorTokenDelay)
        #expect(replies[0].failure?.code == .badToken && replies[1].failure?.code == .adminDisabled)
        let timeline = await session.inspection(from: nil)["timeline"]
        #expect(!"\(timeline ?? .null)".contains("guess-0123456789"))
        #expect("\(timeline ?? .null)".contains("inspector"))
    }

    /// Each wrong guess costs its connection a second; guesses from one address over
    /// many connections are counted together as they arrive (side by side too), and
    /// past a few the address waits (even with the right token), told for how long.
    @Test func wrongInspectorTokensFromOneAddressAreThrottled() async throws {
        let token = "0123456789abcdef-inspector"
        let application = application(admin: false, inspectorToken: token)
        let guessers = (0..<20).map { Session(id: "g\($0)", application: application, peer: "203.0.113.7", output: { _ in }) }
        let guesses = try await withThrowingTaskGroup(of: Result<JSON, ProtocolError>.self) { group in
            for session in guessers {
                group.addTask { try await self.replies(to: ["inspector guess-\(session.id)-0123456789"], on: session)[0] }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(guesses.allSatisfy { $0.failure?.code == .badToken })
        // Twenty side by side: a few were checked (a second each, together); the
        // rest met the throttle at once, told when to come back (most of them; on a
        // machine stalled between two guesses, a block of a second may lapse). Counted
        // only after their delay, as before, none would have met it.
        #expect(guesses.contains { $0.failure?.retryAfter != nil })
        // An address past many failures waits long, and is refused the right token too.
        let keys = FailureThrottle.key("inspector", peer: "203.0.113.7")
        for _ in 0..<12 { application.attachPolicy.throttle.failed(keys, now: FailureThrottle.monotonicNow()) }
        let late = Session(id: "late", application: application, peer: "203.0.113.7", output: { _ in })
        let throttled = try await replies(to: ["inspector \(token)"], on: late)[0]
        #expect(throttled.failure?.code == .badToken && (throttled.failure?.retryAfter ?? 0) >= 30)
        // Another address is not held back by this one's guesses.
        let other = Session(id: "o1", application: application, peer: "198.51.100.9", output: { _ in })
        #expect(try await replies(to: ["inspector \(token)"], on: other)[0].failure == nil)
        // The guesses' deliberate delay is not a slow command.
        #expect(application.slowLog.newest(128).allSatisfy { $0.command != "inspector" })
    }

    @Test func aServerRefusesToStartWithAShortInspectorToken() throws {
        var configuration = ServerConfiguration()
        configuration.inspectorToken = "short"
        #expect(throws: ViewlineServer.ConfigurationError.self) { try ViewlineServer(apps: [Counter.self], configuration: configuration) }
    }

    @Test func aServerWithoutAnInspectorTokenOrAdminRefusesTheToken() async throws {
        let session = Session(id: "s1", application: application(admin: false), output: { _ in })
        let replies = try await replies(to: ["inspector 0123456789abcdef"], on: session)
        #expect(replies.first?.failure?.code == .adminDisabled)
    }

    @Test func aServerWithoutAdminKeepsNoTimeline() async throws {
        let application = application(admin: false)
        let session = Session(id: "s1", application: application, output: { _ in })
        _ = await session.send("increment")
        #expect(await session.inspection(from: nil)["recording"] == false)
    }
}

extension Result where Failure == ProtocolError {
    /// The error of a failed reply; `nil` for a result.
    fileprivate var failure: ProtocolError? {
        if case .failure(let error) = self { return error }
        return nil
    }
}
