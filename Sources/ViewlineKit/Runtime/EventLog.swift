/// The last events of a session, by `rev`, bounded in count and in bytes: what a
/// client that lost its connection gets again when it attaches with the last `rev`
/// it saw.
struct EventLog {
    private var events: [(rev: Int, message: ServerMessage, size: Int)] = []
    private var start = 0
    private var bytes = 0
    let maximumEvents: Int
    let maximumBytes: Int

    init(maximumEvents: Int = 256, maximumBytes: Int = 1 << 20) {
        self.maximumEvents = maximumEvents
        self.maximumBytes = maximumBytes
    }

    var count: Int { events.count - start }

    /// Keeps `message` (`size` bytes on the wire).
    mutating func append(_ message: ServerMessage, rev: Int, size: Int) {
        events.append((rev, message, size))
        bytes += size
        while count > maximumEvents || (bytes > maximumBytes && count > 1) {
            bytes -= events[start].size
            start += 1
        }
        // Drop the dead prefix now and then, not on every append.
        if start > 64 && start * 2 > events.count {
            events.removeFirst(start)
            start = 0
        }
    }

    /// Every event after `rev`, in order, or `nil` when the log no longer reaches
    /// back that far (or `rev` is from the future).
    func events(after rev: Int, current: Int) -> [ServerMessage]? {
        guard rev >= 0, rev <= current else { return nil }
        if rev == current { return [] }
        guard let first = events.dropFirst(start).first, first.rev <= rev + 1 else { return nil }
        return events.dropFirst(start).filter { $0.rev > rev }.map(\.message)
    }
}
