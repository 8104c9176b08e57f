import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOWebSocket
import ServiceLifecycle
import Synchronization

/// How many clients a server takes in all and from one address, as the process's
/// limits allow.
extension ViewlineServer {
    /// `requested`, or less when the process's file limit would run out first
    /// (each client is one descriptor; some are kept for the listener, the
    /// database and logs).
    static func clientLimit(_ requested: Int, logger: Logger) -> Int {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return requested }
        if limit.rlim_cur < limit.rlim_max {
            // systemd gives services a soft limit of 1,024 under a far higher hard one:
            // the soft limit is ours to raise (nginx's worker_rlimit_nofile, redis's
            // adjustOpenFilesLimit).
            var raised = limit
            raised.rlim_cur = limit.rlim_max
            if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised) == 0 {
                logger.info(
                    "file limit raised to its hard limit", metadata: ["from": "\(limit.rlim_cur)", "to": "\(raised.rlim_cur)"])
                limit = raised
            }
        }
        let reserve: rlim_t = 64
        let available = limit.rlim_cur > reserve ? Int(clamping: limit.rlim_cur - reserve) : 1
        guard available < requested else { return requested }
        logger.notice(
            "max clients lowered to what the file limit allows",
            metadata: [
                "requested": "\(requested)", "max-clients": "\(available)", "file-limit": "\(limit.rlim_cur)",
            ])
        return available
    }

    /// The per-address cap `requested`, scaled by what the file limit left of the
    /// total (`total` of `requestedTotal`); a cap at or above the total protects no
    /// one, and says so at start.
    static func perAddressLimit(_ requested: Int, of total: Int, requested requestedTotal: Int, logger: Logger) -> Int {
        guard requested > 0 else { return 0 }
        var limit = requested
        if total < requestedTotal {
            limit = max(1, Int((Double(requested) * Double(total) / Double(requestedTotal)).rounded(.down)))
        } else if limit >= total {
            logger.warning(
                "max clients per address is not below max clients: one address can take every place",
                metadata: ["max-clients-per-address": "\(requested)", "max-clients": "\(total)"])
        }
        if limit != requested {
            logger.notice(
                "max clients per address scaled with max clients",
                metadata: ["requested": "\(requested)", "max-clients-per-address": "\(limit)", "max-clients": "\(total)"])
        }
        return limit
    }

    /// A server configuration that cannot work.
    public struct ConfigurationError: Error, CustomStringConvertible {
        public var description: String
    }
}
