import Foundation

/// A JSON value whose objects keep their keys in insertion order.
///
/// Order matters on the wire: every server line starts with `"type"`, which keeps
/// transcripts readable and lets test vectors compare lines textually.
public enum JSON: Sendable, Hashable {
    /// `null`.
    case null
    /// `true` or `false`.
    case bool(Bool)
    /// A number without a fraction or exponent that fits in an `Int`.
    case int(Int)
    /// Any other number.
    case double(Double)
    /// A number kept as its text: a request's `id` that would not be written back
    /// the same way as an `int` or a `double` (its reply echoes it byte for byte), and
    /// an integer past `Int`'s range (`18446744073709551615`), parsed or encoded, whose
    /// digits a double would round.
    case number(String)
    /// A string.
    case string(String)
    /// An array.
    case array([JSON])
    /// An object, keys in order.
    case object(JSONObject)
}

/// An insertion-ordered JSON object.
public struct JSONObject: Sendable, Hashable, ExpressibleByDictionaryLiteral {
    /// The members in order.
    public private(set) var pairs: [(key: String, value: JSON)]

    /// An empty object.
    public init() { pairs = [] }
    /// An object with the literal's members, in order.
    public init(dictionaryLiteral elements: (String, JSON)...) {
        pairs = elements.map { (key: $0.0, value: $0.1) }
    }
    /// An object with `elements`, in order.
    public init(_ elements: [(String, JSON)]) {
        pairs = elements.map { (key: $0.0, value: $0.1) }
    }

    /// The value under `key`; setting `nil` removes the member, setting a new key appends it.
    public subscript(key: String) -> JSON? {
        get { pairs.first { $0.key == key }?.value }
        set {
            if let index = pairs.firstIndex(where: { $0.key == key }) {
                if let newValue { pairs[index].value = newValue } else { pairs.remove(at: index) }
            } else if let newValue {
                pairs.append((key: key, value: newValue))
            }
        }
    }

    /// The keys in order.
    public var keys: [String] { pairs.map(\.key) }
    /// Whether the object has no members.
    public var isEmpty: Bool { pairs.isEmpty }

    /// Whether both hold the same members, in any order (as JSON objects compare).
    public static func == (lhs: JSONObject, rhs: JSONObject) -> Bool {
        guard lhs.pairs.count == rhs.pairs.count else { return false }
        // Objects built the same way keep the same order: compared side by side,
        // with no lookup, unless a key differs where it stands.
        for index in lhs.pairs.indices {
            let (left, right) = (lhs.pairs[index], rhs.pairs[index])
            guard left.key == right.key else { return lhs.hasSameMembers(as: rhs, from: index) }
            guard left.value == right.value else { return false }
        }
        return true
    }

    /// Whether `other` holds each of this object's members from `start` on, looked
    /// up by key (the same count, compared before): by scanning a few, in a table
    /// past that, so objects of thousands of keys in different orders compare in
    /// time in proportion.
    private func hasSameMembers(as other: JSONObject, from start: Int) -> Bool {
        if pairs.count - start <= 16 {
            for pair in pairs[start...] where other[pair.key] != pair.value { return false }
            return true
        }
        let table = Dictionary(other.pairs[start...].map { ($0.key, $0.value) }) { first, _ in first }
        for pair in pairs[start...] where table[pair.key] != pair.value { return false }
        return true
    }

    public func hash(into hasher: inout Hasher) {
        for pair in pairs.sorted(by: { $0.key < $1.key }) {
            hasher.combine(pair.key)
            hasher.combine(pair.value)
        }
    }
}

extension JSON: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByBooleanLiteral,
    ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral, ExpressibleByNilLiteral, ExpressibleByFloatLiteral
{
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int) { self = .int(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(floatLiteral value: Double) { self = .double(value) }
    public init(arrayLiteral elements: JSON...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, JSON)...) { self = .object(JSONObject(elements)) }
    public init(nilLiteral: ()) { self = .null }
}

extension JSON {
    /// The member `key` of an object; `nil` for a missing key or a value that is not an
    /// object. Setting it changes an object's member (`nil` removes it; a new key is
    /// appended) and leaves any other value as it is.
    public subscript(key: String) -> JSON? {
        get {
            if case .object(let object) = self { return object[key] }
            return nil
        }
        set {
            guard case .object(var object) = self else { return }
            self = .null  // the object's storage is uniquely referenced while it changes
            object[key] = newValue
            self = .object(object)
        }
    }

    /// The string, if this is one.
    public var stringValue: String? { if case .string(let s) = self { return s } else { return nil } }
    /// The boolean, if this is one.
    public var boolValue: Bool? { if case .bool(let b) = self { return b } else { return nil } }
    /// The number as an `Int`, if it is a whole number that fits.
    public var intValue: Int? {
        switch self {
        case .int(let i): return i
        case .double(let d) where d.rounded() == d && abs(d) < 9e15: return Int(d)
        case .number(let text): return JSON.double(Double(text) ?? .nan).intValue
        default: return nil
        }
    }
    /// The number as a `Double`, if this is a number.
    public var doubleValue: Double? {
        switch self {
        case .int(let i): return Double(i)
        case .double(let d): return d
        case .number(let text): return Double(text)
        default: return nil
        }
    }
    /// The elements, if this is an array.
    public var arrayValue: [JSON]? { if case .array(let a) = self { return a } else { return nil } }
    /// The object, if this is one.
    public var objectValue: JSONObject? { if case .object(let o) = self { return o } else { return nil } }
    /// Whether this is `null`.
    public var isNull: Bool { if case .null = self { return true } else { return false } }
}
