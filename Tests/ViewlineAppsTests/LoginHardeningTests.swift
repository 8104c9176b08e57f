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

    @Test func twelveAttackingAddressesNeverLockTheUserOutOfAnAddressThatHasNotFailed() {
        // The default allowance: 5 per (user, address), 50 for the user from anywhere.
        let throttle = FailureThrottle(freeFailures: 5)
        var now = start
        // A minute of guessing from 12 addresses, each as often as it is let through.
        var honestGotThrough = 0
        for second in 0..<60 {
            now = start + TimeInterval(second)
            for n in 0..<12 where throttle.loginWait(user: "alice", peer: "198.51.100.\(n)", now: now) == nil {
                throttle.failed(FailureThrottle.keys(user: "alice", peer: "198.51.100.\(n)"), now: now)
            }
            // Alice, from her own address, every 2 s: slowed at most, never locked out.
            if second.isMultiple(of: 2), throttle.loginWait(user: "alice", peer: "203.0.113.7", now: now) == nil { honestGotThrough += 1 }
        }
        #expect(honestGotThrough == 30, "alice got through \(honestGotThrough) times in 30")
        // The attacking addresses are held off alice (they failed).
        #expect(throttle.loginWait(user: "alice", peer: "198.51.100.3", now: now) != nil)
        // A clean address is slowed to one attempt a second for the user, all such addresses together.
        let later = now + 0.5
        #expect(throttle.loginWait(user: "alice", peer: "203.0.113.8", now: later) == nil)
        #expect(throttle.loginWait(user: "alice", peer: "203.0.113.9", now: later) == 1)
        #expect(throttle.loginWait(user: "alice", peer: "203.0.113.9", now: later + 1) == nil)
    }

    /// A wall clock stepped back an hour moves no wait: what was left of it is left,
    /// never the hour, and a wait told is never longer than the longest (PROTOCOL §2.2).
    @Test func aClockSteppedBackMovesNoWait() {
        let throttle = FailureThrottle(freeFailures: 1, baseDelay: 1, maximumDelay: 300)
        let start = Date(timeIntervalSinceReferenceDate: 1_000_000)
        let keys = FailureThrottle.keys(user: "ann", peer: "10.0.0.1")
        for _ in 0..<2 { throttle.failed(keys, now: start) }
        #expect(throttle.loginWait(user: "ann", peer: "10.0.0.1", now: start) == 1)
        let stepped = start - 3600
        #expect(throttle.loginWait(user: "ann", peer: "10.0.0.1", now: stepped) == 1, "a second left, not an hour")
        #expect(throttle.loginWait(user: "ann", peer: "10.0.0.1", now: stepped + 1.5) == nil)
        let attach = FailureThrottle.key("attach", peer: "10.0.0.1")
        for _ in 0..<3 { throttle.failed(attach, now: start) }
        #expect(throttle.wait(for: attach, now: stepped).map { $0 <= 2 } == true)
    }

    @Test func failuresAreForgottenAfterAQuietQuarterOfAnHour() {
        let throttle = FailureThrottle(freeFailures: 2, baseDelay: 1, maximumDelay: 8)
        let keys = FailureThrottle.keys(user: "alice", peer: "10.0.0.1")
        for _ in 0..<2 { throttle.failed(keys, now: start) }
        throttle.failed(keys, now: start + 1000)
        #expect(throttle.wait(for: keys, now: start + 1000) == nil, "the old failures no longer count")
    }

    @Test func aLongUserNameCostsWhatAShortOneDoes() {
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
        let test = harness.makeStore(peer: "192.0.2.7")
        for attempt in 1...6 { await test.send("login alice wrong\(attempt)", fails: .loginFailed) }
        guard case .failure(let throttled)? = await test.send("login alice wonderland") else {
            Issue.record("the 7th login must be throttled")
            return
        }
        #expect(throttled.code == .loginThrottled)
        #expect(throttled.message == "too many failed logins; try again in 1 s")
        // Once the wait is over, the right password works and clears the record.
        harness.clock.advance(by: 2)
        await test.send("login alice wonderland", reply: ["user": "alice", "expiresIn": 3600])
        await test.receive(Account.self) { $0.user = "alice" }
        #expect(harness.throttle.wait(for: FailureThrottle.keys(user: "alice", peer: "192.0.2.7"), now: harness.clock.now()) == nil)
        await test.finish()
    }

    @Test func aFullHashingQueueFailsFastWithServerBusy() async throws {
        let pool = BlockingPool(threads: 1, queueLimit: 1)
        let harness = try await TestHarness(passwordPool: pool)
        let gate = Gate()
        // Occupy the only slot with a job that waits until the test lets it go.
        let blocker = Task {
            try await pool.run { gate.wait() }
        }
        try await LoginQueuePerAddressTests.waitUntil { pool.load > 0 }
        let store = harness.makeStore()
        await store.send("login alice wonderland", fails: .serverBusy)
        gate.open()
        try await blocker.value
        await store.send("login alice wonderland", reply: ["user": "alice", "expiresIn": 3600])
        await store.receive(Account.self) { $0.user = "alice" }
        await store.finish()
    }
}

