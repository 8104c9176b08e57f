/// The views a session has displayed, by their index in the application: a bit each
/// for the first 64, held in the session itself; a set only for an application with
/// more views than that.
///
/// A `Set<Int>` allocated its table (80 bytes) for every session that displayed
/// anything, which is every session a client ever used.
struct ViewIndexSet: Sendable, Equatable {
    private var first64: UInt64 = 0
    private var rest: Set<Int>?

    func contains(_ index: Int) -> Bool {
        guard index >= 0 else { return false }
        return index < 64 ? first64 & (1 << UInt64(index)) != 0 : rest?.contains(index) ?? false
    }

    mutating func insert(_ index: Int) {
        precondition(index >= 0, "a view's index")
        if index < 64 {
            first64 |= 1 << UInt64(index)
        } else {
            var rest = self.rest ?? []
            rest.insert(index)
            self.rest = rest
        }
    }

    /// The indices, in ascending order.
    func sorted() -> [Int] {
        var indices: [Int] = []
        var bits = first64
        while bits != 0 {
            indices.append(bits.trailingZeroBitCount)
            bits &= bits - 1
        }
        return indices + (rest?.sorted() ?? [])
    }
}
