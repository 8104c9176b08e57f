import Testing

/// A trait for a synchronous test, or every test of a suite of them, that blocks the
/// thread it runs on: it sleeps, reads a blocking socket or waits for a child
/// process. Such a test runs on the ``BlockingTestExecutor``'s threads instead of the
/// cooperative pool's, so its blocking holds none of the threads the async tests of
/// the same process run on.
///
/// Not for an async test: its child tasks (`async let`, task groups) and default
/// actors would inherit the preference and queue behind the blocked threads.
///
/// Such a test waits for one of those threads, and a `.timeLimit` would count that
/// wait too (the pool is as wide as the machine, and a whole suite of end-to-end
/// tests may be queued ahead): a blocking test bounds itself by its own deadlines,
/// as a time limit cannot end a test that blocks anyway.
///
/// ```swift
/// @Suite(.blocksItsThread) struct WireProtocolTests { ... }
/// ```
public struct BlocksItsThread: SuiteTrait, TestTrait, TestScoping {
    public var isRecursive: Bool { true }

    public func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        try await withTaskExecutorPreference(BlockingTestExecutor.shared) { try await function() }
    }
}

extension Trait where Self == BlocksItsThread {
    /// The test blocks its thread: it runs on threads kept for such tests.
    public static var blocksItsThread: Self { Self() }
}
