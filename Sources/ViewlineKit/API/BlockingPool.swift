import CoreMetrics
import NIOPosix

#if canImport(Glibc)
    import Glibc
#endif
import Synchronization

/// A few threads for work that blocks (password hashing, CPU-heavy parsing), so it
/// never runs on the event loops or the cooperative pool that serve every session.
///
/// Bounded and fair: at most `perKeyLimit` jobs of one key (a client address) wait or
/// run at once, and at most `queueLimit` in all, except that a key with nothing in the
/// pool may always add one (up to twice `queueLimit`), so keys that fill the queue with
/// their share cannot keep another key out. Waiting jobs are taken one key at a time in
/// turn, not first come first served: a key with one job waits behind at most one job
/// of each other key. A job refused is refused at once with ``Full``, so a flood of slow
/// requests gets clear errors while the rest of the server keeps its speed.
public final class BlockingPool: Sendable {
    /// The pool's queue was full; the caller should answer "try again". A command that
    /// lets it through fails with `server_busy` (retry after 1 s).
    public struct Full: ProtocolErrorConvertible, Sendable, CustomStringConvertible {
        /// The pool's refusal.
        public init() {}

        public var description: String { "the blocking work pool is full" }

        /// `server_busy`, retry after 1 s.
        public var protocolError: ProtocolError {
            ProtocolError(.serverBusy, "the server is busy; try again in a moment", retryAfter: 1)
        }
    }

    private struct Job: Sendable {
        var id: UInt64
        var run: @Sendable () -> Void
        var cancel: @Sendable () -> Void
    }

    private struct State {
        /// Waiting jobs per key; `order` holds the keys that have any, in turn.
        var waiting: [String: [Job]] = [:]
        var order: [String] = []
        /// Jobs waiting or running per key, and in all.
        var perKey: [String: Int] = [:]
        var total = 0
        var running = 0
        var nextID: UInt64 = 0

        /// A job of `key` ran or left the queue.
        mutating func finished(_ key: String) {
            total -= 1
            let mine = (perKey[key] ?? 1) - 1
            perKey[key] = mine > 0 ? mine : nil
        }
    }

    private let pool: NIOThreadPool
    private let threads: Int
    private let limit: Int
    private let perKeyLimit: Int
    private let state = Mutex(State())
    private let jobs: CoreMetrics.Gauge

    /// Starts `threads` threads accepting at most `queueLimit` jobs at a time, and
    /// at most `perKeyLimit` of one key's.
    /// `name` labels its figures (`viewline_pool_jobs{pool=…}`: jobs waiting or
    /// running, through swift-metrics as the process bootstrapped it).
    public init(threads: Int = 1, queueLimit: Int = 64, perKeyLimit: Int = .max, name: String = "pool") {
        precondition(threads > 0 && queueLimit > 0 && perKeyLimit > 0)
        jobs = CoreMetrics.Gauge(label: "viewline_pool_jobs", dimensions: [("pool", name)])
        self.threads = threads
        self.perKeyLimit = perKeyLimit
        pool = NIOThreadPool(numberOfThreads: threads)
        pool.start()
        limit = queueLimit
    }

    deinit {
        pool.shutdownGracefully { _ in }
    }

    /// Jobs waiting or running now.
    public var load: Int { state.withLock { $0.total } }

    /// The key a job gets when its caller names none: inside `session.call`, the
    /// calling session's client address, so every backend that runs on a pool is fair
    /// between addresses without passing one (one address cannot keep another's
    /// searches out).
    @TaskLocal public static var callerKey: String?

    /// Runs `work` on one of the pool's threads and returns its result; throws
    /// ``Full`` without running it when `key` already has its share or the pool is full.
    /// Without a `key`, the job is the calling session's address's (``callerKey``).
    public func run<Result: Sendable>(key: String? = nil, _ work: @escaping @Sendable () -> Result) async throws -> Result {
        let key = key ?? Self.callerKey ?? ""
        let admitted = state.withLock { state -> Int? in
            let mine = state.perKey[key] ?? 0
            guard mine < perKeyLimit else { return nil }
            guard state.total < limit || (mine == 0 && state.total < 2 * limit) else { return nil }
            state.perKey[key] = mine + 1
            state.total += 1
            return state.total
        }
        guard let admitted else { throw Full() }
        jobs.record(admitted)
        // A job still waiting when its task is cancelled (a search superseded by the
        // next one) leaves the queue at once, freeing its place.
        let id = state.withLock { state -> UInt64 in
            defer { state.nextID += 1 }
            return state.nextID
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Result, any Error>) in
                let job = Job(id: id, run: { continuation.resume(returning: work()) }, cancel: { continuation.resume(throwing: CancellationError()) })
                // Checked under the lock the cancellation handler takes: a cancellation
                // either finds the job queued or is seen here.
                let start = state.withLock { state -> Bool? in
                    if Task.isCancelled {
                        state.finished(key)
                        return nil
                    }
                    if state.waiting[key] == nil { state.order.append(key) }
                    state.waiting[key, default: []].append(job)
                    return state.running < threads
                }
                switch start {
                case nil:
                    jobs.record(load)
                    job.cancel()
                case true?: dispatch()
                case false?: break
                }
            }
        } onCancel: {
            let removed = state.withLock { state -> Job? in
                guard let index = state.waiting[key]?.firstIndex(where: { $0.id == id }) else { return nil }
                let job = state.waiting[key]!.remove(at: index)
                if state.waiting[key]!.isEmpty {
                    state.waiting[key] = nil
                    state.order.removeAll { $0 == key }
                }
                state.finished(key)
                return job
            }
            if let removed {
                jobs.record(load)
                removed.cancel()
            }
        }
    }

    /// A pool's threads run below the event loops (nice 10, once per thread): CPU-heavy
    /// backend work (ranking a search, hashing a password) takes the cores the loops
    /// leave, so a loop never waits for a core behind it and every connection's `ping`
    /// keeps its latency while the pool is busy. (Lowering one's own priority needs no
    /// privilege.)
    private static func runBelowEventLoops() {
        #if os(Linux)
            guard lowered.currentValue == nil else { return }
            lowered.currentValue = Lowered()
            // On Linux a nice value is the calling thread's own (setpriority(2), BUGS).
            _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, 10)
        #endif
    }

    private final class Lowered: Sendable {}
    private static let lowered = ThreadSpecificVariable<Lowered>()

    /// Starts the next waiting job, the keys taken in turn, while a thread is free.
    private func dispatch() {
        let next = state.withLock { state -> (String, Job)? in
            guard state.running < threads, !state.order.isEmpty else { return nil }
            let key = state.order.removeFirst()
            var queue = state.waiting[key]!
            let job = queue.removeFirst()
            if queue.isEmpty {
                state.waiting[key] = nil
            } else {
                state.waiting[key] = queue
                state.order.append(key)  // its next job after every other key's
            }
            state.running += 1
            return (key, job)
        }
        guard let (key, job) = next else { return }
        pool.submit { [self] _ in
            Self.runBelowEventLoops()
            job.run()
            let left = state.withLock { state -> Int in
                state.running -= 1
                state.finished(key)
                return state.total
            }
            jobs.record(left)
            dispatch()
        }
        dispatch()  // another free thread, if any
    }
}
