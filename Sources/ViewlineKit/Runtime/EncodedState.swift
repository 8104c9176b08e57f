import Synchronization

/// A view's state in its wire form: its encoded bytes (for `display` lines, `state`
/// replies and records), written straight from the state (``JSON/bytes(encoding:)``).
struct EncodedState: Sendable {
    let bytes: [UInt8]
    /// An equal state already kept (from ``EncodedStateCache``): a session stores it
    /// instead of its own copy, so equal states share their storage too.
    var canonical: (any Sendable)? = nil

    init(_ json: JSON) {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(256)
        json.write(into: &bytes)
        self.init(bytes: bytes)
    }

    init(bytes: [UInt8]) {
        // Kept by every event log that shows it: exactly its size, not the slack
        // left by growing while writing.
        self.bytes = bytes.count * 5 / 4 < bytes.capacity ? bytes.withUnsafeBufferPointer { Array($0) } : bytes
    }

    /// The state as a tree (the inspector, a view's declared fields), read back from
    /// its bytes when asked: nothing on the path of a display keeps one. A state past
    /// what the server reads back of its own (``JSONParser/Limits/trusted``: 512 levels
    /// deep) shows as a string saying so.
    var json: JSON {
        (try? JSON.parse(bytes)) ?? .string("(a state of \(bytes.count) bytes, past what the server reads back)")
    }
}

/// The last states a view encoded, and their encodings: when a shared change reaches
/// every session (one database snapshot shown by 10,000 sessions), or sessions go
/// through the same steps (search "pizza": loading, then the same results), the
/// states are equal and only the first session encodes; the others reuse its bytes,
/// and their event logs share them. Used for states that are `Equatable` (arrays
/// built from one snapshot compare by identity first, so a hit costs little).
///
/// States and encodings are plain fields behind one lock, not tuples in a `Mutex`:
/// this code runs unspecialized (the state's type is known only at run time), and a
/// tuple of a generic type made the runtime look its metadata up in a locked table
/// on every call (`swift_getTupleTypeMetadata`, 3–7 % of `state search`).
final class EncodedStateCache<State: Encodable & Equatable & Sendable>: @unchecked Sendable {
    /// How many recent states are kept: a flow shows a few states in turn (a search's
    /// "loading", then its results), and sessions going through it one after another
    /// must still find each.
    static var capacity: Int { 4 }

    private let lock = Mutex<Void>(())
    private var states: [State] = []
    private var encodings: [EncodedState] = []

    func encode(_ state: State, with encode: (State) -> [UInt8]) -> EncodedState {
        let hit: EncodedState? = lock.withLock { _ in
            // A plain loop: `firstIndex(of:)` here went through the generic collection
            // algorithm, looking `[State]`'s metadata up on every call (4 % of `state search`).
            for index in 0..<states.count where states[index] == state {
                var hit = encodings[index]
                hit.canonical = states[index]
                return hit
            }
            return nil
        }
        if let hit { return hit }
        let encoded = EncodedState(bytes: encode(state))
        lock.withLock { _ in
            if states.count == Self.capacity {
                states.removeFirst()
                encodings.removeFirst()
            }
            states.append(state)
            encodings.append(encoded)
        }
        return encoded
    }
}
