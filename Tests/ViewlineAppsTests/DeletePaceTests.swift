import Testing

@testable import ViewlinePostgres

/// The records' housekeeping deletes at most once a node timeout, counted from the end
/// of its last round that deleted, by the node's monotonic clock; a round that found
/// as many as it may delete at once is followed at once.
@Suite struct DeletePaceTests {
    let start = ContinuousClock.now
    let timeout = Duration.seconds(5)

    @Test func theFirstRoundIsDue() {
        #expect(PostgresSessionDirectory.DeletePace().due(every: timeout, now: start))
    }

    @Test func theNextRoundWaitsANodeTimeoutFromTheEndOfTheLast() {
        let pace = PostgresSessionDirectory.DeletePace()
        // A slow round: begun at the start, ended 4 s later.
        pace.ended(more: false, now: start + .seconds(4))
        #expect(!pace.due(every: timeout, now: start + .seconds(5)))
        #expect(!pace.due(every: timeout, now: start + .seconds(8.9)))
        #expect(pace.due(every: timeout, now: start + .seconds(9)))
    }

    @Test func aRoundThatFoundItsLimitIsFollowedAtOnce() {
        let pace = PostgresSessionDirectory.DeletePace()
        pace.ended(more: true, now: start)
        #expect(pace.due(every: timeout, now: start))
        // Once a round leaves nothing more, the pace holds again.
        pace.ended(more: false, now: start + .seconds(1))
        #expect(!pace.due(every: timeout, now: start + .seconds(2)))
    }
}
