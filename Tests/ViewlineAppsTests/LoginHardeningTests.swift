import Foundation
import Synchronization
import Testing
import ViewlineApps
import ViewlineKit
import ViewlineTesting

/// Password guessing is throttled, hashing stays off the sessions and a full
/// hashing queue answers at once.
@Suite struct LoginHardeningTests {
    let start = Date(timeIntervalSince1970: 1_800_000_000)

    @Test func fiveFailuresAreFreeThenEachWaitDoubles() {
        let throttle = FailureThrottle(freeFailures: 5, baseDelay: 1, maximumDelay: 8)
        let keys = FailureThrottle.keys(user: "alice", peer: "10.0.0.1")
        for _ in 0..<5 {
            #expect(throttle.wait(for: keys, now: start) == nil)
            throttle.failed(keys, now: start)
        }
        #expect(throttle.wait(for: keys, now: start) == nil)
        throttle.failed(keys, now: start)  // the 6th failure
        #expect(throttle.wait(for: keys, now: start) == 1)
        throttle.failed(keys, now: start + 1)
        #expect(throttle.wait(for: keys, now: start + 1) == 2)
        for _ in 0..<10 { throttle.failed(keys, now: start + 1) }
        #expect(throttle.wait(for: keys, now: start + 1) == 8, "capped at the maximum")
        #expect(throttle.wait(for: keys, now: start + 10) == nil)
    }

    @Test func anAddressIsThrottledAcrossUsersButCannotLockAUserOutElsewhere() {
        let throttle = FailureThrottle(freeFailures: 1)
        // Bob's password guessed from one address: that address waits for bob…
        throttle.failed(FailureThrottle.keys(user: "bob", peer: "10.0.0.1"), now: start)
        throttle.failed(FailureThrottle.keys(user: "bob", peer: "10.0.0.1"), now: start)
        #expect(throttle.wait(for: FailureThrottle.keys(user: "bob", peer: "10.0.0.1"), now: start) == 1)
        // …while bob from his own address is not locked out.
        #expect(throttle.wait(for: FailureThrottle.keys(user: "bob", peer: "10.0.0.2"), now: start) == nil)
        // A sweep over many users from one address is throttled at 4× the allowance.
        for user in ["carol", "dave"] { throttle.failed(FailureThrottle.keys(user: user, peer: "10.0.0.1"), now: start) }
        throttle.failed(FailureThrottle.keys(user: "erin", peer: "10.0.0.1"), now: start)
        #expect(throttle.wait(for: FailureThrottle.keys(user: "frank", peer: "10.0.0.1"), now: start) == 1)
        // A good log-in from that address clears only its own (user, address) count.
        throttle.succeeded(FailureThrottle.successKey(user: "grace", peer: "10.0.0.1"))
        #expect(throttle.wait(for: FailureThrottle.keys(user: "frank", peer: "10.0.0.1"), now: start) == 1)
    }

    @Test func aUserIsThrottledEverywhereOnlyWhenGuessedFromManyAddresses() {
        let throttle = FailureThrottle(freeFailures: 1)
        for n in 0..<10 { throttle.failed(FailureThrottle.keys(user: "bob", peer: "10.0.1.\(n)"), now: start) }
        #expect(throttle.wait(for: FailureThrottle.keys(user: "bob", peer: "10.0.2.1"), now: start) == nil)
        throttle.failed(FailureThrottle.keys(user: "bob", peer: "10.0.1.10"), now: start)  // the 11th address
        #expect(throttle.wait(for: FailureThrottle.keys(user: "bob", peer: "10.0.2.1"), now: start) == 1)
    }

    @Test func failuresAreForgottenAfterAQuietQuarterOfAnHour() {
        let throttle = FailureThrottle(freeFailures: 2, baseDelay: 1, maximumDelay: 8)
        let keys = FailureThrottle.keys(user: "alice", peer: "10.0.0.1")
        for _ in 0..<2 { throttle.failed(keys, now: start) }
        throttle.failed(keys, now: start + 1000)
        #expect(throttle.wait(for: keys, now: start + 1000) == nil, "the old failures no longer count")
    }

