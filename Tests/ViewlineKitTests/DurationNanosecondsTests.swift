import Testing

@testable import ViewlineKit

/// Durations kept as nanoseconds (a detach time, an output's lease deadline) saturate
/// past `Int64`'s range instead of trapping the server.
@Suite struct DurationNanosecondsTests {
    @Test func aDurationIsItsWholeNanoseconds() {
        #expect(Duration.seconds(1).nanoseconds == 1_000_000_000)
        #expect((Duration.seconds(2) + .nanoseconds(7)).nanoseconds == 2_000_000_007)
        #expect(Duration.seconds(-3).nanoseconds == -3_000_000_000)
        #expect(Duration.seconds(9_223_372_036).nanoseconds == 9_223_372_036_000_000_000)
    }

    @Test func aDurationPastThreeHundredYearsSaturatesInsteadOfTrapping() {
        #expect((Duration.seconds(9_223_372_036) + .milliseconds(900)).nanoseconds == .max)
        #expect(Duration.seconds(10_000_000_000).nanoseconds == .max)
        #expect(Duration.seconds(Int64.max).nanoseconds == .max)
        #expect(Duration.seconds(Int64.min).nanoseconds == .min)
    }
}
