import Foundation
import Synchronization

/// The time source for token lifetimes and timestamps: real in the server, manual in tests.
public protocol WallClock: Sendable {
    /// The current date by this clock.
    func now() -> Date
}

/// The real time.
public struct SystemWallClock: WallClock {
    /// The system's clock.
    public init() {}
    /// The current date.
    public func now() -> Date { Date() }
}
