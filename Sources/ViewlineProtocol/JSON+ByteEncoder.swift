/// Encodes an `Encodable` value straight into JSON text: the bytes
/// `JSON(encoding:)` and `write(into:)` give together, written as the value encodes
/// itself, without building the tree first (a view's state is encoded on every
/// change it displays: the tree was half of that work, in allocations).
///
/// Values that encode in an unusual way (a key twice, two kinds of container, a
/// nested container or super-encoder, an error thrown inside, even one caught) are
/// encoded through the tree instead, so the bytes are the same.
extension JSON {
    /// `value` as JSON text, keys in the order it encodes them.
    public static func bytes(encoding value: some Encodable) throws -> [UInt8] {
        let writer = ByteWriter()
        do {
            try writer.writeTop(value)
            if !writer.unusual { return writer.out }
        } catch {
            guard writer.unusual else { throw error }
        }
        var out: [UInt8] = []
        try JSON(encoding: value).write(into: &out)
        return out
    }
}

/// The text being written, shared by every nested value's encoder.
///
/// Its fields, and each encoder's `shape`, are reached only by the one encode that
/// made them, never across a call that reaches them again, so they go without the
/// runtime's exclusivity checks (a sixth of the encoding's time with them).
private final class ByteWriter {
    @exclusivity(unchecked) var out: [UInt8] = []
    /// The keys of the objects being written, innermost last: each object's are
    /// checked for a repeat (one array for the whole value, so no allocation per object).
    @exclusivity(unchecked) var keys: [String] = []
    /// Set where a path that cannot throw met an unusual encoding.
    @exclusivity(unchecked) var unusual = false
    /// The encoder of the value being written now, the innermost: only it may write.
    /// A container kept and written to from elsewhere (an outer value's, or one kept
    /// past its value's end) would put its text inside another value's.
    @exclusivity(unchecked) var current: ObjectIdentifier?

    struct Unusual: Error {}

    init() { out.reserveCapacity(256) }

    /// Writes the value being encoded: through its own `encode(to:)`, as the tree
    /// does (a ``JSON`` there encodes its numbers as doubles and its keys once).
    func writeTop(_ value: some Encodable) throws {
        if let leaf = JSON.foundationLeaf(value) { return leaf.write(into: &out) }
        let encoder = ValueEncoder(writer: self, codingPath: [])
        try encode(value, with: encoder)
    }

    /// Writes a value nested in another; a ``JSON`` goes in as it is, as in the tree.
    func write(_ value: some Encodable, at path: [any CodingKey]) throws {
        if let json = value as? JSON { return json.write(into: &out) }
        // Too deep: the tree throws the error.
        if path.count > JSON.maximumEncodingDepth { throw giveUp() }
        if let leaf = JSON.foundationLeaf(value) { return leaf.write(into: &out) }
        try encode(value, with: ValueEncoder(writer: self, codingPath: path))
    }

    /// Any error leaves text that cannot be taken back (a caller may catch it and go
    /// on): once one is thrown, the whole value goes through the tree, which throws
    /// the error again if it is the value's own.
    private func encode(_ value: some Encodable, with encoder: ValueEncoder) throws {
        let outer = current
        current = ObjectIdentifier(encoder)
        defer { current = outer }
        do {
            try value.encode(to: encoder)
            try encoder.finish()
        } catch {
            unusual = true
            throw error
        }
    }

    /// Gives up on writing this value (see ``encode(_:with:)``).
    func giveUp() -> Unusual {
        unusual = true
        return Unusual()
    }
}

/// One value's encoder: what it opened (an object, an array, one value) and how many
/// members it wrote.
private final class ValueEncoder: Encoder {
    enum Shape {
        case none
        /// Its keys are `writer.keys[keysFrom...]`.
        case object(keysFrom: Int)
        case array(count: Int)
        case single
    }

