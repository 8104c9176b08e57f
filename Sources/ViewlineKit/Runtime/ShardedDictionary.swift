/// A dictionary by random 64-bit keys, split by the key's low bits into shards that
/// grow one at a time. A plain dictionary doubles all at once: at 786,432 sessions the
/// registry's rehash took 100 ms here, under the registry's lock, on whichever loop
/// registered the next session, and every other loop that looked a session up waited
/// behind it. A shard holds 1/256 of the entries, so its rehash takes 1/256 as long.
struct ShardedDictionary<Value> {
    static var shardCount: Int { 256 }

    private var shards: [[UInt64: Value]] = Array(repeating: [:], count: shardCount)

    /// Entries held, across the shards.
    private(set) var count = 0

    @inline(__always) private static func shard(of key: UInt64) -> Int {
        Int(truncatingIfNeeded: key) & (shardCount - 1)
    }

    subscript(key: UInt64) -> Value? {
        get { shards[Self.shard(of: key)][key] }
        set {
            let shard = Self.shard(of: key)
            if let newValue {
                if shards[shard].updateValue(newValue, forKey: key) == nil { count += 1 }
            } else if shards[shard].removeValue(forKey: key) != nil {
                count -= 1
            }
        }
        _modify {
            let shard = Self.shard(of: key)
            let had = shards[shard].index(forKey: key) != nil
            yield &shards[shard][key]
            let has = shards[shard].index(forKey: key) != nil
            if had != has { count += has ? 1 : -1 }
        }
    }

    /// Every value, shard by shard.
    var values: some Sequence<Value> { shards.lazy.flatMap(\.values) }
}
