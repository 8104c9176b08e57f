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
final class EncodedStateCache<State: Encodable & Equatable & Sendable>: Sendable {
    private let last = Mutex<(state: State, encoded: EncodedState)?>(nil)

    func encode(_ state: State, with encode: (State) -> JSON) -> EncodedState {
        if let hit = last.withLock({ $0?.state == state ? $0?.encoded : nil }) { return hit }
        let encoded = EncodedState(encode(state))
        last.withLock { $0 = (state, encoded) }
        return encoded
    }
}