    let writer: ByteWriter
    let codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }
    @exclusivity(unchecked) var shape = Shape.none

    init(writer: ByteWriter, codingPath: [any CodingKey]) {
        self.writer = writer
        self.codingPath = codingPath
    }

    /// Whether this encoder may write now: nothing unusual met yet, and its value is
    /// the one being written (``ByteWriter/current``).
    private var writesNow: Bool { !writer.unusual && writer.current == ObjectIdentifier(self) }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        switch shape {
        case _ where !writesNow: writer.unusual = true
        case .none:
            shape = .object(keysFrom: writer.keys.count)
            writer.out.append(UInt8(ascii: "{"))
        case .object: break
        case .array, .single: writer.unusual = true
        }
        return KeyedEncodingContainer(ByteKeyedContainer<Key>(encoder: self))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        switch shape {
        case _ where !writesNow: writer.unusual = true
        case .none:
            shape = .array(count: 0)
            writer.out.append(UInt8(ascii: "["))
        case .array: break
        case .object, .single: writer.unusual = true
        }
        return ByteUnkeyedContainer(encoder: self)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer { ByteSingleContainer(encoder: self) }

    /// Starts the member `key` of this object.
    func member(_ key: String) throws {
        guard writesNow, case .object(let keysFrom) = shape, !writer.keys[keysFrom...].contains(key) else {
            throw writer.giveUp()
        }
        if writer.keys.count > keysFrom { writer.out.append(UInt8(ascii: ",")) }
        writer.keys.append(key)
        JSON.writeString(key, into: &writer.out)
        writer.out.append(UInt8(ascii: ":"))
    }

    /// Starts the next element of this array.
    func element() throws {
        guard writesNow, case .array(let count) = shape else { throw writer.giveUp() }
        if count > 0 { writer.out.append(UInt8(ascii: ",")) }
        shape = .array(count: count + 1)
    }

    /// Writes this encoder's one value.
    func single(_ value: JSON) throws {
        try beginSingle()
        value.write(into: &writer.out)
    }

    /// Starts this encoder's one value.
    func beginSingle() throws {
        guard writesNow, case .none = shape else { throw writer.giveUp() }
        shape = .single
    }

    /// Closes what this encoder opened; a value that encoded nothing is `null`.
    func finish() throws {
        if writer.unusual { throw writer.giveUp() }
        switch shape {
        case .none: writer.out.append(contentsOf: "null".utf8)
        case .object(let keysFrom):
            writer.keys.removeSubrange(keysFrom...)
            writer.out.append(UInt8(ascii: "}"))
        case .array: writer.out.append(UInt8(ascii: "]"))
        case .single: break
        }
    }
}

private struct ByteKeyedContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let encoder: ValueEncoder
    var codingPath: [any CodingKey] { encoder.codingPath }

    private func set(_ key: Key, _ value: JSON) throws {
        try encoder.member(key.stringValue)
        value.write(into: &encoder.writer.out)
    }

    mutating func encodeNil(forKey key: Key) throws { try set(key, .null) }
    mutating func encode(_ value: Bool, forKey key: Key) throws { try set(key, .bool(value)) }
    mutating func encode(_ value: String, forKey key: Key) throws { try set(key, .string(value)) }
    mutating func encode(_ value: Double, forKey key: Key) throws { try set(key, .double(value)) }
    mutating func encode(_ value: Float, forKey key: Key) throws { try set(key, .double(Double(value))) }
    mutating func encode(_ value: Int, forKey key: Key) throws { try set(key, .int(value)) }
    mutating func encode(_ value: Int8, forKey key: Key) throws { try set(key, .int(Int(value))) }
    mutating func encode(_ value: Int16, forKey key: Key) throws { try set(key, .int(Int(value))) }
    mutating func encode(_ value: Int32, forKey key: Key) throws { try set(key, .int(Int(value))) }
    mutating func encode(_ value: Int64, forKey key: Key) throws { try set(key, .int(Int(value))) }
    mutating func encode(_ value: UInt, forKey key: Key) throws { try set(key, .unsigned(value)) }
    mutating func encode(_ value: UInt8, forKey key: Key) throws { try set(key, .int(Int(value))) }
    mutating func encode(_ value: UInt16, forKey key: Key) throws { try set(key, .int(Int(value))) }
    mutating func encode(_ value: UInt32, forKey key: Key) throws { try set(key, .int(Int(value))) }
    mutating func encode(_ value: UInt64, forKey key: Key) throws { try set(key, .unsigned(value)) }
    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
        try encoder.member(key.stringValue)
        try encoder.writer.write(value, at: codingPath + [key])
    }

    // `nil` is `null`, never a missing key, as in the tree (JSON+Encoder.swift).
    mutating func encodeIfPresent(_ value: Bool?, forKey key: Key) throws { try set(key, value.map { .bool($0) } ?? .null) }
    mutating func encodeIfPresent(_ value: String?, forKey key: Key) throws { try set(key, value.map { .string($0) } ?? .null) }
    mutating func encodeIfPresent(_ value: Double?, forKey key: Key) throws { try set(key, value.map { .double($0) } ?? .null) }
    mutating func encodeIfPresent(_ value: Float?, forKey key: Key) throws { try set(key, value.map { .double(Double($0)) } ?? .null) }
    mutating func encodeIfPresent(_ value: Int?, forKey key: Key) throws { try set(key, value.map { .int($0) } ?? .null) }
    mutating func encodeIfPresent(_ value: Int8?, forKey key: Key) throws { try set(key, value.map { .int(Int($0)) } ?? .null) }
    mutating func encodeIfPresent(_ value: Int16?, forKey key: Key) throws { try set(key, value.map { .int(Int($0)) } ?? .null) }
    mutating func encodeIfPresent(_ value: Int32?, forKey key: Key) throws { try set(key, value.map { .int(Int($0)) } ?? .null) }
    mutating func encodeIfPresent(_ value: Int64?, forKey key: Key) throws { try set(key, value.map { .int(Int($0)) } ?? .null) }
    mutating func encodeIfPresent(_ value: UInt?, forKey key: Key) throws { try set(key, value.map { .unsigned($0) } ?? .null) }
    mutating func encodeIfPresent(_ value: UInt8?, forKey key: Key) throws { try set(key, value.map { .int(Int($0)) } ?? .null) }
    mutating func encodeIfPresent(_ value: UInt16?, forKey key: Key) throws { try set(key, value.map { .int(Int($0)) } ?? .null) }
    mutating func encodeIfPresent(_ value: UInt32?, forKey key: Key) throws { try set(key, value.map { .int(Int($0)) } ?? .null) }
    mutating func encodeIfPresent(_ value: UInt64?, forKey key: Key) throws { try set(key, value.map { .unsigned($0) } ?? .null) }
    mutating func encodeIfPresent<T: Encodable>(_ value: T?, forKey key: Key) throws {
        guard let value else { return try set(key, .null) }
        try encode(value, forKey: key)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
        encoder.unusualEncoder().container(keyedBy: keyType)
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        encoder.unusualEncoder().unkeyedContainer()
    }

    mutating func superEncoder() -> any Encoder { encoder.unusualEncoder() }
    mutating func superEncoder(forKey key: Key) -> any Encoder { encoder.unusualEncoder() }
}

