import Foundation
#if canImport(Glibc)
    import Glibc
#endif
import Synchronization
import Testing
import ViewlineProtocol
@testable import ViewlineKit

/// `end-others` is final: the step that joins a connection to a session checks the
/// token it attached with, on the session's own executor, so an attach that looked the
/// token up before `end-others` (and was between leaving its old session and joining
/// this one when it ran) cannot join after it.
@Suite struct EndOthersTests {
    @Test func anAttachInFlightWithTheOldTokenDoesNotJoinAfterEndOthers() async throws {
        let application = Application([Counter.self], services: Services())
        let session = Session(id: "s1", application: application)
        try application.sessions.register(session).get()
        let owner = Mutex<[ServerMessage]>([])
        await session.connect(SessionConnection(send: { message in owner.withLock { $0.append(message) } }, close: {}), as: 1)
        // The attacker's attach looked the session up with the token it knows…
        let old = session.token
        // …and the owner ends the others before the attacker's join runs.
        _ = await session.handle(Request(id: .int(1), name: "end-others", arguments: Arguments()), from: 1)
        #expect(session.token != old)
        let attacker = Mutex<[ServerMessage]>([])
        let link = SessionConnection(send: { message in attacker.withLock { $0.append(message) } }, close: {})
        let joined = try await session.attach(link, as: 2, lastRev: nil, re: .int(7), token: old)
        #expect(!joined)
        #expect(attacker.withLock { $0.isEmpty })  // nothing of the session reached it
        #expect(await session.connectionCount == 1)
        // The new token joins.
        #expect(try await session.attach(link, as: 3, lastRev: nil, re: .int(8), token: session.token))
    }

    /// A connection of the session attaches elsewhere and that attach fails: it goes
    /// back only if the session's `end-others` did not run while it was away.
    /// A connection told `bye` while its `attach` waited (another connection's
    /// `end-others` or `quit`) cannot leave for the target: nothing follows its `bye`.
    @Test func aConnectionToldByeWhileItsAttachWaitedLeavesForNothing() async throws {
        let application = Application([Counter.self], services: Services())
        let session = Session(id: "s1", application: application)
        try application.sessions.register(session).get()
        await session.connect(SessionConnection(send: { _ in }, close: {}), as: 1)
        await session.connect(SessionConnection(send: { _ in }, close: {}), as: 2)
        _ = await session.handle(Request(id: .int(1), name: "end-others", arguments: Arguments()), from: 1)
        #expect(await session.leave(2) == nil, "revoked: told bye")
        #expect(await session.leave(7) == nil, "never on the session")
        _ = await session.handle(Request(id: .int(2), name: "quit", arguments: Arguments()), from: 1)
        #expect(await session.leave(1) == nil, "the session ended: told bye")
    }

    /// Work started on a session that ended (a retry loop going on, a handle kept past
    /// the end) never runs: the session's work was cancelled as it closed.
    @Test func anEndedSessionStartsNoWork() async throws {
        let session = Session(id: "s1", application: Application([Counter.self], services: Services()))
        await session.close()
        let ran = Mutex(false)
        await session.run(TaskSlot("retry")) { _ in ran.withLock { $0 = true } }
        try await Task.sleep(for: .milliseconds(50))
        #expect(!ran.withLock { $0 })
        #expect(await session.runningWork == 0)
    }

    @Test func aConnectionAwayOnAFailedAttachDoesNotComeBackAfterEndOthers() async throws {
        let application = Application([Counter.self], services: Services())
        let session = Session(id: "s1", application: application)
        try application.sessions.register(session).get()
        await session.connect(SessionConnection(send: { _ in }, close: {}), as: 1)
        let link = SessionConnection(send: { _ in }, close: {})
        await session.connect(link, as: 2)
        // Connection 2 leaves for an attach elsewhere…
        let left = try #require(await session.leave(2))
        // …the owner ends the others meanwhile…
        _ = await session.handle(Request(id: .int(1), name: "end-others", arguments: Arguments()), from: 1)
        // …and the failed attach cannot bring connection 2 back.
        #expect(!(await session.rejoin(link, as: 2, left: left)))
        #expect(await session.connectionCount == 1)
        // Without an end-others in between, it comes back.
        let stay = try #require(await session.leave(1))
        #expect(await session.rejoin(link, as: 1, left: stay))
    }
}

/// A pool's work takes the cores the event loops leave: its threads run at nice 10.
@Suite struct PoolPriorityTests {
    #if os(Linux)
        @Test func poolThreadsRunBelowTheEventLoops() async throws {
            let pool = BlockingPool(threads: 2, name: "priority")
            for _ in 0..<4 {
                let nice = try await pool.run { getpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0) }
                #expect(nice == 10)
            }
            // The caller's own thread is not lowered.
            #expect(getpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0) < 10)
        }
    #endif
}

/// A blocking pool used from `session.call` is fair between client addresses without
/// the backend naming one: the calling session's address is the job's key.
@Suite struct FairPoolTests {
    @Test func oneAddressFillingThePoolCannotKeepAnotherAddressOut() async throws {
        let pool = BlockingPool(threads: 1, queueLimit: 8, perKeyLimit: 3, name: "fairness")
        final class Gate: Sendable {
            let open = Mutex(false)
        }
        let gate = Gate()
        // The attacker's address: three jobs (its share), the first holding the thread.
        var attacker: [Task<Void, any Error>] = []
        for _ in 0..<3 {
            attacker.append(
                Task {
                    try await BlockingPool.$callerKey.withValue("203.0.113.7") {
                        _ = try await pool.run { while !gate.open.withLock({ $0 }) { usleep(1000) } }
                    }
                })
        }
        while pool.load < 3 { try await Task.sleep(for: .milliseconds(5)) }
        // A fourth from the same address is refused at once…
        await #expect(throws: BlockingPool.Full.self) {
            try await BlockingPool.$callerKey.withValue("203.0.113.7") { try await pool.run { 0 } }
        }
        // …and another address's job gets a place, and runs in its turn.
        let victim = Task { try await BlockingPool.$callerKey.withValue("198.51.100.1") { try await pool.run { 42 } } }
        gate.open.withLock { $0 = true }
        #expect(try await victim.value == 42)
        for task in attacker { try await task.value }
    }
}
