import Foundation

/// Runs blocking `work` (a child process's wait, a socket read, `createdb`) on a
/// thread of its own and awaits its result, so an async test holds none of the
/// cooperative pool's few threads (two on a 2-core machine) while it waits: every
/// other async test, and an in-process server's tasks, keep running meanwhile.
public func onItsOwnThread<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread { continuation.resume(with: Result { try work() }) }.start()
    }
}

/// Something not `Sendable` handed to the one thread of ``onItsOwnThread(_:)`` while
/// its test awaits, so that it is never used by two at once.
public struct HandedOver<Value>: @unchecked Sendable {
    /// What was handed over.
    public let value: Value

    /// Hands `value` over.
    public init(_ value: Value) { self.value = value }
}
