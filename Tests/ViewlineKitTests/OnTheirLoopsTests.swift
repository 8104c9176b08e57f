import NIOPosix
import Synchronization
import Testing
@testable import ViewlineKit

/// A pass over every session (a shutdown's, a restored lease's) runs each session's
/// part on its own loop, isolated to it, and counts what it was asked to.
@Suite struct OnTheirLoopsTests {
    @Test func everySessionRunsOnceOnItsOwnLoopAndTheCountIsWhatTheBodySaid() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 3)
        let app = Application([Counter.self])
        // More than one turn's worth on each loop.
        let sessions = (0..<(3 * Session.sessionsPerTurn + 7)).map { index in
            Session(id: "s\(index)", application: app, eventLoop: group.next())
        }
        final class Visits: Sendable { let counts = Mutex<[ObjectIdentifier: Int]>([:]) }
        let visits = Visits()
        let odd = await Session.onTheirLoops(sessions) { session in
            #expect(session.eventLoop.inEventLoop)
            visits.counts.withLock { $0[ObjectIdentifier(session), default: 0] += 1 }
            return Int(session.id.dropFirst())! % 2 == 1
        }
        #expect(odd == sessions.count / 2)
        #expect(visits.counts.withLock { $0.count } == sessions.count)
        #expect(visits.counts.withLock { $0.values.allSatisfy { $0 == 1 } })
        #expect(await Session.onTheirLoops([]) { _ in true } == 0)
        try await group.shutdownGracefully()
    }
}
