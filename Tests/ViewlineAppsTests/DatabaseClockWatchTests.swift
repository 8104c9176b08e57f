import Foundation
import Testing

@testable import ViewlinePostgres

/// The database's clock read at each renewal, against this node's monotonic clock:
/// only a forward step past the round trip and the tolerance is a jump.
@Suite struct DatabaseClockWatchTests {
    let start = ContinuousClock.now
    let then = Date(timeIntervalSince1970: 1_800_000_000)

    @Test func theFirstReadingComparesWithNothing() {
        let watch = DatabaseClockWatch()
        #expect(watch.observe(database: then, sent: start, received: start + .milliseconds(3)) == .first)
    }

    @Test func readingsInStepAreSteadyWhateverTheRoundTrip() {
        let watch = DatabaseClockWatch()
        _ = watch.observe(database: then, sent: start, received: start + .milliseconds(3))
        // One second later by both clocks, the reply 2.5 s late (a slow link).
        #expect(watch.observe(database: then + 1, sent: start + .seconds(1), received: start + .seconds(3.5)) == .steady)
        // The database's clock a little ahead of the node's: drift, not a jump.
        #expect(watch.observe(database: then + 2.8, sent: start + .seconds(2), received: start + .seconds(2.01)) == .steady)
    }

    @Test func aForwardStepIsAJumpOfWhatTheRoundTripCannotExplain() {
        let watch = DatabaseClockWatch()
        _ = watch.observe(database: then, sent: start, received: start + .milliseconds(3))
        let seen = watch.observe(database: then + 172_801, sent: start + .seconds(1), received: start + .milliseconds(1_004))
        #expect(seen == .jumped(.seconds(172_801) - .milliseconds(1_004)))
        // Compared with the reading after the jump from then on.
        #expect(watch.observe(database: then + 172_802, sent: start + .seconds(2), received: start + .milliseconds(2_004)) == .steady)
    }

    @Test func aJumpIsKeptUntilAHousekeepingRoundStoresItAndNothingIsDeletedInTheFirstNodeTimeout() {
        let watch = DatabaseClockWatch()
        _ = watch.observe(database: then, sent: start, received: start + .milliseconds(3))
        #expect(watch.beginHousekeeping(grace: .seconds(5), now: start + .seconds(1)) == nil)  // nothing compared yet
        _ = watch.observe(database: then + 7_200, sent: start + .seconds(1), received: start + .milliseconds(1_003))
        let round = watch.beginHousekeeping(grace: .seconds(5), now: start + .seconds(2))
        #expect(round?.jumps.count == 1)
        #expect(round?.jumps.first?.seenAt == then + 7_200)
        #expect(round?.mayDelete == false)  // compared for 1 s of the 5 s grace
        #expect(watch.beginHousekeeping(grace: .seconds(5), now: start + .seconds(2)) == nil)  // one round at a time
        watch.endHousekeeping(unstored: round?.jumps ?? [])  // its store failed
        let next = watch.beginHousekeeping(grace: .seconds(5), now: start + .seconds(7))
        #expect(next?.jumps == round?.jumps)  // the next round stores it first
        #expect(next?.mayDelete == true)
        watch.endHousekeeping()
        #expect(watch.takeUnstored() == [])
    }

    @Test func aBackwardStepIsNoJump() {
        let watch = DatabaseClockWatch()
        _ = watch.observe(database: then, sent: start, received: start + .milliseconds(3))
        #expect(watch.observe(database: then - 3600, sent: start + .seconds(1), received: start + .milliseconds(1_004)) == .steady)
    }

    @Test func overlappingRenewalsAnsweredOutOfOrderCompareWithNothingOlder() {
        let watch = DatabaseClockWatch()
        _ = watch.observe(database: then + 2, sent: start + .seconds(2), received: start + .seconds(2.1))
        #expect(watch.observe(database: then + 1, sent: start + .seconds(1), received: start + .seconds(2.2)) == .steady)
    }
}
