import Foundation
import Synchronization

/// The last commands slower than a threshold (`slowlog`, like redis's SLOWLOG):
/// when, which session, which command, how long. Never a command's arguments (they
/// may hold a password). Bounded: the newest ``capacity`` entries.
public final class SlowLog: Sendable {
    /// One slow command.
    public struct Entry: Sendable {
        /// Its number in the log, counting from 1 since the server started.
        public var id: Int
        /// When it finished.
        public var time: Date
        /// The session's id (`s1`).
        public var session: String
        /// The command's name (never its arguments).
        public var command: String
        /// How long it took, reply included.
        public var duration: Duration
    }

    /// Commands at least this slow are kept.
    public let threshold: Duration
    /// How many entries the log keeps (the oldest go first).
    public static let capacity = 128
    private let state = Mutex<(next: Int, entries: [Entry])>((1, []))

    /// An empty log keeping commands at least `threshold` slow.
    public init(threshold: Duration) {
        self.threshold = threshold
    }

    /// Keeps the command if it was slow.
    func record(session: String, command: String, duration: Duration) {
        guard duration >= threshold else { return }
        state.withLock { state in
            state.entries.append(Entry(id: state.next, time: Date(), session: session, command: command, duration: duration))
            state.next += 1
            if state.entries.count > Self.capacity { state.entries.removeFirst(state.entries.count - Self.capacity) }
        }
    }

    /// The newest `count` entries, newest first.
    public func newest(_ count: Int) -> [Entry] {
        state.withLock { Array($0.entries.suffix(count).reversed()) }
    }

    /// Entries kept now.
    public var count: Int { state.withLock { $0.entries.count } }
}
