import Synchronization

/// The order in which one session's writes were asked for, so a store can keep them
/// in that order in the database.
///
/// Two writes of one session can be on their way at once: a command whose client gave
/// up waiting (its connection dropped while the write waited on a lock) still runs
/// when the client, reconnected, sends the next one. Woken together, the earlier
/// write — never acknowledged — could commit after the later one and overwrite it.
/// Each write takes a number here when it is asked for; the store records the
/// newest number committed for the session, in the write's own transaction, and
/// refuses a write whose number is older (``SessionWriteSuperseded``). Nothing
/// waits for its turn in the node, so a write stuck on a dead connection holds up
/// no other.
///
/// Numbers are only compared within one ``holder`` (one run of a session on one
/// node); another holder's write is never refused as older — which of two owners
/// may write is the lease's business (``SessionFence``).
public final class SessionWriteOrder: Sendable {
    /// This run of the session: random, so a session restored on another node (or
    /// again on this one) starts its own count.
    public let holder: String
    private let last: Atomic<Int64>

    /// A new order for one run of a session.
    /// - Parameters:
    ///   - holder: names this run of the session; random by default.
    ///   - after: the number before the first one ``next()`` gives.
    public init(holder: String = SessionWriteOrder.randomHolder(), after: Int64 = 0) {
        self.holder = holder
        self.last = Atomic(after)
    }

    /// The next write's number: each call's is greater than the one before.
    public func next() -> Int64 {
        last.add(1, ordering: .relaxed).newValue
    }

    /// 24 random hex digits.
    public static func randomHolder() -> String {
        Hex.random(bytes: 12)
    }
}