/// A one-shot gate a blocking job waits on (at most 60 s: a test that forgets to open
/// it still ends, and a busy machine setting a test up never opens it early).
final class Gate: Sendable {
    private let opened = Atomic<Bool>(false)
    func open() { opened.store(true, ordering: .releasing) }
    func wait() {
        for _ in 0..<60_000 where !opened.load(ordering: .acquiring) { usleep(1000) }
    }
}

/// One address's log-ins cannot fill the hashing queue for everybody.
@Suite struct LoginQueuePerAddressTests {
    @Test func anAddressPastItsShareGetsServerBusyWhileOthersStillHash() async throws {
        let pool = BlockingPool(threads: 1, queueLimit: 32, perKeyLimit: 2)
        let gate = Gate()
        let held = (0..<2).map { _ in Task { try await pool.run(key: "10.0.0.9") { gate.wait() } } }
        try await Self.waitUntil { pool.load >= 2 }
        await #expect(throws: BlockingPool.Full.self) { try await pool.run(key: "10.0.0.9") { () } }
        let other = Task { try await pool.run(key: "10.0.0.1") { 42 } }
        gate.open()
        for task in held { try await task.value }
        #expect(try await other.value == 42)
        // Its share is free again once its jobs are done.
        #expect(try await pool.run(key: "10.0.0.9") { 7 } == 7)
    }

    @Test func addressesThatFillTheQueueWithTheirShareCannotKeepAnotherOut() async throws {
        // 8 addresses × 4 log-ins in flight (right passwords: successes count too) fill a
        // queue of 32; a 9th address still gets in, and is served in the next turn.
        let pool = BlockingPool(threads: 1, queueLimit: 32, perKeyLimit: 4)
        let gate = Gate()
        final class Order: Sendable {
            let served = Mutex<[String]>([])
            func append(_ key: String) { served.withLock { $0.append(key) } }
        }
        let order = Order()
        var held: [Task<Void, any Error>] = []
        for address in 0..<8 {
            for _ in 0..<4 {
                held.append(
                    Task {
                        try await pool.run(key: "10.0.0.\(address)") {
                            gate.wait(); order.append("10.0.0.\(address)")
                        }
                    })
            }
        }
        try await Self.waitUntil { pool.load >= 32 }
        await #expect(throws: BlockingPool.Full.self) { try await pool.run(key: "10.0.0.0") { () } }
        let honest = Task { try await pool.run(key: "192.0.2.1") { order.append("192.0.2.1") } }
        try await Self.waitUntil { pool.load >= 33 }
        #expect(pool.load == 33)
        gate.open()
        try await honest.value
        for task in held { try await task.value }
        // Taken in turn: the honest job ran within the first round (9 jobs), not after 32.
        let position = try #require(order.served.withLock { $0 }.firstIndex(of: "192.0.2.1"))
        #expect(position <= 9, "served \(position + 1)th")
    }

    /// Waits until `condition` holds (tasks queue their jobs in their own time: a
    /// busy machine may take a while), or 10 s.
    static func waitUntil(_ condition: () -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(10)
        while !condition() && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(2)) }
    }
}