private struct ByteUnkeyedContainer: UnkeyedEncodingContainer {
    let encoder: ValueEncoder
    var codingPath: [any CodingKey] { encoder.codingPath }
    var count: Int {
        guard case .array(let count) = encoder.shape else { return 0 }
        return count
    }

    private func append(_ value: JSON) throws {
        try encoder.element()
        value.write(into: &encoder.writer.out)
    }

    mutating func encodeNil() throws { try append(.null) }
    mutating func encode(_ value: Bool) throws { try append(.bool(value)) }
    mutating func encode(_ value: String) throws { try append(.string(value)) }
    mutating func encode(_ value: Double) throws { try append(.double(value)) }
    mutating func encode(_ value: Int) throws { try append(.int(value)) }
    mutating func encode<T: Encodable>(_ value: T) throws {
        try encoder.element()
        try encoder.writer.write(value, at: codingPath)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
        encoder.unusualEncoder().container(keyedBy: keyType)
    }
    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        encoder.unusualEncoder().unkeyedContainer()
    }
    mutating func superEncoder() -> any Encoder { encoder.unusualEncoder() }
}

private struct ByteSingleContainer: SingleValueEncodingContainer {
    let encoder: ValueEncoder
    var codingPath: [any CodingKey] { encoder.codingPath }

    mutating func encodeNil() throws { try encoder.single(.null) }
    mutating func encode(_ value: Bool) throws { try encoder.single(.bool(value)) }
    mutating func encode(_ value: String) throws { try encoder.single(.string(value)) }
    mutating func encode(_ value: Double) throws { try encoder.single(.double(value)) }
    mutating func encode(_ value: Float) throws { try encoder.single(.double(Double(value))) }
    mutating func encode(_ value: Int) throws { try encoder.single(.int(value)) }
    mutating func encode(_ value: Int8) throws { try encoder.single(.int(Int(value))) }
    mutating func encode(_ value: Int16) throws { try encoder.single(.int(Int(value))) }
    mutating func encode(_ value: Int32) throws { try encoder.single(.int(Int(value))) }
    mutating func encode(_ value: Int64) throws { try encoder.single(.int(Int(value))) }
    mutating func encode(_ value: UInt) throws { try encoder.single(.unsigned(value)) }
    mutating func encode(_ value: UInt8) throws { try encoder.single(.int(Int(value))) }
    mutating func encode(_ value: UInt16) throws { try encoder.single(.int(Int(value))) }
    mutating func encode(_ value: UInt32) throws { try encoder.single(.int(Int(value))) }
    mutating func encode(_ value: UInt64) throws { try encoder.single(.unsigned(value)) }
    mutating func encode<T: Encodable>(_ value: T) throws {
        try encoder.beginSingle()
        try encoder.writer.write(value, at: codingPath)
    }
}

extension ValueEncoder {
    /// A nested container or a super-encoder (an enum's associated values, a
    /// subclass's members written through its superclass's encoding) may be written
    /// after the members that follow it: the tree puts it in its place, so the whole
    /// value goes through the tree.
    func unusualEncoder() -> any Encoder {
        writer.unusual = true
        // Whatever is written to it throws at once: the value's encoding stops
        // there, and nothing below it is walked twice.
        let nowhere = ByteWriter()
        nowhere.unusual = true
        return ValueEncoder(writer: nowhere, codingPath: codingPath)
    }
}
