import Foundation
import Synchronization
import Testing
import ViewlineTestSupport

@testable import ViewlineKit

/// One command path: every command, the built-ins included, runs as its declaration
/// says and ends through the same completion; the transport names none of them.
@Suite struct CommandPathTests {
    /// Every Swift file of the transport, as text.
    static func transportSources() throws -> [(name: String, text: String)] {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let folder = root.appendingPathComponent("Sources/ViewlineKit/Transport")
        return try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.hasSuffix(".swift") }.map { name in
            (name, try String(contentsOf: folder.appendingPathComponent(name), encoding: .utf8))
        }
    }

    @Test func theTransportNamesNoCommand() throws {
        let names = Application([Counter.self]).commands.all.map(\.name)
        #expect(names.contains("attach") && names.contains("quit") && names.contains("wait"))
        let sources = try Self.transportSources()
        #expect(sources.count >= 10)
        for (file, text) in sources {
            for name in names {
                #expect(!text.contains("\"\(name)\""), "Transport/\(file) names the command \(name)")
            }
        }
    }

    @Test func aLineIsDecodedOnceAndItsHandlerFoundOnce() async throws {
        let application = Application([Counter.self])
        let request = try #require(RequestDecoder.decode(line: "increment 2", commands: application.commands)).get()
        let session = Session(id: "s1", application: application, output: { _ in })
        // The immediate case runs whole in `begin`: nothing is left to resume.
        guard case .finished(.next) = await session.begin(request, from: CommandOrigin(connection: 0)) else {
            Issue.record("an immediate command finishes in begin")
            return
        }
        #expect(await session.state(Counter.self).count == 2)
        // One that awaits only begins there (nothing held yet) and runs in `resume`.
        let wait = try #require(RequestDecoder.decode(line: "wait 100", commands: application.commands)).get()
        guard case .suspended(let suspended) = await session.begin(wait, from: CommandOrigin(connection: 0)) else {
            Issue.record("an awaiting command is resumed")
            return
        }
        #expect(await session.commandsRunning == 0)
        #expect(await session.resume(suspended, from: CommandOrigin(connection: 0)) == .next)
    }

    /// The results of the replies a session sent.
    final class Replies: Sendable {
        let results = Mutex<[Result<JSON, ProtocolError>]>([])
    }

    /// A session on a node of a cluster whose lease (1 s) is renewed once, never
    /// again, and the results of the replies it sends.
    func sessionOnANodeThatStopsRenewing() async throws -> (Session, Replies) {
        let cluster = Cluster(directory: ClusterRuntimeTests.MemoryDirectory(), address: "10.0.0.1:7878", nodeTimeout: .seconds(1))
        try await cluster.renew()
        var services = Services()
        services.adder = FakeAdder()
        let application = Application([Counter.self], services: services, cluster: cluster)
        cluster.hold(application.sessions)
        let replies = Replies()
        let session = Session(
            id: "s1", application: application,
            output: { message in
                if case .reply(_, let result) = message { replies.results.withLock { $0.append(result) } }
            })
        _ = try application.sessions.register(session).get()
        return (session, replies)
    }

    /// `wait` ends like every command: a node that lost its lease while it waited
    /// answers `unavailable`, never a result it may no longer give.
    @Test func waitEndsThroughTheLeaseCheckLikeEveryCommand() async throws {
        let (session, replies) = try await sessionOnANodeThatStopsRenewing()
        _ = await session.handle(Request(name: "add", arguments: Arguments(["amount": "5"])))  // the adder never answers: never settles
        _ = await session.handle(Request(name: "wait", arguments: Arguments(["timeout": .int(1500)])))
        // Not renewed: the lease lapsed while `wait` waited.
        guard case .failure(let error) = replies.results.withLock({ $0.last }) else {
            Issue.record("wait must fail once the lease lapsed")
            return
        }
        #expect(error.code == .unavailable)
    }

    /// A command that awaits is checked when it runs, not when its line was read: one
    /// queued behind a lease that lapsed meanwhile never runs.
    @Test func anAwaitingCommandIsAdmittedWhenItRunsNotWhenItWasRead() async throws {
        let (session, replies) = try await sessionOnANodeThatStopsRenewing()
        guard case .suspended(let quit) = await session.begin(Request(name: "quit"), from: CommandOrigin(connection: 0)) else {
            Issue.record("quit awaits")
            return
        }
        try await Task.sleep(for: .milliseconds(1100))  // not renewed: the lease lapses
        #expect(await session.resume(quit, from: CommandOrigin(connection: 0)) == .next)
        #expect(await !session.isClosed)
        guard case .failure(let error) = replies.results.withLock({ $0.last }) else {
            Issue.record("the quit must be refused")
            return
        }
        #expect(error.code == .unavailable)
    }

    /// `quit` is implemented where it is declared: acknowledged, it ends the session
    /// on every connection and tells its own connection `bye quit`.
    @Test func quitEndsTheSessionWhereItIsDeclared() async throws {
        let application = Application([Counter.self])
        let messages = Mutex<[String]>([])
        let session = Session(id: "s1", application: application)
        for number in [1, 2] {
            await session.connect(
                SessionConnection(
                    send: { message in
                        if case .bye(let bye) = message { messages.withLock { $0.append("\(number): bye \(bye.reason)") } }
                        if case .reply = message { messages.withLock { $0.append("\(number): reply") } }
                    }, close: {}), as: number)
        }
        _ = try application.sessions.register(session).get()
        #expect(await session.run(Request(name: "quit"), from: CommandOrigin(connection: 1)) == .endConnection)
        #expect(await session.isClosed)
        #expect(application.sessions.session(for: session.token) == nil)
        #expect(messages.withLock { $0 } == ["1: reply", "1: bye client quit", "2: bye session ended"])
    }
}
