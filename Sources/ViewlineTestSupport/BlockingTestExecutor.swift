import Foundation

/// The threads that tests which block run on: a task executor of its own threads,
/// so that a test sleeping, reading a blocking socket or waiting for a child process
/// holds one of these and never one of the cooperative pool's.
///
/// The pool has as many threads as the machine has cores (at least two). Swift
/// Testing starts every test at once; on a two-core machine two blocking tests used
/// to hold the whole cooperative pool, and every async test in the process (an
/// in-process server's sessions, a timeout's timer) waited minutes behind them.
/// With these threads, blocking tests queue here, at most a thread each, while the
/// async tests keep the cooperative pool.
public final class BlockingTestExecutor: TaskExecutor, @unchecked Sendable {
    /// The one pool every blocking test shares.
    public static let shared = BlockingTestExecutor(threads: max(2, ProcessInfo.processInfo.activeProcessorCount))

    /// How many threads the pool has.
    public let threads: Int

    private let condition = NSCondition()
    /// Jobs not yet started, first come first (guarded by `condition`).
    private var jobs: [UnownedJob] = []
    private var next = 0

    private init(threads: Int) {
        self.threads = threads
        for _ in 0..<threads {
            Thread { [unowned self] in
                Thread.current.threadDictionary[Self.marker] = true
                self.runJobs()
            }.start()
        }
    }

    private static let marker = "viewline.blocking-test-thread"

    /// Whether the calling thread is one of the pool's.
    public static var isCurrent: Bool { Thread.current.threadDictionary[marker] != nil }

    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        condition.lock()
        jobs.append(job)
        condition.signal()
        condition.unlock()
    }

    /// Each thread's loop, for the life of the process (the pool is never torn down).
    private func runJobs() {
        while true {
            condition.lock()
            while next == jobs.count { condition.wait() }
            let job = jobs[next]
            next += 1
            if next == jobs.count {
                jobs.removeAll(keepingCapacity: true)
                next = 0
            }
            condition.unlock()
            job.runSynchronously(on: asUnownedTaskExecutor())
        }
    }
}
