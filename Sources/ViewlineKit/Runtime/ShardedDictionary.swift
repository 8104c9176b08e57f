/// A dictionary by random 64-bit keys, split by the key's low bits into shards that
/// grow one at a time. A plain dictionary doubles all at once: at 786,432 sessions the
/// registry's rehash took 100 ms here, under the registry's lock, on whichever loop
/// registered the next session, and every other loop that looked a session up waited
/// behind it. A shard holds 1/256 of the entries, so its rehash takes 1/256 as long.
struct ShardedDictionary<Value> {
    static var shardCount: Int { 256 }

    private var shards: [[UInt64: Value]] = Array(repeating: [:], count: shardCount)

    @inline(__always) private static func shard(of key: UInt64) -> Int {
        Int(truncatingIfNeeded: key) & (shardCount - 1)
    }

    /// Entries held, summed over the shards when asked (a registration asks; a lookup
    /// or an update in place pays nothing for it).
    var count: Int { shards.reduce(0) { $0 + $1.count } }

    subscript(key: UInt64) -> Value? {
        get { shards[Self.shard(of: key)][key] }
        _modify { yield &shards[Self.shard(of: key)][key] }
    }

    /// Every value, shard by shard.
    var values: some Sequence<Value> { shards.lazy.flatMap(\.values) }
}
