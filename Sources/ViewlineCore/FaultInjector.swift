import Synchronization

/// Makes the next N calls of a backend service fail, for scripted testing (`fault`).
///
/// Shared by every session of a server, like the backends themselves.
public final class FaultInjector: Sendable {
    private struct Fault { var remaining: Int; var message: String? }
    private let faults = Mutex<[BackendService: Fault]>([:])

    public init() {}

    /// Arms `count` failures of `service` (0 clears), replacing any armed before.
    public func arm(_ service: BackendService, count: Int, message: String?) {
        faults.withLock { $0[service] = count > 0 ? Fault(remaining: count, message: message) : nil }
    }

    public func remaining(_ service: BackendService) -> Int {
        faults.withLock { $0[service]?.remaining ?? 0 }
    }

    /// Throws the armed failure, consuming one, if `service` has any left.
    public func check(_ service: BackendService) throws(ServiceError) {
        let message: String?? = faults.withLock { table in
            guard var fault = table[service] else { return .none }
            fault.remaining -= 1
            table[service] = fault.remaining > 0 ? fault : nil
            return .some(fault.message)
        }
        if case .some(let text) = message {
            throw ServiceError(service, text ?? "the \(service.rawValue) service is unavailable (injected fault)")
        }
    }
}
