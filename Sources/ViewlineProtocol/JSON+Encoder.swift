import Foundation

/// Encodes any `Encodable` value straight into a ``JSON`` tree, keeping keys in the
/// order the value encodes them (a synthesized `Encodable` uses declaration order),
/// so a view's state reads on the wire the way its type reads in code.
extension JSON {
    /// `value` as JSON, keys in the order it encodes them.
    public init(encoding value: some Encodable) throws {
        if let leaf = JSON.foundationLeaf(value) {
            self = leaf
            return
        }
        let encoder = TreeEncoder(codingPath: [])
        try value.encode(to: encoder)
        self = encoder.storage.resolved()
    }
}

/// Where one encoder writes: a box so nested containers can fill it after returning.
private final class Slot {
    private(set) var value: JSON
    /// Containers and encoders opened inside this value (a nested container, a
    /// super-encoder) fill slots of their own, which may still change after the next
    /// member is written: they are put in their place when the value is read. An
    /// object's by key (a member written straight over one replaces it), an array's
    /// by index.
    private var members: [String: Slot] = [:]
    private var elements: [(index: Int, slot: Slot)] = []

    init(_ value: JSON = .null) { self.value = value }

    /// The value with every nested container's value in its place.
    func resolved() -> JSON {
        switch value {
        case .object(var object) where !members.isEmpty:
            for (key, child) in members { object[key] = child.resolved() }
            return .object(object)
        case .array(var items) where !elements.isEmpty:
            for (index, child) in elements where items.indices.contains(index) { items[index] = child.resolved() }
            return .array(items)
        default:
            return value
        }
    }

    /// Sets the member `key` of this object (nothing if it is no object), in place of
    /// what a nested slot held there.
    func set(_ key: String, _ member: JSON) {
        guard case .object(var object) = value else { return }
        value = .null  // keep the object uniquely referenced while it changes
        object[key] = member
        value = .object(object)
        if !members.isEmpty { members[key] = nil }
    }

    /// Appends an element to this array (nothing if it is no array).
    func append(_ element: JSON) {
        guard case .array(var items) = value else { return }
        value = .null
        items.append(element)
        value = .array(items)
    }

    /// A new value of another kind: what was nested in the old one goes with it.
    func replace(with value: JSON) {
        self.value = value
        if !members.isEmpty { members = [:] }
        if !elements.isEmpty { elements = [] }
    }

    /// Records a nested slot at `key`, in place of any earlier one there.
    func adopt(_ child: Slot, key: String) { members[key] = child }
    /// Records a nested slot at `index` (always a new element).
    func adopt(_ child: Slot, index: Int) { elements.append((index, child)) }
}

private final class TreeEncoder: Encoder {
    let codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }
    let storage: Slot

    init(slot: Slot = Slot(), codingPath: [any CodingKey]) {
        self.storage = slot
        self.codingPath = codingPath
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        if storage.value.objectValue == nil { storage.replace(with: .object(JSONObject())) }
        return KeyedEncodingContainer(KeyedContainer<Key>(slot: storage, codingPath: codingPath))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        if storage.value.arrayValue == nil { storage.replace(with: .array([])) }
        return UnkeyedContainer(slot: storage, codingPath: codingPath)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer { SingleContainer(slot: storage, codingPath: codingPath) }
}

/// Encodes one nested value to a tree.
private func encodeTree<Value: Encodable>(_ value: Value, at path: [any CodingKey]) throws -> JSON {
    if let json = value as? JSON { return json }
    try JSON.checkEncodingDepth(of: value, at: path)
    if let leaf = JSON.foundationLeaf(value) { return leaf }
    let encoder = TreeEncoder(codingPath: path)
    try value.encode(to: encoder)
    return encoder.storage.resolved()
}

private struct KeyedContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let slot: Slot
    let codingPath: [any CodingKey]

    private func set(_ key: Key, _ value: JSON) { slot.set(key.stringValue, value) }

    /// A slot filled later at `key`; the key keeps its place in the object's order.
    private func nestedSlot(_ key: String, _ value: JSON) -> Slot {
        slot.set(key, value)
        let child = Slot(value)
        slot.adopt(child, key: key)
        return child
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
        let child = nestedSlot(key.stringValue, .object(JSONObject()))
        return KeyedEncodingContainer(KeyedContainer<NestedKey>(slot: child, codingPath: codingPath + [key]))
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        UnkeyedContainer(slot: nestedSlot(key.stringValue, .array([])), codingPath: codingPath + [key])
    }

    // A super-encoder's value is the member "super" (or `key`), `{}` if nothing is
    // written to it, as Foundation's JSONEncoder writes it.
    mutating func superEncoder() -> any Encoder {
        TreeEncoder(slot: nestedSlot("super", .object(JSONObject())), codingPath: codingPath + [MemberName("super")])
    }
    mutating func superEncoder(forKey key: Key) -> any Encoder {
        TreeEncoder(slot: nestedSlot(key.stringValue, .object(JSONObject())), codingPath: codingPath + [key])
    }
}

private struct UnkeyedContainer: UnkeyedEncodingContainer {
    let slot: Slot
    let codingPath: [any CodingKey]
    var count: Int { slot.value.arrayValue?.count ?? 0 }

    private func append(_ value: JSON) { slot.append(value) }

