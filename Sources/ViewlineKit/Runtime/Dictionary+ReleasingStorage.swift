extension Dictionary {
    /// Removes `key`'s value and, once the dictionary is empty, its storage too.
    ///
    /// A dictionary keeps its capacity when its last key goes: a detached session would
    /// otherwise hold, for as long as it lives, the empty tables of the connections,
    /// awaited commands and background work it once had (100–140 bytes each).
    @discardableResult
    mutating func removeValueReleasingStorage(forKey key: Key) -> Value? {
        let value = removeValue(forKey: key)
        if isEmpty, capacity > 0 { self = [:] }
        return value
    }
}
