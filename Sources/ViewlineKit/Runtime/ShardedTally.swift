#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
import Foundation
import Synchronization

/// Counters that every event loop adds to at once without sharing a cache line:
/// each thread adds to its own copy of the slots (its shard), and a read sums the
/// shards. An add is one relaxed atomic add on memory only that thread writes; one
/// shared counter, or a histogram behind a lock, makes every loop's add move the
/// line between cores, which cost pipelined `ping` 6–12 % with metrics on.
///
/// Slots are plain integers; the caller gives them meaning (a histogram's buckets,
/// its sum, a count).
final class ShardedTally: @unchecked Sendable {
    /// Slots per shard.
    let slots: Int
    private let shards: Int
    /// Ints from one shard to the next: whole cache lines, so shards never share one.
    private let stride: Int
    private let storage: UnsafeMutablePointer<Atomic<Int>>

    init(slots: Int, shards: Int = min(64, max(4, 2 * ProcessInfo.processInfo.activeProcessorCount))) {
        self.slots = slots
        self.shards = shards
        stride = (slots + 7) / 8 * 8
        let count = shards * stride
        let raw = UnsafeMutableRawPointer.allocate(byteCount: count * MemoryLayout<Atomic<Int>>.stride, alignment: 64)
        storage = raw.bindMemory(to: Atomic<Int>.self, capacity: count)
        for index in 0..<count { (storage + index).initialize(to: Atomic(0)) }
    }

    deinit {
        storage.deinitialize(count: shards * stride)
        UnsafeMutableRawPointer(storage).deallocate()
    }

    /// Adds `value` to `slot` in the calling thread's shard.
    @inline(__always)
    func add(_ value: Int, to slot: Int) {
        storage[ShardedTally.threadShard % shards &* stride &+ slot].wrappingAdd(value, ordering: .relaxed)
    }

    /// `slot` summed over every shard (each shard read atomically; adds racing the
    /// read land in this read or the next).
    func sum(_ slot: Int) -> Int {
        var total = 0
        for shard in 0..<shards { total &+= storage[shard * stride + slot].load(ordering: .relaxed) }
        return total
    }

    /// A number for the calling thread, fixed for its life: threads are numbered in
    /// the order they first add, so a server's few event-loop threads get shards of
    /// their own.
    static var threadShard: Int {
        @inline(__always) get {
            if let mark = pthread_getspecific(shardKey) { return Int(bitPattern: mark) &- 1 }
            let shard = nextShard.wrappingAdd(1, ordering: .relaxed).oldValue
            pthread_setspecific(shardKey, UnsafeRawPointer(bitPattern: shard + 1))
            return shard
        }
    }
}

private let shardKey: pthread_key_t = {
    var key = pthread_key_t()
    pthread_key_create(&key, nil)
    return key
}()

private let nextShard = Atomic<Int>(0)
