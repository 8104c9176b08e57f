import NIOCore
import PostgresNIO
import Synchronization

extension PostgresConnection {
    /// A statement that outlived its deadline: its connection was closed under it.
    struct DeadlinePassed: Error, CustomStringConvertible {
        var timeout: Duration
        var description: String { "the statement took longer than \(timeout); its connection was closed" }
    }

    /// Runs `body` (statements on this connection) within `timeout`. postgres-nio's
    /// `query` does not observe task cancellation, so a deadline that only cancelled
    /// would wait for a silent server as long as the kernel keeps the socket (minutes):
    /// when the deadline passes, the connection is closed, which fails the statement at
    /// once, and ``DeadlinePassed`` is thrown. The connection is unusable after that.
    ///
    /// `closingOnCancel`: the task's cancellation closes the connection too (a
    /// connection of its own, whose owner stops: a node leaving the cluster must not
    /// wait for its renewal's deadline), and `CancellationError` is thrown.
    package func withDeadline<T: Sendable>(
        _ timeout: Duration, closingOnCancel: Bool = false, _ body: () async throws -> T
    ) async throws -> T {
        let fired = Atomic<Bool>(false)
        let cancelled = Atomic<Bool>(false)
        let nanoseconds = Int64(timeout.components.seconds) * 1_000_000_000 + timeout.components.attoseconds / 1_000_000_000
        let deadline = eventLoop.scheduleTask(in: .nanoseconds(nanoseconds)) { [self] in
            fired.store(true, ordering: .releasing)
            close(promise: nil)
        }
        defer { deadline.cancel() }
        do {
            let result = try await withTaskCancellationHandler {
                try await body()
            } onCancel: { [self] in
                guard closingOnCancel else { return }
                cancelled.store(true, ordering: .releasing)
                close(promise: nil)
            }
            if fired.load(ordering: .acquiring) { throw DeadlinePassed(timeout: timeout) }
            if cancelled.load(ordering: .acquiring) { throw CancellationError() }
            return result
        } catch {
            if fired.load(ordering: .acquiring) { throw DeadlinePassed(timeout: timeout) }
            if cancelled.load(ordering: .acquiring) { throw CancellationError() }
            throw error
        }
    }

    private func close(promise: EventLoopPromise<Void>?) {
        let closing: EventLoopFuture<Void> = close()
        closing.cascade(to: promise)
    }
}
