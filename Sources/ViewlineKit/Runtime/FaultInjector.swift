import Synchronization

/// Makes the next N calls of a backend fail, for scripted testing (`fault`).
///
/// Shared by every session of a server, like the backends themselves.
public final class FaultInjector: Sendable {
    private struct Fault { var remaining: Int; var message: String? }
    private let faults = Mutex<[String: Fault]>([:])

    /// A table with nothing armed.
    public init() {}

    /// Arms `count` failures of `backend` (0 clears), replacing any armed before.
    public func arm(_ backend: String, count: Int, message: String?) {
        faults.withLock { $0[backend] = count > 0 ? Fault(remaining: count, message: message) : nil }
    }

    /// How many armed failures `backend` has left.
    public func remaining(_ backend: String) -> Int {
        faults.withLock { $0[backend]?.remaining ?? 0 }
    }

    /// Throws the armed failure, consuming one, if `backend` has any left.
    public func check(_ backend: String) throws(ServiceError) {
        let message: String?? = faults.withLock { table in
            guard var fault = table[backend] else { return .none }
            fault.remaining -= 1
            table[backend] = fault.remaining > 0 ? fault : nil
            return .some(fault.message)
        }
        if case .some(let text) = message {
            throw ServiceError(backend, text ?? "the \(backend) service is unavailable (injected fault)")
        }
    }
}
