extension Duration {
    /// Whole nanoseconds, saturating at `Int64`'s bounds (about 292 years either way)
    /// rather than trapping.
    var nanoseconds: Int64 {
        let (seconds, attoseconds) = components
        let (whole, overflowed) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        let (sum, overflowedAgain) = whole.addingReportingOverflow(attoseconds / 1_000_000_000)
        if overflowed || overflowedAgain { return seconds < 0 ? .min : .max }
        return sum
    }
}
