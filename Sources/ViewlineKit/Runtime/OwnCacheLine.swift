/// A value on cache lines no other object shares: a 64-byte-aligned allocation of
/// whole lines, for the fields a session writes on every command.
///
/// An object's fields share their first and last cache lines with whatever the
/// allocator put beside it, and a chunk one event loop's thread freed is reused by
/// the other's, so those neighbours may be another loop's hot memory: each write
/// would then take the line from the other core and back. The value's owner touches
/// it on one executor, one access at a time (no lock, no exclusivity check).
struct OwnCacheLine<Value>: ~Copyable {
    private static var lineSize: Int { 64 }
    private let pointer: UnsafeMutablePointer<Value>

    init(_ value: consuming Value) {
        let size = (MemoryLayout<Value>.stride + Self.lineSize - 1) / Self.lineSize * Self.lineSize
        pointer = UnsafeMutableRawPointer.allocate(byteCount: max(size, Self.lineSize), alignment: Self.lineSize)
            .bindMemory(to: Value.self, capacity: 1)
        pointer.initialize(to: value)
    }

    deinit {
        pointer.deinitialize(count: 1)
        pointer.deallocate()
    }

    /// The value, read or changed in place.
    var value: Value {
        @inline(__always) _read { yield pointer.pointee }
        @inline(__always) nonmutating _modify { yield &pointer.pointee }
    }
}
