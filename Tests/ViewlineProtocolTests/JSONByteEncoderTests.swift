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

    struct Failure: Error {}

    /// Throws after writing `written` keys of its own.
    struct Failing: Encodable {
        var written = 0
        enum Keys: String, CodingKey { case x, y }
        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: Keys.self)
            if written > 0 { try container.encode(1, forKey: .x) }
            if written > 1 { try container.encode(2, forKey: .y) }
            throw Failure()
        }
    }

    /// Catches what its members throw and goes on, as a lossy wrapper does.
    struct Lossy<Member: Encodable>: Encodable {
        var member: Member
        enum Keys: String, CodingKey { case v, w }
        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: Keys.self)
            try? container.encode(member, forKey: .v)
            try container.encode(2, forKey: .w)
        }
    }

    /// An array that leaves out the elements that fail.
    struct LossyArray<Element: Encodable>: Encodable {
        var elements: [Element]
        func encode(to encoder: any Encoder) throws {
            var container = encoder.unkeyedContainer()
            for element in elements { try? container.encode(element) }
        }
    }

    /// Writes a key, then tries it again and ignores the refusal.
    struct RetriedKey: Encodable {
        enum Keys: String, CodingKey { case a }
        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: Keys.self)
            try container.encode(1, forKey: .a)
            try? container.encode(2, forKey: .a)
        }
    }

    /// Wraps whatever its member throws in an error of its own.
    struct Wrapping<Member: Encodable>: Encodable {
        struct Wrapped: Error { var inner: any Error }
        var member: Member
        func encode(to encoder: any Encoder) throws {
            do { try member.encode(to: encoder) } catch { throw Wrapped(inner: error) }
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

    @Test func anErrorCaughtInsideLeavesNoHalfWrittenText() throws {
        for written in 0...2 {
            let lossy = Lossy(member: Failing(written: written))
            #expect(try Self.written(lossy) == Self.tree(lossy))
            #expect(try Self.written(lossy) == #"{"w":2}"#)
        }
        let array = LossyArray(elements: [Failing(written: 1), Failing(written: 0)])
        #expect(try Self.written(array) == Self.tree(array))
        let repeated = LossyArray(elements: [RepeatedKey(), RepeatedKey()])
        #expect(try Self.written(repeated) == Self.tree(repeated))
        #expect(try Self.written(RetriedKey()) == Self.tree(RetriedKey()))
        #expect(try Self.written(RetriedKey()) == #"{"a":2}"#)
    }

    @Test func anErrorThatIsTheValuesOwnIsThrown() throws {
        #expect(throws: Failure.self) { try JSON.bytes(encoding: Failing(written: 1)) }
        #expect(throws: Failure.self) { try JSON.bytes(encoding: [Failing(written: 0)]) }
        // A wrapper that wraps the writer's own refusal: the tree encodes it.
        #expect(try Self.written(Wrapping(member: RepeatedKey())) == #"{"a":3,"b":2}"#)
    }

    @Test func aJSONValueOnItsOwnIsWrittenAsTheTreeEncodesIt() throws {
        for value: JSON in [.number("1.50"), .number("18446744073709551615"), .object(JSONObject([("a", 1), ("a", 2)]))] {
            #expect(try Self.written(value) == Self.tree(value))
        }
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
