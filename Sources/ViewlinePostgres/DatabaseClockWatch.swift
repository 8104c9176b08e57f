import Foundation
import Synchronization

/// Watches the database's clock against this node's monotonic clock, renewal by
/// renewal, and keeps the forward jumps it saw until they are stored: the one clock
/// fault that would make the directory's housekeeping delete what it must keep (a
/// record of a session handed over by a clean shutdown looks a day old two days
/// early after a two-day jump).
///
/// Two renewals' readings of the database's clock (`clock_timestamp()`) can be
/// apart by at most the monotonic time from the first one's send to the second
/// one's reply; anything beyond that, past ``tolerance``, is a forward step of the
/// database's clock (or a failover to a server whose clock is ahead). The
/// housekeeping stores each jump (`viewline_clock_jumps`, so every node honours what
/// one saw) before it deletes anything, and deletes nothing while a jump it saw is
/// not stored. A backward step only makes records look younger: kept longer, never
/// lost.
final class DatabaseClockWatch: Sendable {
    /// A forward jump: the database's time just after it, and by how much.
    struct Jump: Equatable, Sendable {
        var seenAt: Date
        var size: Duration
    }

    private struct State {
        var sent: ContinuousClock.Instant?
        var database = Date.distantPast
        /// When this node first compared two readings.
        var compared: ContinuousClock.Instant?
        var unstored: [Jump] = []
        var housekeeping = false
    }

    private let state = Mutex(State())

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
        /// The database's clock jumped forward by this much since the previous
        /// reading (kept to be stored: ``takeUnstored()``).
        case jumped(Duration)
    }

    /// A renewal sent at `sent`, answered at `received`, read `database` as the
    /// database's time.
    @discardableResult
    func observe(database: Date, sent: ContinuousClock.Instant, received: ContinuousClock.Instant) -> Observation {
        state.withLock { state -> Observation in
            guard let previous = state.sent else {
                (state.sent, state.database) = (sent, database)
                return .first
            }
            guard sent > previous else { return .steady }
            if state.compared == nil { state.compared = received }
            let databaseElapsed = Duration.milliseconds(Int64((database.timeIntervalSince(state.database) * 1000).rounded()))
            (state.sent, state.database) = (sent, database)
            let jump = databaseElapsed - (received - previous)
            guard jump > Self.tolerance else { return .steady }
            state.unstored.append(Jump(seenAt: database, size: jump))
            return .jumped(jump)
        }
    }

    /// Begins a round of housekeeping, unless one runs or no reading was compared
    /// yet: the jumps to store first (every one not stored yet), and whether the
    /// round may delete — only once this node has compared readings for `grace` (a
    /// node started just after a jump cannot see it: by then the nodes that saw it
    /// have stored it). `nil`: no round now.
    func beginHousekeeping(grace: Duration, now: ContinuousClock.Instant = .now) -> (jumps: [Jump], mayDelete: Bool)? {
        state.withLock { state -> (jumps: [Jump], mayDelete: Bool)? in
            guard !state.housekeeping, let compared = state.compared else { return nil }
            state.housekeeping = true
            defer { state.unstored = [] }
            return (state.unstored, now - compared >= grace)
        }
    }

    /// The jumps seen and not stored yet, taken (a node leaving stores them).
    func takeUnstored() -> [Jump] {
        state.withLock { state in
            defer { state.unstored = [] }
            return state.unstored
        }
    }

    /// Ends the round; `unstored` (jumps its store failed for) go with the next, and
    /// until they are stored no round deletes anything.
    func endHousekeeping(unstored: [Jump] = []) {
        state.withLock { state in
            state.unstored = unstored + state.unstored
            state.housekeeping = false
        }
    }
}
