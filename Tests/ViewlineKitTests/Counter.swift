import Synchronization
import ViewlineKit

/// A tiny view-model that exercises every runtime feature: state and display,
/// typed arguments, an alert with a field, latest-wins work in a slot, a backend
/// that `fault` can break, and a shared observation.
enum Counter: ViewModel {
    struct State: Codable, Sendable, Equatable {
        var count = 0
        var label = ""
        var busy = false
    }

    static let view = "counter"
    static let stateSummary = "{count, label, busy}"
    static func initialState(_ services: Services) -> State { State() }
    static let backends: [any BackendKey.Type] = [AdderKey.self]
    static let errors = [ErrorCode.tooBig]

    static let commands: [Command<Counter>] = [
        Command("increment", summary: "Add one.", arguments: [.optionalInteger("by", minimum: 1)]) { session, args in
            let by = args.int("by") ?? 1
            guard by <= 100 else { throw ProtocolError(.tooBig, "at most 100 at a time") }
            session.update { $0.count += by }
            return ["count": .int(session.state.count)]
        },
        Command("label", summary: "Name the counter.", arguments: [.text("text")], example: "label my counter") { session, args in
            let text = args.string("text")
            session.update { $0.label = text }
            return ["label": .string(text)]
        },
        Command("reset", summary: "Ask, then set the count to zero.") { session, _ in
            session.run(.reset) { session in
                switch await session.ask(resetAlert) {
                case .confirmed(let fields):
                    session.update {
                        $0.count = 0
                        $0.label = fields["note"] ?? ""
                    }
                case .cancelled, .dismissed: break
                }
            }
            return ["asked": true]
        },
        Command("add", summary: "Add slowly through the adder; the latest add wins.", arguments: [.word("amount")]) { session, args in
            let amount = Int(args.string("amount")) ?? 0
            session.update { $0.busy = true }
            session.run(.add) { session in
                do {
                    // No checks: a replaced add's update and alert are dropped by the runtime.
                    let total = try await session.call(AdderKey.self) { adder in try await adder.add(amount) }
                    session.update {
                        $0.count = total
                        $0.busy = false
                    }
                } catch {
                    session.update { $0.busy = false }
                    session.showAlert(.error(ServiceError.describe(error)))
                }
            }
            return ["accepted": true]
        },
        Command("follow", summary: "Show the shared total whenever it changes.") { session, _ in
            session.observe(session.services.total) { session, total in
                session.update { $0.count = total }
            }
            return ["following": true]
        },
    ]

    static let resetAlert = AlertContent(
        title: "Reset?", message: "Set the count to zero?", actions: [.confirm("Reset"), .cancel("Keep")],
        fields: [AlertField(name: "note", label: "Note")])
}

extension TaskSlot {
    static let reset = TaskSlot("reset")
    static let add = TaskSlot("add")
}

extension ErrorCode {
    static let tooBig = ErrorCode("too_big", meaning: "The amount is over the limit.")
}

/// An adder whose calls wait until the test releases them, in any order.
final class FakeAdder: Sendable {
    private let pending = Mutex<[(amount: Int, continuation: CheckedContinuation<Int, any Error>)]>([])

    func add(_ amount: Int) async throws -> Int {
        try await withCheckedThrowingContinuation { continuation in pending.withLock { $0.append((amount, continuation)) } }
    }

    var waiting: [Int] { pending.withLock { $0.map(\.amount) } }

    func fail(_ amount: Int) {
        let call = pending.withLock { calls -> CheckedContinuation<Int, any Error>? in
            guard let index = calls.firstIndex(where: { $0.amount == amount }) else { return nil }
            return calls.remove(at: index).continuation
        }
        call?.resume(throwing: ServiceError("adder", "the adder failed"))
    }

    func release(_ amount: Int, total: Int) {
        let call = pending.withLock { calls -> CheckedContinuation<Int, any Error>? in
            guard let index = calls.firstIndex(where: { $0.amount == amount }) else { return nil }
            return calls.remove(at: index).continuation
        }
        call?.resume(returning: total)
    }

    func waitFor(_ count: Int) async throws {
        for _ in 0..<2000 where waiting.count < count { try await Task.sleep(for: .milliseconds(1)) }
    }
}

enum AdderKey: BackendKey {
    typealias Value = FakeAdder
    static let name = "adder"
    static let summary = "the slow adder behind `add`"
}
enum TotalKey: ServiceKey { typealias Value = SharedObservation<Int> }

extension Services {
    var adder: FakeAdder {
        get { self[AdderKey.self] }
        set { self[AdderKey.self] = newValue }
    }

    var total: SharedObservation<Int> {
        get { self[TotalKey.self] }
        set { self[TotalKey.self] = newValue }
    }
}
