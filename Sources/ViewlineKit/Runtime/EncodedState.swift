import Synchronization

/// A view's state in its wire form: the JSON tree (for `state`, records and tests)
/// and its encoded bytes (for `display` lines).
struct EncodedState: Sendable {
    let json: JSON
    let bytes: [UInt8]

    init(_ json: JSON) {
        self.json = json
        var bytes: [UInt8] = []
        bytes.reserveCapacity(64)
        json.write(into: &bytes)
        self.bytes = bytes
    }
}

/// The last state a view encoded, and its encoding: when a shared change reaches
/// every session (one database snapshot shown by 10,000 sessions), the states are
/// equal and only the first session encodes; the others reuse its bytes. Used for
/// states that are `Equatable` (arrays built from one snapshot compare by identity
/// first, so a hit costs little).
///
/// The last state and encoding are two fields behind one lock, not a tuple in a
/// `Mutex`: this code runs unspecialized (the state's type is known only at run
/// time), and a tuple of a generic type made the runtime look its metadata up in a
/// locked table on every call (`swift_getTupleTypeMetadata`, 3–7 % of `state search`).
final class EncodedStateCache<State: Encodable & Equatable & Sendable>: @unchecked Sendable {
    private let lock = Mutex<Void>(())
    private var lastState: State?
    private var lastEncoded: EncodedState?

    func encode(_ state: State, with encode: (State) -> JSON) -> EncodedState {
        if let hit = lock.withLock({ _ in lastState == state ? lastEncoded : nil }) { return hit }
        let encoded = EncodedState(encode(state))
        lock.withLock { _ in
            lastState = state
            lastEncoded = encoded
        }
        return encoded
    }
}
