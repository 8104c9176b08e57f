#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// A point in time by the clock `ContinuousClock` reads (it keeps counting while the
/// machine sleeps), in whole nanoseconds: what the command path times commands with.
///
/// `ContinuousClock.Instant` is not a fixed-layout type outside the standard library,
/// so every value and object holding one has its fields' offsets looked up at run
/// time, and taking two apart is a call: on a path every command takes, that was a
/// metadata lookup and a few loads each time. A `Moment` is one `Int64`.
struct Moment: Sendable {
    /// Nanoseconds since the clock's start (boot, on Linux).
    let nanoseconds: Int64

    /// Now.
    @inline(__always)
    static var now: Moment {
        var time = timespec()
        #if canImport(Darwin)
            clock_gettime(CLOCK_MONOTONIC_RAW, &time)
        #else
            clock_gettime(CLOCK_BOOTTIME, &time)
        #endif
        return Moment(nanoseconds: Int64(time.tv_sec) &* 1_000_000_000 &+ Int64(time.tv_nsec))
    }

    /// The time from `earlier` to `later`.
    static func - (later: Moment, earlier: Moment) -> Duration {
        .nanoseconds(later.nanoseconds &- earlier.nanoseconds)
    }
}
