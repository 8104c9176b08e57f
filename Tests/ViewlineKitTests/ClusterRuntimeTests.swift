import Foundation
import Synchronization
import Testing
@testable import ViewlineKit

/// Sessions across the nodes of a cluster, with the directory in memory: records,
/// `moved` while the owner lives, restore when it is gone, one winner when two nodes
/// race to restore.
@Suite struct ClusterRuntimeTests {
    /// The shared records and heartbeats, in memory (what PostgreSQL holds in a real cluster).
    final class MemoryDirectory: SessionDirectory, @unchecked Sendable {
        let lock = NSLock()
        private var nodes: [String: (address: String, heartbeat: Date)] = [:]
        private var records: [String: SessionRecord] = [:]

        func heartbeat(_ node: ClusterNode, expiredBefore: Date) async throws {
            lock.withLock { nodes[node.id] = (node.address, Date()) }
        }
        func leave(_ node: ClusterNode) async throws { lock.withLock { nodes[node.id] = nil } }
        /// Records written so far, by lookup.
        var writes: [String: Int] = [:]
        func save(_ saved: [SessionRecord]) async throws {
            lock.withLock {
                for record in saved { writes[record.lookup, default: 0] += 1 }
                for record in saved where records[record.lookup].map({ $0.owner == record.owner }) ?? true {
                    records[record.lookup] = record
                }
            }
        }
        /// How many of the next removes fail (the database went away for a moment).
        var failingRemoves = 0
        struct Unreachable: Error {}
        func remove(lookup: String) async throws {
            try lock.withLock {
                if failingRemoves > 0 {
                    failingRemoves -= 1
                    throw Unreachable()
                }
                records[lookup] = nil
            }
        }
        func find(lookup: String, aliveSince: Date) async throws -> SessionLocation? {
            lock.withLock {
                guard let record = records[lookup] else { return nil }
                let owner = nodes[record.owner]
                return SessionLocation(record: record, ownerAddress: owner?.address ?? "", ownerAlive: (owner?.heartbeat ?? .distantPast) > aliveSince)
            }
        }
        func claim(lookup: String, from previousOwner: String, for node: ClusterNode) async throws -> Bool {
            lock.withLock {
                guard records[lookup]?.owner == previousOwner else { return false }
                records[lookup]?.owner = node.id
                return true
            }
        }
        /// The node stops answering (killed): its heartbeat is old at once.
        func kill(_ node: String) { lock.withLock { nodes[node]?.heartbeat = .distantPast } }
    }

    func node(_ directory: MemoryDirectory, _ address: String, maximumSessions: Int = 10_000) async throws -> Application {
        // A node timeout far beyond any scheduling stall of a loaded test run: "dead"
        // here means killed by the test, never "slow" (a 5 s stall made both racers claim).
        let cluster = Cluster(directory: directory, address: address, nodeTimeout: .seconds(600))
        try await directory.heartbeat(cluster.node, expiredBefore: .distantPast)
        var services = Services()
        services.adder = FakeAdder()
        var limits = SessionLimits()
        limits.maximumSessions = maximumSessions
        return Application([Counter.self], services: services, limits: limits, cluster: cluster)
    }

