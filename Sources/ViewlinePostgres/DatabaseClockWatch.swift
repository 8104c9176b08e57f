import Foundation
import Synchronization

/// Watches the database's clock against this node's monotonic clock, renewal by
/// renewal, and says when the database's clock jumped forward: the one clock fault
/// that would make the directory's housekeeping delete what it must keep (a record
/// of a session handed over by a clean shutdown looks a day old two days early after
/// a two-day jump).
///
/// Two renewals' readings of the database's clock (`clock_timestamp()`) can be
/// apart by at most the monotonic time from the first one's send to the second
/// one's reply; anything beyond that, past ``tolerance``, is a forward step of the
/// database's clock (or a failover to a server whose clock is ahead), and the
/// housekeeping adds it to the records' age limit (``PostgresSessionDirectory``
/// stores the sum in `viewline_cluster_settings`, so every node honours what one
/// saw). A backward step only makes records look younger: kept longer, never lost.
final class DatabaseClockWatch: Sendable {
    private struct Reading {
        var sent: ContinuousClock.Instant
        var database: Date
    }

    private let last = Mutex<Reading?>(nil)

    /// Differences within this are the link's and the two clocks' ordinary drift.
    static let tolerance = Duration.seconds(1)

    init() {}

    /// What one reading told.
    enum Observation: Equatable {
        /// The node's first reading: nothing to compare it with yet.
        case first
        /// In step with the previous one, or older than it (overlapping renewals
        /// answered out of order: compared with nothing).
        case steady
        /// The database's clock jumped forward by this much since the previous reading.
        case jumped(Duration)
    }

    /// A renewal sent at `sent`, answered at `received`, read `database` as the
    /// database's time.
    func observe(database: Date, sent: ContinuousClock.Instant, received: ContinuousClock.Instant) -> Observation {
        last.withLock { last -> Observation in
            guard let previous = last else {
                last = Reading(sent: sent, database: database)
                return .first
            }
            guard sent > previous.sent else { return .steady }
            last = Reading(sent: sent, database: database)
            let databaseElapsed = Duration.milliseconds(Int64((database.timeIntervalSince(previous.database) * 1000).rounded()))
            let jump = databaseElapsed - (received - previous.sent)
            return jump > Self.tolerance ? .jumped(jump) : .steady
        }
    }
}
