import Foundation
import Synchronization
import ViewlineKit

/// A wall clock that moves only when a test says so: token expiry without sleeping.
public final class TestClock: WallClock {
    private let current: Mutex<Date>

    public init(_ start: Date = Date(timeIntervalSince1970: 1_800_000_000)) { current = Mutex(start) }

    public func now() -> Date { current.withLock { $0 } }

    public func advance(by seconds: TimeInterval) { current.withLock { $0 += seconds } }
}
