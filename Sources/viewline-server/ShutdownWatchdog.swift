import Foundation
import Logging
import Synchronization

/// Holds a graceful shutdown to its documented bound (PROTOCOL §2.2: a SIGTERM
/// stops serving within the drain plus one node timeout; the process exits within
/// that plus 5 s): armed when the first signal arrives, it ends the process with
/// status 1 and an error in the log if the shutdown has not finished by then.
///
/// Every wait in the shutdown has its own deadline; this is the one that holds if a
/// part of the process (a library's task, a call that ignores cancellation) does not
/// keep its own. It runs on a thread of its own, so a wedged task pool cannot hold
/// it up, as nginx's `worker_shutdown_timeout` does for its workers.
final class ShutdownWatchdog: Sendable {
    /// The drain a shutdown waits for running commands.
    let drain: Duration
    /// The cluster's node timeout once the node agreed on one (zero on a single node).
    private let nodeTimeout = Mutex<Duration>(.zero)
    private let armed = Atomic<Bool>(false)
    private let serving = Atomic<Bool>(false)

    /// Time a shutdown is given beyond its drain and node timeout: the `bye`s (2 s),
    /// the connections' last work (2 s) and the process's own ending.
    static let margin = Duration.seconds(5)

    init(drain: Duration) {
        self.drain = drain
    }

    /// The node timeout the cluster agreed on: a shutdown may take it to leave.
    func clusterAgreed(nodeTimeout: Duration) {
        self.nodeTimeout.withLock { $0 = nodeTimeout }
    }

    /// The node listens (and, in a cluster, has joined it): from here a signal drains
    /// and hands over. Before, there is nothing to hand over, and a start-up still
    /// waiting for its database is not waited for.
    func servingBegan() {
        serving.store(true, ordering: .releasing)
    }

    /// How long a shutdown may take from the signal.
    var limit: Duration { drain + nodeTimeout.withLock { $0 } + Self.margin }

    /// Starts the countdown (once; later calls do nothing).
    func arm(logger: Logger) {
        guard !armed.exchange(true, ordering: .relaxed) else { return }
        guard serving.load(ordering: .acquiring) else {
            logger.info("stopping before serving anything: nothing to drain or hand over")
            exit(0)
        }
        let limit = self.limit
        Thread.detachNewThread {
            let seconds = Double(limit.components.seconds) + Double(limit.components.attoseconds) / 1e18
            Thread.sleep(forTimeInterval: seconds)
            logger.error(
                "the shutdown did not finish within the drain, the node timeout and the bye timeout; exiting now",
                metadata: ["limit": "\(limit)"])
            exit(1)
        }
    }
}
