import Foundation
import Synchronization
import ViewlineKit

/// A wall clock that moves only when a test says so: token expiry without sleeping.
public final class TestClock: WallClock {
    private let current: Mutex<Date>

    /// A clock stopped at `start`.
    public init(_ start: Date = Date(timeIntervalSince1970: 1_800_000_000)) { current = Mutex(start) }

    public func now() -> Date { current.withLock { $0 } }

    /// Moves the clock `seconds` forward.
    public func advance(by seconds: TimeInterval) { current.withLock { $0 += seconds } }
}
