/// Encodes any `Encodable` value straight into a ``JSON`` tree, keeping keys in the
/// order the value encodes them (a synthesized `Encodable` uses declaration order),
/// so a view's state reads on the wire the way its type reads in code.
extension JSON {
    /// `value` as JSON, keys in the order it encodes them.
    public init(encoding value: some Encodable) throws {
        let encoder = TreeEncoder(codingPath: [])
        try value.encode(to: encoder)
        self = encoder.storage.value
    }
}

/// Where one encoder writes: a box so nested containers can fill it after returning.
private final class Slot {
    var value: JSON = .null
    init() {}
}

private final class TreeEncoder: Encoder {
    let codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }
    let storage = Slot()

    init(codingPath: [any CodingKey]) { self.codingPath = codingPath }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        if storage.value.objectValue == nil { storage.value = .object(JSONObject()) }
        return KeyedEncodingContainer(KeyedContainer<Key>(slot: storage, codingPath: codingPath))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        if storage.value.arrayValue == nil { storage.value = .array([]) }
        return UnkeyedContainer(slot: storage, codingPath: codingPath)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer { SingleContainer(slot: storage, codingPath: codingPath) }
}

/// Encodes one nested value to a tree.
private func encodeTree(_ value: some Encodable, at path: [any CodingKey]) throws -> JSON {
    if let json = value as? JSON { return json }
    let encoder = TreeEncoder(codingPath: path)
    try value.encode(to: encoder)
    return encoder.storage.value
}

private struct KeyedContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let slot: Slot
    let codingPath: [any CodingKey]

    private func set(_ key: Key, _ value: JSON) {
        guard case .object(var object) = slot.value else { return }
        slot.value = .null  // keep the object uniquely referenced while it changes
        object[key.stringValue] = value
        slot.value = .object(object)
    }

    mutating func encodeNil(forKey key: Key) throws { set(key, .null) }
    mutating func encode(_ value: Bool, forKey key: Key) throws { set(key, .bool(value)) }
    mutating func encode(_ value: String, forKey key: Key) throws { set(key, .string(value)) }
    mutating func encode(_ value: Double, forKey key: Key) throws { set(key, .double(value)) }
    mutating func encode(_ value: Float, forKey key: Key) throws { set(key, .double(Double(value))) }
    mutating func encode(_ value: Int, forKey key: Key) throws { set(key, .int(value)) }
    mutating func encode(_ value: Int8, forKey key: Key) throws { set(key, .int(Int(value))) }
    mutating func encode(_ value: Int16, forKey key: Key) throws { set(key, .int(Int(value))) }
    mutating func encode(_ value: Int32, forKey key: Key) throws { set(key, .int(Int(value))) }
    mutating func encode(_ value: Int64, forKey key: Key) throws { set(key, .int(Int(value))) }
    mutating func encode(_ value: UInt, forKey key: Key) throws { set(key, .unsigned(value)) }
    mutating func encode(_ value: UInt8, forKey key: Key) throws { set(key, .int(Int(value))) }
    mutating func encode(_ value: UInt16, forKey key: Key) throws { set(key, .int(Int(value))) }
    mutating func encode(_ value: UInt32, forKey key: Key) throws { set(key, .int(Int(value))) }
    mutating func encode(_ value: UInt64, forKey key: Key) throws { set(key, .unsigned(value)) }
    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
        set(key, try encodeTree(value, at: codingPath + [key]))
    }

    // An optional that is `nil` is written as `null`, never left out (what the
    // synthesized `encodeIfPresent` does by default): a view's keys stay the same
    // from one `display` to the next, for clients that render by shape.
    mutating func encodeIfPresent(_ value: Bool?, forKey key: Key) throws { set(key, value.map { .bool($0) } ?? .null) }
    mutating func encodeIfPresent(_ value: String?, forKey key: Key) throws { set(key, value.map { .string($0) } ?? .null) }
    mutating func encodeIfPresent(_ value: Double?, forKey key: Key) throws { set(key, value.map { .double($0) } ?? .null) }
    mutating func encodeIfPresent(_ value: Float?, forKey key: Key) throws { set(key, value.map { .double(Double($0)) } ?? .null) }
    mutating func encodeIfPresent(_ value: Int?, forKey key: Key) throws { set(key, value.map { .int($0) } ?? .null) }
    mutating func encodeIfPresent(_ value: Int8?, forKey key: Key) throws { set(key, value.map { .int(Int($0)) } ?? .null) }
    mutating func encodeIfPresent(_ value: Int16?, forKey key: Key) throws { set(key, value.map { .int(Int($0)) } ?? .null) }
    mutating func encodeIfPresent(_ value: Int32?, forKey key: Key) throws { set(key, value.map { .int(Int($0)) } ?? .null) }
    mutating func encodeIfPresent(_ value: Int64?, forKey key: Key) throws { set(key, value.map { .int(Int($0)) } ?? .null) }
    mutating func encodeIfPresent(_ value: UInt?, forKey key: Key) throws { set(key, value.map { .unsigned($0) } ?? .null) }
    mutating func encodeIfPresent(_ value: UInt8?, forKey key: Key) throws { set(key, value.map { .int(Int($0)) } ?? .null) }
    mutating func encodeIfPresent(_ value: UInt16?, forKey key: Key) throws { set(key, value.map { .int(Int($0)) } ?? .null) }
    mutating func encodeIfPresent(_ value: UInt32?, forKey key: Key) throws { set(key, value.map { .int(Int($0)) } ?? .null) }
    mutating func encodeIfPresent(_ value: UInt64?, forKey key: Key) throws { set(key, value.map { .unsigned($0) } ?? .null) }
    mutating func encodeIfPresent<T: Encodable>(_ value: T?, forKey key: Key) throws {
        guard let value else { return set(key, .null) }
        try encode(value, forKey: key)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
        preconditionFailure("nested keyed containers are not supported; give the value its own Encodable type")
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        preconditionFailure("nested unkeyed containers are not supported; encode an array instead")
    }

    mutating func superEncoder() -> any Encoder { TreeEncoder(codingPath: codingPath) }
    mutating func superEncoder(forKey key: Key) -> any Encoder { TreeEncoder(codingPath: codingPath + [key]) }
}

