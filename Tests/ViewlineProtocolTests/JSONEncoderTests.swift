import Testing
import Foundation
import ViewlineProtocol

/// States become JSON through the runtime's own encoder.
@Suite struct JSONEncoderTests {
    struct Profile: Encodable {
        var name: String
        var nickname: String?
        var age: Int?
        var tags: [String]?
    }

    @Test func aNilOptionalIsNullNotAMissingKey() throws {
        let empty = try JSON(encoding: Profile(name: "Ada", nickname: nil, age: nil, tags: nil))
        for key in ["nickname", "age", "tags"] {
            #expect(empty.encoded.contains(#""\#(key)":null"#), "\(key) in \(empty.encoded)")
        }
        let full = try JSON(encoding: Profile(name: "Ada", nickname: "A", age: 36, tags: ["x"]))
        #expect(full["age"] == 36 && full["nickname"] == "A" && full["tags"]?.arrayValue?.first == "x")
    }
}

/// Values that encode through nested containers (an enum's associated values, a
/// `Decimal`, a hand-written `encode(to:)`) and super-encoders.
@Suite struct NestedContainerEncodingTests {
    enum Phase: Codable, Equatable {
        case idle
        case loaded(items: [String], page: Int)
        case failed(String)
    }

    struct Screen: Codable, Equatable {
        var title: String
        var phase: Phase
        var history: [Phase]
    }

    /// Opens two nested containers and writes to the first after the second.
    struct Interleaved: Encodable {
        enum Key: String, CodingKey { case first, second, last }
        enum Inner: String, CodingKey { case a, b }
        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: Key.self)
            var first = container.nestedContainer(keyedBy: Inner.self, forKey: .first)
            var second = container.nestedUnkeyedContainer(forKey: .second)
            try container.encode(3, forKey: .last)
            try first.encode(1, forKey: .a)
            try second.encode("x")
            var deeper = second.nestedContainer(keyedBy: Inner.self)
            try second.encode("y")
            try deeper.encode(2, forKey: .b)
            var pair = second.nestedUnkeyedContainer()
            try pair.encode(true)
            try first.encode("late", forKey: .b)
        }
    }

    /// Writes a member straight over a nested container opened at the same key.
    struct Replaced: Encodable {
        enum Key: String, CodingKey { case a }
        enum Inner: String, CodingKey { case x }
        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: Key.self)
            var nested = container.nestedContainer(keyedBy: Inner.self, forKey: .a)
            try container.encode(1, forKey: .a)
            try nested.encode(2, forKey: .x)
        }
    }

    /// Writes through super-encoders, keyed and in an array.
    struct ThroughSupers: Encodable {
        enum Key: String, CodingKey { case base, own }
        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: Key.self)
            try "parent".encode(to: container.superEncoder())
            try 7.encode(to: container.superEncoder(forKey: .base))
            try container.encode("mine", forKey: .own)
        }
    }

    struct InArray: Encodable {
        func encode(to encoder: any Encoder) throws {
            var list = encoder.unkeyedContainer()
            try list.encode(1)
            try [2, 3].encode(to: list.superEncoder())
        }
    }

    static func both(_ value: some Encodable) throws -> (tree: String, bytes: String) {
        (try JSON(encoding: value).encoded, String(decoding: try JSON.bytes(encoding: value), as: UTF8.self))
    }

    @Test func anEnumWithAssociatedValuesReadsBackAsItself() throws {
        let screen = Screen(title: "Places", phase: .loaded(items: ["Thai", "Pizza"], page: 2), history: [.idle, .failed("offline")])
        let (tree, bytes) = try Self.both(screen)
        #expect(tree == bytes)
        let phase = #"{"loaded":{"items":["Thai","Pizza"],"page":2}}"#
        #expect(tree == #"{"title":"Places","phase":\#(phase),"history":[{"idle":{}},{"failed":{"_0":"offline"}}]}"#)
        #expect(try JSONDecoder().decode(Screen.self, from: Data(bytes.utf8)) == screen)
    }

    @Test func aDecimalReadsBackAsItself() throws {
        let prices: [Decimal] = [Decimal(string: "19.99")!, 0, Decimal(string: "-1234567.000001")!]
        let (tree, bytes) = try Self.both(prices)
        #expect(tree == bytes)
        #expect(tree == "[19.99,0,-1234567.000001]")
        #expect(try JSONDecoder().decode([Decimal].self, from: Data(bytes.utf8)) == prices)
        #expect(try Self.both(Decimal.nan) == ("null", "null"))
    }

    @Test func aURLIsItsText() throws {
        let link = URL(string: "https://example.com/menu?lang=th")!
        let (tree, bytes) = try Self.both(["link": link])
        #expect(tree == #"{"link":"https://example.com/menu?lang=th"}"#)
        #expect(bytes == tree)
    }

    @Test func aNestedContainerFilledLaterIsInItsPlace() throws {
        let (tree, bytes) = try Self.both(Interleaved())
        #expect(tree == #"{"first":{"a":1,"b":"late"},"second":["x",{"b":2},"y",[true]],"last":3}"#)
        #expect(bytes == tree)
    }

    @Test func aMemberWrittenOverANestedContainerWins() throws {
        let (tree, bytes) = try Self.both(Replaced())
        #expect(tree == #"{"a":1}"#)
        #expect(bytes == tree)
    }

    @Test func aSuperEncoderWritesTheMemberSuperOrItsKey() throws {
        let (tree, bytes) = try Self.both(ThroughSupers())
        #expect(tree == #"{"super":"parent","base":7,"own":"mine"}"#)
        #expect(bytes == tree)
        let (array, arrayBytes) = try Self.both(InArray())
        #expect(array == "[1,[2,3]]")
        #expect(arrayBytes == array)
    }
}