    /// A slot filled later, as the next element.
    private func nestedSlot(_ value: JSON) -> (slot: Slot, key: MemberName) {
        append(value)
        let child = Slot(value)
        slot.adopt(child, index: count - 1)
        return (child, MemberName(index: count - 1))
    }

    mutating func encodeNil() throws { append(.null) }
    mutating func encode(_ value: Bool) throws { append(.bool(value)) }
    mutating func encode(_ value: String) throws { append(.string(value)) }
    mutating func encode(_ value: Double) throws { append(.double(value)) }
    mutating func encode(_ value: Int) throws { append(.int(value)) }
    mutating func encode<T: Encodable>(_ value: T) throws { append(try encodeTree(value, at: codingPath)) }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
        let (child, key) = nestedSlot(.object(JSONObject()))
        return KeyedEncodingContainer(KeyedContainer<NestedKey>(slot: child, codingPath: codingPath + [key]))
    }
    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        let (child, key) = nestedSlot(.array([]))
        return UnkeyedContainer(slot: child, codingPath: codingPath + [key])
    }
    mutating func superEncoder() -> any Encoder {
        let (child, key) = nestedSlot(.object(JSONObject()))
        return TreeEncoder(slot: child, codingPath: codingPath + [key])
    }
}

/// A key in a coding path that is not one of the value's own: "super", or an index.
private struct MemberName: CodingKey {
    let stringValue: String
    let intValue: Int?
    init(_ name: String) {
        stringValue = name
        intValue = nil
    }
    init(index: Int) {
        stringValue = "Index \(index)"
        intValue = index
    }
    init?(stringValue: String) { self.init(stringValue) }
    init?(intValue: Int) { self.init(index: intValue) }
}

private struct SingleContainer: SingleValueEncodingContainer {
    let slot: Slot
    let codingPath: [any CodingKey]

    mutating func encodeNil() throws { slot.replace(with: .null) }
    mutating func encode(_ value: Bool) throws { slot.replace(with: .bool(value)) }
    mutating func encode(_ value: String) throws { slot.replace(with: .string(value)) }
    mutating func encode(_ value: Double) throws { slot.replace(with: .double(value)) }
    mutating func encode(_ value: Float) throws { slot.replace(with: .double(Double(value))) }
    mutating func encode(_ value: Int) throws { slot.replace(with: .int(value)) }
    mutating func encode(_ value: Int8) throws { slot.replace(with: .int(Int(value))) }
    mutating func encode(_ value: Int16) throws { slot.replace(with: .int(Int(value))) }
    mutating func encode(_ value: Int32) throws { slot.replace(with: .int(Int(value))) }
    mutating func encode(_ value: Int64) throws { slot.replace(with: .int(Int(value))) }
    mutating func encode(_ value: UInt) throws { slot.replace(with: .unsigned(value)) }
    mutating func encode(_ value: UInt8) throws { slot.replace(with: .int(Int(value))) }
    mutating func encode(_ value: UInt16) throws { slot.replace(with: .int(Int(value))) }
    mutating func encode(_ value: UInt32) throws { slot.replace(with: .int(Int(value))) }
    mutating func encode(_ value: UInt64) throws { slot.replace(with: .unsigned(value)) }
    mutating func encode<T: Encodable>(_ value: T) throws { slot.replace(with: try encodeTree(value, at: codingPath)) }
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
            case .number(let text):
                // All the digits of an integer that fits, as it was parsed or encoded.
                if let unsigned = UInt64(text) {
                    try container.encode(unsigned)
                } else {
                    try container.encode(Double(text) ?? 0)
                }
            case .string(let value): try container.encode(value)
            case .object, .array: break
            }
        }
    }
}

extension JSON {
    /// The deepest a value may nest when encoded (keys and indexes in its coding
    /// path), as Foundation's `JSONEncoder` and the parser's trusted limit allow: a
    /// deeper one (a recursive enum gone wrong) throws instead of exhausting the
    /// thread's stack.
    public static let maximumEncodingDepth = 512

    /// Throws when `path` is past ``maximumEncodingDepth``.
    static func checkEncodingDepth(of value: some Encodable, at path: [any CodingKey]) throws {
        guard path.count > maximumEncodingDepth else { return }
        throw EncodingError.invalidValue(
            value, EncodingError.Context(codingPath: path, debugDescription: "nested deeper than \(maximumEncodingDepth)"))
    }

    /// The Foundation values Foundation's `JSONEncoder` writes as JSON's own, so that
    /// `JSONDecoder` reads them back: a `Decimal` as a number (its own `encode(to:)`
    /// writes its mantissa's parts), a `URL` as its text, `Data` as Base64.
    static func foundationLeaf<Value: Encodable>(_ value: Value) -> JSON? {
        // Comparing types, not casting: this runs for every nested value.
        if Value.self == Decimal.self {
            let decimal = value as! Decimal
            return decimal.isNaN ? .null : .number(decimal.description)
        }
        if Value.self == URL.self { return .string((value as! URL).absoluteString) }
        if Value.self == Data.self { return .string((value as! Data).base64EncodedString()) }
        return nil
    }

    /// An unsigned integer as JSON: a number past `Int.max` keeps its digits
    /// (`.number`) instead of trapping on the conversion.
    static func unsigned<Value: UnsignedInteger & FixedWidthInteger>(_ value: Value) -> JSON {
        Int(exactly: value).map(JSON.int) ?? .number(String(value))
    }
}