private struct UnkeyedContainer: UnkeyedEncodingContainer {
    let slot: Slot
    let codingPath: [any CodingKey]
    var count: Int { slot.value.arrayValue?.count ?? 0 }

    private func append(_ value: JSON) {
        guard case .array(var items) = slot.value else { return }
        slot.value = .null
        items.append(value)
        slot.value = .array(items)
    }

    mutating func encodeNil() throws { append(.null) }
    mutating func encode(_ value: Bool) throws { append(.bool(value)) }
    mutating func encode(_ value: String) throws { append(.string(value)) }
    mutating func encode(_ value: Double) throws { append(.double(value)) }
    mutating func encode(_ value: Int) throws { append(.int(value)) }
    mutating func encode<T: Encodable>(_ value: T) throws { append(try encodeTree(value, at: codingPath)) }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
        preconditionFailure("nested containers in arrays are not supported; encode an Encodable element instead")
    }
    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        preconditionFailure("nested containers in arrays are not supported; encode an array element instead")
    }
    mutating func superEncoder() -> any Encoder { TreeEncoder(codingPath: codingPath) }
}

private struct SingleContainer: SingleValueEncodingContainer {
    let slot: Slot
    let codingPath: [any CodingKey]

    mutating func encodeNil() throws { slot.value = .null }
    mutating func encode(_ value: Bool) throws { slot.value = .bool(value) }
    mutating func encode(_ value: String) throws { slot.value = .string(value) }
    mutating func encode(_ value: Double) throws { slot.value = .double(value) }
    mutating func encode(_ value: Float) throws { slot.value = .double(Double(value)) }
    mutating func encode(_ value: Int) throws { slot.value = .int(value) }
    mutating func encode(_ value: Int8) throws { slot.value = .int(Int(value)) }
    mutating func encode(_ value: Int16) throws { slot.value = .int(Int(value)) }
    mutating func encode(_ value: Int32) throws { slot.value = .int(Int(value)) }
    mutating func encode(_ value: Int64) throws { slot.value = .int(Int(value)) }
    mutating func encode(_ value: UInt) throws { slot.value = .unsigned(value) }
    mutating func encode(_ value: UInt8) throws { slot.value = .int(Int(value)) }
    mutating func encode(_ value: UInt16) throws { slot.value = .int(Int(value)) }
    mutating func encode(_ value: UInt32) throws { slot.value = .int(Int(value)) }
    mutating func encode(_ value: UInt64) throws { slot.value = .unsigned(value) }
    mutating func encode<T: Encodable>(_ value: T) throws { slot.value = try encodeTree(value, at: codingPath) }
}

/// A ``JSON`` value inside an `Encodable` state encodes as itself.
extension JSON: Encodable {
    private struct MemberKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    public func encode(to encoder: any Encoder) throws {
        switch self {
        case .object(let object):
            var container = encoder.container(keyedBy: MemberKey.self)
            for pair in object.pairs { try container.encode(pair.value, forKey: MemberKey(stringValue: pair.key)) }
        case .array(let items):
            var container = encoder.unkeyedContainer()
            for item in items { try container.encode(item) }
        default:
            var container = encoder.singleValueContainer()
            switch self {
            case .null: try container.encodeNil()
            case .bool(let value): try container.encode(value)
            case .int(let value): try container.encode(value)
            case .double(let value): try container.encode(value)
            case .number(let text): try container.encode(Double(text) ?? 0)
            case .string(let value): try container.encode(value)
            case .object, .array: break
            }
        }
    }
}

extension JSON {
    /// An unsigned integer as JSON: a number past `Int.max` keeps its digits
    /// (`.number`) instead of trapping on the conversion.
    static func unsigned<Value: UnsignedInteger & FixedWidthInteger>(_ value: Value) -> JSON {
        Int(exactly: value).map(JSON.int) ?? .number(String(value))
    }
}