/// Hand-written encodings that keep a container and write to it from elsewhere: the
/// byte encoder leaves them to the tree (it used to write text inside another value,
/// or trap).
@Suite struct KeptContainerEncodingTests {
    /// Where `Leaky` keeps its own container (one test at a time uses it).
    final class Stash: @unchecked Sendable {
        var keyed: KeyedEncodingContainer<Key>?
        var unkeyed: (any UnkeyedEncodingContainer)?
        var encoder: (any Encoder)?
    }
    enum Key: String, CodingKey { case a, b, x, y, inner }

    /// Keeps its own container (keyed or unkeyed) and its encoder past its end.
    struct Leaky: Encodable {
        let stash: Stash
        let keyed: Bool
        func encode(to encoder: any Encoder) throws {
            stash.encoder = encoder
            if keyed {
                var container = encoder.container(keyedBy: Key.self)
                try container.encode(1, forKey: .a)
                stash.keyed = container
            } else {
                var container = encoder.unkeyedContainer()
                try container.encode(1)
                stash.unkeyed = container
            }
        }
    }

    /// Writes `Leaky`, then writes to what it kept, then goes on.
    struct Outer: Encodable {
        let stash: Stash
        let keyed: Bool
        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: Key.self)
            try container.encode(Leaky(stash: stash, keyed: keyed), forKey: .x)
            if keyed { try stash.keyed?.encode(2, forKey: .b) } else { try stash.unkeyed?.encode(2) }
            try container.encode(3, forKey: .y)
        }
    }

    /// `Outer` one level down.
    struct Wrapper: Encodable {
        let stash: Stash
        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: Key.self)
            try container.encode(Outer(stash: stash, keyed: true), forKey: .inner)
            try container.encode(4, forKey: .a)
        }
    }

    /// Writes to its parent's container while its own value is being written.
    struct Interrupting: Encodable {
        let stash: Stash
        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: Key.self)
            try container.encode(1, forKey: .a)
            try stash.keyed?.encode(2, forKey: .b)
            _ = stash.encoder?.unkeyedContainer()
        }
    }

    struct Parent: Encodable {
        let stash: Stash
        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: Key.self)
            stash.keyed = container
            stash.encoder = encoder
            try container.encode(Interrupting(stash: stash), forKey: .x)
        }
    }

    static func check(_ value: some Encodable) throws -> String {
        let tree = try JSON(encoding: value).encoded
        let bytes = try JSON.bytes(encoding: value)
        #expect(String(decoding: bytes, as: UTF8.self) == tree)
        #expect((try? JSON.parse(bytes)) != nil, "valid JSON")
        return tree
    }

    @Test func aContainerWrittenAfterItsValueEndedIsLeftToTheTree() throws {
        #expect(try Self.check(Outer(stash: Stash(), keyed: true)) == #"{"x":{"a":1},"y":3}"#)
        #expect(try Self.check(Outer(stash: Stash(), keyed: false)) == #"{"x":[1],"y":3}"#)
        #expect(try Self.check(Wrapper(stash: Stash())) == #"{"inner":{"x":{"a":1},"y":3},"a":4}"#)
    }

    @Test func aParentsContainerWrittenFromInsideAChildIsLeftToTheTree() throws {
        _ = try Self.check(Parent(stash: Stash()))
    }
}