    @Test func aLongUserNameCostsWhatAShortOneDoes() {
        let throttle = FailureThrottle(capacity: 100)
        let long = FailureThrottle.keys(user: String(repeating: "x", count: 65_536), peer: "10.0.0.1")
        let short = FailureThrottle.keys(user: "x", peer: "10.0.0.1")
        #expect(zip(long, short).allSatisfy { "\($0.0)".count == "\($0.1)".count })
    }

    @Test func itsMemoryIsBounded() {
        let throttle = FailureThrottle(capacity: 100)
        for n in 0..<1000 { throttle.failed([FailureThrottle.Key("user", "u\(n)")], now: start + Double(n)) }
        #expect(throttle.count <= 100)
    }

    @Test func aLoginFloodIsThrottledWithTheWaitInTheMessage() async throws {
        let harness = try await TestHarness()
        let (session, recorder) = harness.makeSession(peer: "192.0.2.7")
        for attempt in 1...6 { await session.send("login alice wrong\(attempt)") }
        await session.send("login alice wonderland")
        let errors = recorder.replies.compactMap { result -> ProtocolError? in
            if case .failure(let error) = result { return error }
            return nil
        }
        #expect(errors.map(\.code) == Array(repeating: .loginFailed, count: 6) + [.loginThrottled])
        #expect(errors.last?.message == "too many failed logins; try again in 1 s")
        // Once the wait is over, the right password works and clears the record.
        harness.clock.advance(by: 2)
        await session.send("login alice wonderland")
        #expect(try recorder.replies.last?.get()["user"] == "alice")
        #expect(harness.throttle.wait(for: FailureThrottle.keys(user: "alice", peer: "192.0.2.7"), now: harness.clock.now()) == nil)
    }

    @Test func aFullHashingQueueFailsFastWithServerBusy() async throws {
        let pool = BlockingPool(threads: 1, queueLimit: 1)
        let harness = try await TestHarness(passwordPool: pool)
        let gate = Gate()
        // Occupy the only slot with a job that waits until the test lets it go.
        let blocker = Task {
            try await pool.run { gate.wait() }
        }
        for _ in 0..<1000 where pool.load == 0 { try await Task.sleep(for: .milliseconds(1)) }
        let store = harness.makeStore()
        await store.send("login alice wonderland", fails: .serverBusy)
        gate.open()
        try await blocker.value
        await store.send("login alice wonderland", reply: ["user": "alice", "expiresIn": 3600])
        await store.receive(Account.self) { $0.user = "alice" }
        await store.finish()
    }
}

/// A one-shot gate a blocking job waits on (at most 5 s).
final class Gate: Sendable {
    private let opened = Atomic<Bool>(false)
    func open() { opened.store(true, ordering: .releasing) }
    func wait() {
        for _ in 0..<5000 where !opened.load(ordering: .acquiring) { usleep(1000) }
    }
}

/// One address's log-ins cannot fill the hashing queue for everybody.
@Suite struct LoginQueuePerAddressTests {
    @Test func anAddressPastItsShareGetsServerBusyWhileOthersStillHash() async throws {
        let pool = BlockingPool(threads: 1, queueLimit: 32, perKeyLimit: 2)
        let gate = Gate()
        let held = (0..<2).map { _ in Task { try await pool.run(key: "10.0.0.9") { gate.wait() } } }
        for _ in 0..<1000 where pool.load < 2 { try await Task.sleep(for: .milliseconds(1)) }
        await #expect(throws: BlockingPool.Full.self) { try await pool.run(key: "10.0.0.9") { () } }
        let other = Task { try await pool.run(key: "10.0.0.1") { 42 } }
        gate.open()
        for task in held { try await task.value }
        #expect(try await other.value == 42)
        // Its share is free again once its jobs are done.
        #expect(try await pool.run(key: "10.0.0.9") { 7 } == 7)
    }
}
