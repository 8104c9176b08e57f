import Foundation
import Synchronization

/// Slows down guessing (passwords, session tokens): after a few failed attempts
/// under a key — a user at an address, an address — each further attempt must
/// wait, twice as long after every failure (up to a ceiling). Each key has its own
/// allowance, a multiple of `freeFailures`, so a wide key (a user from anywhere)
/// blocks only far later than a narrow one (that user from one address): one
/// address cannot lock a user out for everyone. Failures are forgotten after a
/// quiet quarter of an hour, or when a success clears the narrow key it was
/// counted under.
///
/// Time is read only as differences of `now`: the server passes its monotonic clock
/// (``monotonicNow()``), and a clock that steps is survived either way — no wait is
/// ever longer than `maximumDelay` (a wall clock stepped back an hour does not lock
/// an address out for that hour), and a record whose last failure is after `now` is
/// brought back to `now` first.
///
/// Its memory is bounded: keys are fixed-size digests (a 64 KiB user name costs
/// what a short one does), and past `capacity` records, expired ones go first,
/// then the least recently seen.
public final class FailureThrottle: Sendable {
    /// What failures are counted under, and how many of them are free.
    public struct Key: Hashable, Sendable {
        /// A digest of what is counted (fixed size whatever the input).
        let name: String
        /// Free failures under this key, as a multiple of the throttle's `freeFailures`.
        let allowance: Int

        /// A key for `parts` (hashed together) with `allowance` times the free failures.
        public init(_ parts: String..., allowance: Int = 1) {
            name = Self.digest(parts)
            self.allowance = allowance
        }

        private static func digest(_ parts: [String]) -> String {
            var bytes: [UInt8] = []
            for part in parts {
                bytes.append(contentsOf: part.utf8)
                bytes.append(0)  // "ab","c" and "a","bc" differ
            }
            return Hex.string(Cluster.digest(bytes).prefix(16))
        }
    }

    private struct Record {
        var failures = 0
        var blockedUntil: Date = .distantPast
        var lastSeen: Date
    }

    private let freeFailures: Int
    private let baseDelay: TimeInterval
    private let maximumDelay: TimeInterval
    private let capacity: Int
    private let records = Mutex<[Key: Record]>([:])
    /// Failures this long ago, with no wait pending, are forgotten.
    static let forgetAfter: TimeInterval = 900

    /// The monotonic clock as a `Date` (seconds since an arbitrary start, never
    /// stepped): what the server's throttles read, so a step of the wall clock moves
    /// no wait.
    public static func monotonicNow() -> Date {
        let elapsed = ContinuousClock.now - monotonicEpoch
        let (seconds, attoseconds) = elapsed.components
        return Date(timeIntervalSinceReferenceDate: 1_000_000_000 + Double(seconds) + Double(attoseconds) * 1e-18)
    }
    private static let monotonicEpoch = ContinuousClock.now

    /// - Parameters:
    ///   - freeFailures: failures allowed under a narrow key before any waiting.
    ///   - baseDelay: the first wait; each further failure doubles it.
    ///   - maximumDelay: the longest wait.
    ///   - capacity: the most records kept.
    public init(freeFailures: Int = 5, baseDelay: TimeInterval = 1, maximumDelay: TimeInterval = 300, capacity: Int = 10_000) {
        self.freeFailures = freeFailures
        self.baseDelay = baseDelay
        self.maximumDelay = maximumDelay
        self.capacity = capacity
    }

    /// The keys a log-in attempt is counted under: the user at this address (the
    /// narrow key a success clears), the address whatever the user (4× the
    /// allowance: a sweep over many users), and the user whatever the address (10×:
    /// only a guess spread over many addresses).
    public static func keys(user: String, peer: String?) -> [Key] {
        let address = peer ?? "local"
        return [
            Key("login-pair", user, address),
            Key("login-peer", address, allowance: 4),
            Key("login-user", user, allowance: 10),
        ]
    }

