import Testing
import ViewlineProtocol

/// A state's text written as it encodes is the text of its tree: the same bytes for
/// every shape a state takes, and for encodings the writer leaves to the tree.
@Suite struct JSONByteEncoderTests {
    struct Place: Encodable {
        var name: String
        var rating: Double
        var price: Int
        var tags: [String]
        var note: String?
    }

    struct Screen: Encodable {
        var query = "pizza \"quoted\" \\ back\nline"
        var loading = false
        var results: [Place] = []
        var selected: Place?
        var counts: [String: Int] = [:]
        var byNumber: [Int: String] = [:]
        var extra: JSON = ["a": [1, 2.5, "x", nil, true], "b": [:]]
        var small: UInt8 = 7
        var ratio: Float = 0.25
        var huge = 1e300
        var notANumber = Double.nan
        var nested: [[Int]] = [[1, 2], [], [3]]
        var none: Int? = nil
    }

    class Base: Encodable {
        var id = 1
        enum Keys: String, CodingKey { case id }
        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: Keys.self)
            try container.encode(id, forKey: .id)
        }
    }

    final class Derived: Base {
        var label = "derived"
        enum MoreKeys: String, CodingKey { case label }
        override func encode(to encoder: any Encoder) throws {
            try super.encode(to: encoder)
            var container = encoder.container(keyedBy: MoreKeys.self)
            try container.encode(label, forKey: .label)
        }
    }

    /// Encodes one key twice: the tree keeps the last value in the first place.
    struct RepeatedKey: Encodable {
        enum Keys: String, CodingKey { case a, b }
        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: Keys.self)
            try container.encode(1, forKey: .a)
            try container.encode(2, forKey: .b)
            try container.encode(3, forKey: .a)
        }
    }

    /// Writes through a super-encoder.
    struct ThroughSuper: Encodable {
        enum Keys: String, CodingKey { case a }
        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: Keys.self)
            try container.encode(1, forKey: .a)
            try "x".encode(to: container.superEncoder())
        }
    }

    /// Encodes nothing at all.
    struct Nothing: Encodable {
        func encode(to encoder: any Encoder) throws {}
    }

    /// Asks for a keyed container, then writes a single value over it.
    struct Overwritten: Encodable {
        enum Keys: String, CodingKey { case a }
        func encode(to encoder: any Encoder) throws {
            var keyed = encoder.container(keyedBy: Keys.self)
            try keyed.encode(1, forKey: .a)
            var single = encoder.singleValueContainer()
            try single.encode("over")
        }
    }

    static func tree(_ value: some Encodable) throws -> String {
        var out: [UInt8] = []
        try JSON(encoding: value).write(into: &out)
        return String(decoding: out, as: UTF8.self)
    }

    static func written(_ value: some Encodable) throws -> String {
        String(decoding: try JSON.bytes(encoding: value), as: UTF8.self)
    }

    @Test func aStateOfEveryShapeIsWrittenAsItsTree() throws {
        var screen = Screen()
        #expect(try Self.written(screen) == Self.tree(screen))
        let place = Place(name: "Café \u{1F355}", rating: 4.5, price: 2, tags: ["a", "b"], note: nil)
        screen.results = Array(repeating: place, count: 20)
        screen.selected = place
        screen.counts = ["x": 1, "y": 2, "z": 3]
        screen.byNumber = [3: "c", 1: "a"]
        screen.none = 0
        #expect(try Self.written(screen) == Self.tree(screen))
    }

    @Test func valuesOnTheirOwnAreWrittenAsTheirTrees() throws {
        #expect(try Self.written(42) == Self.tree(42))
        #expect(try Self.written("text") == Self.tree("text"))
        #expect(try Self.written([1.5, 2, -0.0]) == Self.tree([1.5, 2, -0.0]))
        #expect(try Self.written(Int?.none) == "null")
        #expect(try Self.written(["k": "v"] as JSON) == #"{"k":"v"}"#)
        #expect(try Self.written([String: Place]()) == "{}")
        #expect(try Self.written([Place]()) == "[]")
    }

    struct Big: Encodable {
        var id = UInt64.max
        var count: UInt = 7
        var maybe: UInt64? = UInt64(Int.max) + 1
        var list: [UInt64] = [1, .max]
    }

    @Test func anUnsignedIntegerPastIntMaxKeepsItsDigits() throws {
        let text = #"{"id":18446744073709551615,"count":7,"maybe":9223372036854775808,"list":[1,18446744073709551615]}"#
        #expect(try Self.written(Big()) == text)
        #expect(try Self.tree(Big()) == text)
        #expect(try Self.written(UInt64.max) == "18446744073709551615")
    }

    @Test func aSubclassWritesItsMembersAfterItsSuperclasss() throws {
        #expect(try Self.written(Derived()) == #"{"id":1,"label":"derived"}"#)
        #expect(try Self.written(Derived()) == Self.tree(Derived()))
    }

    @Test func unusualEncodingsAreLeftToTheTree() throws {
        #expect(try Self.written(RepeatedKey()) == Self.tree(RepeatedKey()))
        #expect(try Self.written(RepeatedKey()) == #"{"a":3,"b":2}"#)
        #expect(try Self.written(ThroughSuper()) == Self.tree(ThroughSuper()))
        #expect(try Self.written(Nothing()) == Self.tree(Nothing()))
        #expect(try Self.written(Overwritten()) == Self.tree(Overwritten()))
        #expect(try Self.written([RepeatedKey(), RepeatedKey()]) == Self.tree([RepeatedKey(), RepeatedKey()]))
    }
}
