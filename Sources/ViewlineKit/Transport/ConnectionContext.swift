import Logging
import NIOCore
import ViewlineProtocol

/// What every connection on one event loop of a server shares, held once rather than
/// per connection (an idle connection's objects stay small): the command table its
/// lines are decoded with, its loop's flush list, the output limit and budgets, the
/// lease, the logger and the metrics. One per loop, so reading it for every line
/// touches no object another loop's threads write.
final class ConnectionContext: Sendable {
    /// The server's commands, for decoding each line.
    let commands: CommandTable
    /// In a cluster, until when the node's lease lets it speak (``Cluster/servingUntil(now:)``):
    /// output queued under a lease carries its end, and is dropped with the connection
    /// if it could only be written after it (the node was paused meanwhile).
    let lease: (@Sendable () -> ContinuousClock.Instant?)?
    let logger: Logger
    let metrics: ServerMetrics?
    /// A connection's output limit (`--max-output-bytes`).
    let limit: Int
    /// Where a backlog is told (``ConnectionCounts/backlog(of:address:bytes:)``).
    let counts: ConnectionCounts?
    /// The list of the loop that flushes output queued on that loop (`nil`: each
    /// flush is a task of its own).
    let flushes: LoopFlushes?

    init(
        commands: CommandTable = CommandTable([]), logger: Logger, metrics: ServerMetrics? = nil, counts: ConnectionCounts? = nil,
        flushes: LoopFlushes? = nil, limit: Int = 1 << 20, lease: (@Sendable () -> ContinuousClock.Instant?)? = nil
    ) {
        self.commands = commands
        self.logger = logger
        self.metrics = metrics
        self.counts = counts
        self.flushes = flushes
        self.limit = limit
        self.lease = lease
    }

    /// A framed line as a request, decoded from its bytes in place (`nil`: a blank line).
    func decode(_ line: ByteBuffer) -> Result<Request, RequestDecoder.Failure>? {
        line.withUnsafeReadableBytes { RequestDecoder.decode(buffer: $0.assumingMemoryBound(to: UInt8.self), commands: commands) }
    }
}
