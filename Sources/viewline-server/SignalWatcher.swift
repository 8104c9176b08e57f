import Foundation
import Logging
import ServiceLifecycle
import UnixSignals
import Synchronization

/// SIGTERM and SIGINT for the whole life of the group, as a service of it: the
/// first shuts the group down gracefully (the node drains, says `bye`, writes its
/// records and leaves the cluster) with the ``ShutdownWatchdog`` armed; a second,
/// while that drains, exits at once.
///
/// The group's own `gracefulShutdownSignals` ignore a second signal, hence this
/// service. Placed first in the group, it is the last one the shutdown reaches, so
/// it hears signals until every other service has ended.
final class SignalWatcher: Service, Sendable {
    private let signals: UnixSignalsSequence
    private let watchdog: ShutdownWatchdog
    private let drainSeconds: Double
    private let logger: Logger
    /// The group it shuts down, known once the group is made (it holds this service).
    private let group = Mutex<ServiceGroup?>(nil)

    /// `signals` trapped before anyone is told the port, so a signal never finds the
    /// default action.
    init(signals: UnixSignalsSequence, watchdog: ShutdownWatchdog, drainSeconds: Double, logger: Logger) {
        self.signals = signals
        self.watchdog = watchdog
        self.drainSeconds = drainSeconds
        self.logger = logger
    }

    /// The group the first signal shuts down.
    func watch(_ group: ServiceGroup) {
        self.group.withLock { $0 = group }
    }

    func run() async {
        var caught = 0
        for await signal in signals.cancelOnGracefulShutdown() {
            caught += 1
            if caught == 1 {
                logger.info("shutting down", metadata: ["signal": "\(signal)", "drain-seconds": "\(drainSeconds)"])
                watchdog.arm(logger: logger)
                await group.withLock { $0 }?.triggerGracefulShutdown()
            } else {
                logger.warning("exiting at once", metadata: ["signal": "\(signal)"])
                Foundation.exit(0)
            }
        }
    }
}
