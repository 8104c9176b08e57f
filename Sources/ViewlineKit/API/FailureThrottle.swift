import Foundation
import Synchronization

/// Slows down guessing (passwords, session tokens): after a few failed attempts
/// under a key — a user, an address — each further attempt must wait, twice as long
/// after every failure (up to a ceiling). A success clears the keys' records.
///
/// Its memory is bounded: past `capacity` records, expired ones go first, then the
/// least recently seen.
public final class FailureThrottle: Sendable {
    private struct Record {
        var failures = 0
        var blockedUntil: Date = .distantPast
        var lastSeen: Date
    }

    private let freeFailures: Int
    private let baseDelay: TimeInterval
    private let maximumDelay: TimeInterval
    private let capacity: Int
    private let records = Mutex<[String: Record]>([:])

    /// - Parameters:
    ///   - freeFailures: failures allowed before any waiting.
    ///   - baseDelay: the first wait; each further failure doubles it.
    ///   - maximumDelay: the longest wait.
    ///   - capacity: the most records kept.
    public init(freeFailures: Int = 5, baseDelay: TimeInterval = 1, maximumDelay: TimeInterval = 300, capacity: Int = 10_000) {
        self.freeFailures = freeFailures
        self.baseDelay = baseDelay
        self.maximumDelay = maximumDelay
        self.capacity = capacity
    }

    /// The keys a log-in attempt is counted under: the user, and the address it came from.
    public static func keys(user: String, peer: String?) -> [String] {
        ["user:" + user] + (peer.map { ["peer:" + $0] } ?? [])
    }

    /// The key an attempt from an address is counted under for `purpose` (`attach`).
    public static func key(_ purpose: String, peer: String?) -> [String] {
        ["\(purpose):" + (peer ?? "local")]
    }

    /// How long any of `keys` must still wait before trying again, in whole seconds
    /// (rounded up), or `nil` when the attempt may go ahead.
    public func wait(for keys: [String], now: Date) -> Int? {
        let until = records.withLock { records in keys.compactMap { records[$0]?.blockedUntil }.max() }
        guard let until, until > now else { return nil }
        return Int(until.timeIntervalSince(now).rounded(.up))
    }

    /// Counts a failed attempt under every key.
    public func failed(_ keys: [String], now: Date) {
        records.withLock { records in
            for key in keys {
                if records[key] == nil { makeRoom(in: &records, now: now) }
                var record = records[key] ?? Record(lastSeen: now)
                record.failures += 1
                record.lastSeen = now
                let over = record.failures - freeFailures
                if over > 0 {
                    let delay = min(maximumDelay, baseDelay * pow(2, Double(min(over - 1, 30))))
                    record.blockedUntil = now + delay
                }
                records[key] = record
            }
        }
    }

    /// A successful log-in: forget the failures under every key.
    public func succeeded(_ keys: [String]) {
        records.withLock { records in
            for key in keys { records[key] = nil }
        }
    }

    /// How many records are kept now.
    public var count: Int { records.withLock { $0.count } }

    private func makeRoom(in records: inout [String: Record], now: Date) {
        guard records.count >= capacity else { return }
        // Records whose wait is over and that were quiet for a while are stale.
        let stale = now - maximumDelay
        records = records.filter { $0.value.blockedUntil > now || $0.value.lastSeen > stale }
        while records.count >= capacity, let oldest = records.min(by: { $0.value.lastSeen < $1.value.lastSeen }) {
            records[oldest.key] = nil
        }
    }
}
