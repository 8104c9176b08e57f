import CoreMetrics
import NIOPosix
import Synchronization

/// A few threads for work that blocks (password hashing, CPU-heavy parsing), so it
/// never runs on the event loops or the cooperative pool that serve every session.
///
/// Bounded: when `queueLimit` jobs already wait or run — or `perKeyLimit` of one
/// key's (a client address) — ``run(key:_:)`` fails at once with ``Full`` instead
/// of queueing without limit, so a flood of slow requests gets clear errors while
/// the rest of the server (and every other address) keeps its speed.
public final class BlockingPool: Sendable {
    /// The pool's queue was full; the caller should answer "try again".
    public struct Full: Error, Sendable, CustomStringConvertible {
        public var description: String { "the blocking work pool is full" }
    }

    private let pool: NIOThreadPool
    private let limit: Int
    private let perKeyLimit: Int
    private let inFlight = Atomic<Int>(0)
    private let jobs: CoreMetrics.Gauge
    private let inFlightByKey = Mutex<[String: Int]>([:])

    /// Starts `threads` threads accepting at most `queueLimit` jobs at a time, and
    /// at most `perKeyLimit` of one key's.
    /// `name` labels its figures (`viewline_pool_jobs{pool=…}`: jobs waiting or
    /// running, through swift-metrics as the process bootstrapped it).
    public init(threads: Int = 1, queueLimit: Int = 64, perKeyLimit: Int = .max, name: String = "pool") {
        precondition(threads > 0 && queueLimit > 0 && perKeyLimit > 0)
        jobs = CoreMetrics.Gauge(label: "viewline_pool_jobs", dimensions: [("pool", name)])
        self.perKeyLimit = perKeyLimit
        pool = NIOThreadPool(numberOfThreads: threads)
        pool.start()
        limit = queueLimit
    }

    deinit {
        pool.shutdownGracefully { _ in }
    }

    /// Jobs waiting or running now.
    public var load: Int { inFlight.load(ordering: .relaxed) }

    /// Runs `work` on one of the pool's threads and returns its result; throws
    /// ``Full`` without running it when the pool already has `queueLimit` jobs.
    public func run<Result: Sendable>(key: String? = nil, _ work: @escaping @Sendable () -> Result) async throws -> Result {
        if let key {
            let admitted = inFlightByKey.withLock { counts in
                let count = counts[key] ?? 0
                guard count < perKeyLimit else { return false }
                counts[key] = count + 1
                return true
            }
            guard admitted else { throw Full() }
        }
        defer {
            if let key {
                inFlightByKey.withLock { counts in
                    let left = (counts[key] ?? 1) - 1
                    counts[key] = left > 0 ? left : nil
                }
            }
        }
        let (_, accepted) = inFlight.add(1, ordering: .acquiringAndReleasing)
        guard accepted <= limit else {
            inFlight.subtract(1, ordering: .relaxed)
            throw Full()
        }
        jobs.record(accepted)
        defer { jobs.record(inFlight.subtract(1, ordering: .relaxed).newValue) }
        return try await pool.runIfActive { work() }
    }
}
