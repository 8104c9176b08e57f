import NIOCore

/// The connections of one event loop whose output waits for its flush, flushed
/// together by one task of that loop (redis's clients-pending-write list): a change
/// that thousands of sessions on the loop display schedules one task, not one per
/// connection (each a closure allocated, queued under the loop's lock and copied
/// out again).
///
/// Touched on its loop only: ``add(_:)`` is called there, and the flush runs there.
final class LoopFlushes: @unchecked Sendable {
    let loop: any EventLoop
    /// The connections to flush at the next run, in the order their output came.
    private var waiting: [OutboundLines] = []
    /// The list being flushed, kept for its capacity.
    private var flushing: [OutboundLines] = []

    /// How many connections wait for the next run.
    var count: Int { waiting.count }

    init(loop: any EventLoop) {
        self.loop = loop
    }

    /// `output` flushes at this loop's next run of the list (scheduled by the first
    /// connection added since the last).
    func add(_ output: OutboundLines) {
        loop.assertInEventLoop()
        waiting.append(output)
        if waiting.count == 1 { loop.execute { self.flush() } }
    }

    private func flush() {
        swap(&waiting, &flushing)
        // A flush may queue more output (a connection cut off, a writability
        // change): it joins `waiting`, which schedules its own run.
        for output in flushing { output.flushOnLoop() }
        flushing.removeAll(keepingCapacity: true)
    }
}