    /// How long a log-in as `user` from `peer` must still wait, in whole seconds, or
    /// `nil` when it may go ahead. The (user, address) and address counts apply as
    /// ``wait(for:now:)`` says; the user's count from anywhere only slows an address
    /// that has not failed for this user (one attempt a second for the user from all
    /// such addresses together) and never locks it out, while it blocks the addresses
    /// that have failed. So guesses spread over many addresses buy each address one
    /// guess, and the user still gets in from anywhere else (PROTOCOL §8).
    public func loginWait(user: String, peer: String?, now: Date) -> Int? {
        let keys = Self.keys(user: user, peer: peer)
        let (pair, address, anywhere) = (keys[0], keys[1], keys[2])
        let slot = Key("login-user-clean", user)
        let until = records.withLock { records -> Date? in
            for key in [pair, address, anywhere, slot] { Self.rebase(&records[key], now: now) }
            var waits = [pair, address].compactMap { records[$0]?.blockedUntil }
            if let everywhere = records[anywhere], everywhere.blockedUntil > now {
                if (records[pair]?.failures ?? 0) > 0 {
                    waits.append(everywhere.blockedUntil)
                } else if let last = records[slot]?.lastSeen, (0..<1).contains(now.timeIntervalSince(last)) {
                    waits.append(last + 1)
                } else {
                    if records[slot] == nil { makeRoom(in: &records, now: now) }
                    records[slot] = Record(lastSeen: now)
                }
            }
            return waits.max()
        }
        return seconds(until: until, now: now)
    }

    /// Whole seconds from `now` to `until` (rounded up), at most the longest wait, or
    /// `nil` when `until` has passed.
    private func seconds(until: Date?, now: Date) -> Int? {
        guard let until, until > now else { return nil }
        return Int(min(until.timeIntervalSince(now), maximumDelay).rounded(.up))
    }

    /// The key a log-in success clears: only the user at that address (a good
    /// log-in of one's own never clears the address's or the user's count).
    public static func successKey(user: String, peer: String?) -> [Key] {
        [Key("login-pair", user, peer ?? "local")]
    }

    /// The key an attempt from an address is counted under for `purpose` (`attach`),
    /// with `allowance` times the free failures.
    public static func key(_ purpose: String, peer: String?, allowance: Int = 1) -> [Key] {
        [Key(purpose, peer ?? "local", allowance: allowance)]
    }

    /// How long any of `keys` must still wait before trying again, in whole seconds
    /// (rounded up), or `nil` when the attempt may go ahead.
    public func wait(for keys: [Key], now: Date) -> Int? {
        let until = records.withLock { records in
            keys.compactMap { key in Self.rebase(&records[key], now: now)?.blockedUntil }.max()
        }
        return seconds(until: until, now: now)
    }

    /// Counts a failed attempt under every key.
    public func failed(_ keys: [Key], now: Date) {
        records.withLock { records in
            for key in keys {
                if records[key] == nil { makeRoom(in: &records, now: now) }
                Self.rebase(&records[key], now: now)
                var record = records[key] ?? Record(lastSeen: now)
                if record.blockedUntil < now && now.timeIntervalSince(record.lastSeen) > Self.forgetAfter {
                    record.failures = 0  // quiet for long enough: a fresh start
                }
                record.failures += 1
                record.lastSeen = now
                let over = record.failures - freeFailures * key.allowance
                if over > 0 {
                    let delay = min(maximumDelay, baseDelay * pow(2, Double(min(over - 1, 30))))
                    record.blockedUntil = now + delay
                }
                records[key] = record
            }
        }
    }

    /// A record last seen after `now` (the clock went back) is moved back by as much,
    /// so its wait keeps what was left of it rather than the clock's step. Returns it.
    @discardableResult
    private static func rebase(_ record: inout Record?, now: Date) -> Record? {
        guard var moved = record, moved.lastSeen > now else { return record }
        let step = moved.lastSeen.timeIntervalSince(now)
        moved.lastSeen = now
        if moved.blockedUntil != .distantPast { moved.blockedUntil -= step }
        record = moved
        return moved
    }

    /// A success: forget the failures under `keys` (only the narrow ones: see
    /// ``successKey(user:peer:)``).
    public func succeeded(_ keys: [Key]) {
        records.withLock { records in
            for key in keys { records[key] = nil }
        }
    }

    /// How many records are kept now.
    public var count: Int { records.withLock { $0.count } }

    private func makeRoom(in records: inout [Key: Record], now: Date) {
        guard records.count >= capacity else { return }
        // Records whose wait is over and that were quiet for a while are stale.
        let stale = now - maximumDelay
        records = records.filter { $0.value.blockedUntil > now || $0.value.lastSeen > stale }
        while records.count >= capacity, let oldest = records.min(by: { $0.value.lastSeen < $1.value.lastSeen }) {
            records[oldest.key] = nil
        }
    }
}