/// Foundation's other values and the shapes of unused super-encoders.
@Suite struct FoundationValueEncodingTests {
    class Base: Codable {
        init() {}
        func encode(to encoder: any Encoder) throws {}
        required init(from decoder: any Decoder) throws { _ = try decoder.container(keyedBy: CodingKeys.self) }
        private enum CodingKeys: CodingKey {}
    }

    final class Derived: Base {
        var name = "d"
        enum Key: CodingKey { case name }
        override init() { super.init() }
        override func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: Key.self)
            try container.encode(name, forKey: .name)
            try super.encode(to: container.superEncoder())
        }
        required init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: Key.self)
            name = try container.decode(String.self, forKey: .name)
            try super.init(from: container.superDecoder())
        }
    }

    @Test func anUnusedSuperEncoderIsAnEmptyObject() throws {
        let text = try JSON(encoding: Derived()).encoded
        #expect(text == #"{"name":"d","super":{}}"#)
        #expect(String(decoding: try JSON.bytes(encoding: Derived()), as: UTF8.self) == text)
        #expect(try JSONDecoder().decode(Derived.self, from: Data(text.utf8)).name == "d")
    }

    @Test func dataIsBase64() throws {
        let blob = Data([0, 1, 2, 250, 255])
        let text = try JSON(encoding: ["blob": blob]).encoded
        #expect(text == #"{"blob":"AAEC+v8="}"#)
        #expect(try JSONDecoder().decode([String: Data].self, from: Data(text.utf8)) == ["blob": blob])
    }

    /// Opens an array with a nested one, then a keyed container, then an array again.
    struct Switching: Encodable {
        enum Key: CodingKey { case k }
        func encode(to encoder: any Encoder) throws {
            var first = encoder.unkeyedContainer()
            var stale = first.nestedUnkeyedContainer()
            try stale.encode("stale")
            _ = encoder.container(keyedBy: Key.self)
            var again = encoder.unkeyedContainer()
            try again.encode("fresh")
        }
    }

    @Test func aContainerOfAnotherKindDropsWhatWasNestedInTheOld() throws {
        #expect(try JSON(encoding: Switching()).encoded == #"["fresh"]"#)
        #expect(String(decoding: try JSON.bytes(encoding: Switching()), as: UTF8.self) == #"["fresh"]"#)
    }
}

/// A value nested past `JSON.maximumEncodingDepth` (a recursive enum gone wrong)
/// throws from both encoders instead of exhausting the stack.
@Suite struct EncodingDepthTests {
    indirect enum Chain: Encodable {
        case end
        case link(Chain)

        static func of(_ depth: Int) -> Chain {
            (0..<depth).reduce(Chain.end) { chain, _ in .link(chain) }
        }
    }

    @Test func aValueNestedTooDeepThrows() throws {
        // Each enum level is two levels of the coding path (its case, its `_0`).
        let deep = Chain.of(1_000)
        #expect(throws: EncodingError.self) { try JSON(encoding: deep) }
        #expect(throws: EncodingError.self) { try JSON.bytes(encoding: deep) }
        let fine = Chain.of(200)
        #expect(try JSON.bytes(encoding: fine) == Array(try JSON(encoding: fine).encoded.utf8))
    }
}
