import Foundation
import Synchronization

/// The time source for token lifetimes and timestamps: real in the server, manual in tests.
public protocol WallClock: Sendable {
    func now() -> Date
}

/// The real time.
public struct SystemWallClock: WallClock {
    public init() {}
    /// The current date.
    public func now() -> Date { Date() }
}