    @Test func aSessionMovesWhileItsNodeLivesAndIsRestoredWhenItDies() async throws {
        let directory = MemoryDirectory()
        let a = try await node(directory, "10.0.0.1:7878")
        let b = try await node(directory, "10.0.0.2:7878")
        let session = Session(id: "s1", application: a, output: { _ in })
        for _ in 0..<3 { _ = await session.handle(Request(id: .null, name: "increment", arguments: Arguments()), from: 0) }
        await session.showAlert(.error("the adder is down"))
        await a.cluster!.flush()

        guard case .moved(let address) = try await b.cluster!.locate(session.token, application: b) else {
            Issue.record("expected moved while node A lives")
            return
        }
        #expect(address == "10.0.0.1:7878")

        directory.kill(a.cluster!.nodeID)
        guard case .restored(let restored) = try await b.cluster!.locate(session.token, application: b) else {
            Issue.record("expected a restore once node A is gone")
            return
        }
        #expect(restored.token == session.token && restored.id == "s1")
        #expect(await restored.state(Counter.self).count == 3)
        // A client that saw up to rev 9 on node A gets a snapshot numbered after it.
        let received = Mutex<[ServerMessage]>([])
        let link = SessionConnection(send: { message in received.withLock { $0.append(message) } }, close: {})
        // A last-rev no node could have sent is refused, never adopted (it would
        // overflow the session's rev and trap).
        await #expect(throws: ProtocolError.self) {
            try await restored.attach(link, as: 1, lastRev: Int.max, re: .null)
        }
        #expect(received.withLock { $0 }.isEmpty)
        try await restored.attach(link, as: 1, lastRev: 9, re: .null)
        let messages = received.withLock { $0 }
        guard case .reply(_, .success(let result)) = messages.first else {
            Issue.record("expected the attach reply first")
            return
        }
        #expect(result["snapshot"] == true)
        let events = messages.dropFirst()
        #expect(events.count == 2)  // the counter's display, the unanswered error alert
        if case .display(let rev, _, let state) = events.first { #expect(rev == 10 && state["count"] == 3) } else { Issue.record("no display") }
        if case .alert(let rev, _, let content) = events.last { #expect(rev == 11 && content.message == "the adder is down") } else { Issue.record("no alert") }
        // Node B owns it now: another node is sent to B.
        let c = try await node(directory, "10.0.0.3:7878")
        await b.cluster!.flush()
        guard case .moved(let owner) = try await c.cluster!.locate(session.token, application: c) else {
            Issue.record("expected moved to node B")
            return
        }
        #expect(owner == "10.0.0.2:7878")
    }

    @Test func whenTwoNodesRaceToRestoreOneWinsAndTheOtherRedirects() async throws {
        let directory = MemoryDirectory()
        let a = try await node(directory, "10.0.0.1:7878")
        let b = try await node(directory, "10.0.0.2:7878")
        let c = try await node(directory, "10.0.0.3:7878")
        let session = Session(id: "s1", application: a, output: { _ in })
        a.cluster!.changed(session)
        await a.cluster!.flush()
        directory.kill(a.cluster!.nodeID)
        // B and C are alive however long the test waited to get here.
        try await directory.heartbeat(b.cluster!.node, expiredBefore: .distantPast)
        try await directory.heartbeat(c.cluster!.node, expiredBefore: .distantPast)
        async let onB = b.cluster!.locate(session.token, application: b)
        async let onC = c.cluster!.locate(session.token, application: c)
        let outcomes = try await [onB, onC]
        let restored = outcomes.filter { if case .restored = $0 { true } else { false } }
        let moved = outcomes.compactMap { if case .moved(let address) = $0 { address } else { nil } }
        #expect(restored.count == 1 && moved.count == 1, "outcomes: \(outcomes)")
        #expect(["10.0.0.2:7878", "10.0.0.3:7878"].contains(moved.first ?? ""))
    }

    @Test func aFullNodeAnswersServerBusyAndLeavesTheRecordForANodeWithRoom() async throws {
        let directory = MemoryDirectory()
        let a = try await node(directory, "10.0.0.1:7878")
        let full = try await node(directory, "10.0.0.2:7878", maximumSessions: 1)
        let c = try await node(directory, "10.0.0.3:7878")
        // The full node's one session has a connection: nothing it could evict.
        let resident = Session(id: "s9", application: full, output: { _ in })
        #expect(throws: Never.self) { try full.sessions.register(resident).get() }
        full.sessions.attached(resident)
        let session = Session(id: "s1", application: a, output: { _ in })
        for _ in 0..<2 { _ = await session.handle(Request(id: .null, name: "increment", arguments: Arguments()), from: 0) }
        await a.cluster!.flush()
        directory.kill(a.cluster!.nodeID)

        await #expect(throws: ProtocolError(.serverBusy, Cluster.full.message)) {
            try await full.cluster!.locate(session.token, application: full)
        }
        // Asked again, it still says busy: the record was neither claimed nor deleted.
        await #expect(throws: ProtocolError.self) { try await full.cluster!.locate(session.token, application: full) }
        guard case .restored(let restored) = try await c.cluster!.locate(session.token, application: c) else {
            Issue.record("a node with room must still restore the session")
            return
        }
        #expect(await restored.state(Counter.self).count == 2)
    }

    @Test func aQuitSessionsRecordIsDeletedAgainUntilTheDeleteSucceeds() async throws {
        let directory = MemoryDirectory()
        let a = try await node(directory, "10.0.0.1:7878")
        let b = try await node(directory, "10.0.0.2:7878")
        let session = Session(id: "s1", application: a, output: { _ in })
        #expect(throws: Never.self) { try a.sessions.register(session).get() }
        _ = await session.handle(Request(id: .null, name: "increment", arguments: Arguments()), from: 0)
        await a.cluster!.flush()
        // The session quits while the database refuses the delete once.
        directory.lock.withLock { directory.failingRemoves = 1 }
        a.sessions.remove(session)
        await session.close()
        await a.cluster!.flush()  // the delete fails
        await a.cluster!.flush()  // and is tried again
        directory.kill(a.cluster!.nodeID)
        guard case .unknown = try await b.cluster!.locate(session.token, application: b) else {
            Issue.record("a session that quit must never come back on another node")
            return
        }
    }

    @Test func aBusySessionsRecordIsWrittenAtMostOnceASecond() async throws {
        let directory = MemoryDirectory()
        let a = try await node(directory, "10.0.0.1:7878")
        let session = Session(id: "s1", application: a, output: { _ in })
        let start = ContinuousClock.now
        for batch in 0..<10 {
            for _ in 0..<10 { _ = await session.handle(Request(id: .null, name: "increment", arguments: Arguments()), from: 0) }
            await a.cluster!.flush(now: start + .milliseconds(90 * batch))  // ten batches within a second
        }
        let lookup = String(session.token.prefix(16))
        #expect(directory.lock.withLock { directory.writes[lookup] } == 1)
        // The last change is not lost: it goes with a batch once the second is over.
        await a.cluster!.flush(now: start + .milliseconds(1100))
        #expect(directory.lock.withLock { directory.writes[lookup] } == 2)
        directory.kill(a.cluster!.nodeID)
        let b = try await node(directory, "10.0.0.2:7878")
        guard case .restored(let restored) = try await b.cluster!.locate(session.token, application: b) else {
            Issue.record("expected a restore")
            return
        }
        #expect(await restored.state(Counter.self).count == 100)
    }

    @Test func aWrongSecretFindsNothingOnAnyNode() async throws {
        let directory = MemoryDirectory()
        let a = try await node(directory, "10.0.0.1:7878")
        let b = try await node(directory, "10.0.0.2:7878")
        let session = Session(id: "s1", application: a, output: { _ in })
        a.cluster!.changed(session)
        await a.cluster!.flush()
        let forged = String(session.token.prefix(16)) + String(repeating: "0", count: session.token.count - 16)
        guard case .unknown = try await b.cluster!.locate(forged, application: b) else {
            Issue.record("a forged token must not be redirected")
            return
        }
    }

    @Test func recordsKeepTheSHA256OfTheSecretNotTheSecret() {
        let hex = Cluster.digest(Array("abc".utf8)).map { String(format: "%02x", $0) }.joined()
        #expect(hex == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")  // FIPS 180-2's example
    }
}
