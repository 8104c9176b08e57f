import GRDB
import Synchronization

/// Group commit for small durable writes (a draft per keystroke burst from many
/// sessions): writes that arrive while a transaction commits wait and go together
/// in the next one, so N concurrent writers pay for one `fsync` instead of N. Each
/// write still returns only once its transaction committed, and each runs in its
/// own savepoint: one failing write fails alone, the others commit.
final class GroupCommit: Sendable {
    private typealias Write = (work: @Sendable (Database) throws -> Void, done: CheckedContinuation<Void, any Error>)

    private let writer: any DatabaseWriter
    private let state = Mutex<(queue: [Write], committing: Bool)>(([], false))
    /// The most writes in one transaction (a bound on how long one commit holds the writer).
    static let maximumBatch = 512

    init(_ writer: any DatabaseWriter) {
        self.writer = writer
    }

    /// Runs `work` in the next group transaction; returns once it is committed.
    func write(_ work: @escaping @Sendable (Database) throws -> Void) async throws {
        try await withCheckedThrowingContinuation { (done: CheckedContinuation<Void, any Error>) in
            let start = state.withLock { state -> Bool in
                state.queue.append((work, done))
                if state.committing { return false }
                state.committing = true
                return true
            }
            // The first writer starts the one committer; it ends when the queue is empty.
            if start { Task { await self.commitQueued() } }
        }
    }

    /// Commits batches until nothing waits.
    private func commitQueued() async {
        while true {
            let batch = state.withLock { state -> [Write] in
                let batch = Array(state.queue.prefix(Self.maximumBatch))
                state.queue.removeFirst(batch.count)
                if batch.isEmpty { state.committing = false }
                return batch
            }
            if batch.isEmpty { return }
            do {
                let failures = try await writer.write { db -> [Int: any Error] in
                    var failures: [Int: any Error] = [:]
                    for (index, write) in batch.enumerated() {
                        do {
                            try db.inSavepoint {
                                try write.work(db)
                                return .commit
                            }
                        } catch {
                            failures[index] = error
                        }
                    }
                    return failures
                }
                for (index, write) in batch.enumerated() {
                    if let failure = failures[index] { write.done.resume(throwing: failure) } else { write.done.resume() }
                }
            } catch {
                for write in batch { write.done.resume(throwing: error) }  // the commit itself failed
            }
        }
    }
}
