import Testing
import ViewlineKit

/// Finding a command from a line's bytes: the same answers as by name, with no
/// string made for it.
@Suite struct CommandTableTests {
    let table = Vectors.commands

    func index(_ word: String) -> Int? {
        Array(word.utf8).withUnsafeBufferPointer { table.index(ofName: $0) }
    }

    @Test func everyNameIsFoundByItsBytesInAnyASCIICase() {
        for (position, spec) in table.all.enumerated() {
            #expect(index(spec.name) == position)
            #expect(index(spec.name.uppercased()) == position)
            #expect(table.index(named: spec.name.uppercased()) == position)
        }
    }

    @Test func aWordThatNamesNoCommandIsNotFound() {
        for word in ["", "p", "pin", "pingg", "pi ng", "help2", "ping\r", "xyzzy"] {
            #expect(index(word) == nil, "\(word)")
        }
    }

    @Test func nonASCIIBytesAreLeftToTheLookupByName() {
        // The Kelvin sign lowercases to "k" in Unicode: only the name path may decide.
        #expect(index("PİNG") == nil)
        #expect(index("\u{212A}") == nil)
    }

    @Test func aDecodedRequestKnowsItsCommandsPlace() throws {
        let inline = try #require(try RequestDecoder.decode(line: "STATE search", commands: table)?.get())
        #expect(inline.command == table.index(named: "state"))
        #expect(inline == Request(name: "state", arguments: Arguments(["view": "search"])))
        let json = try #require(try RequestDecoder.decode(line: #"{"cmd":"ping"}"#, commands: table)?.get())
        #expect(json.command == table.index(named: "ping"))
    }

    @Test func checkedArgumentsComeInDeclarationOrderWithoutNulls() throws {
        let spec = CommandSpec("pair", summary: "Two arguments.", arguments: [.word("a"), .optionalInteger("b"), .optionalWord("c")])
        let inOrder: JSONObject = ["a": "x", "b": 2]
        #expect(try spec.check(inOrder).json.pairs.map(\.key) == ["a", "b"])
        #expect(try spec.check(["b": 2, "a": "x"]).json == inOrder)
        #expect(try spec.check(["a": "x", "c": .null, "b": 2]).json == inOrder)
        #expect(try spec.check(["a": "x", "b": 2, "c": .null]).json == inOrder)
        #expect(try spec.check(["c": "z", "a": "x"]).json == ["a": "x", "c": "z"])
        #expect(throws: ProtocolError.self) { try spec.check(["b": 2]) }
    }

    @Test func helpMarksAViewsPrimaryLiveAndPagingCommandsAndNothingElse() {
        let plain = CommandSpec("saved", summary: "List saved drafts.")
        #expect(plain.json["primary"] == nil && plain.json["live"] == nil && plain.json["paging"] == nil)
        #expect(CommandSpec("add", summary: "Add.", primary: true).json["primary"] == true)
        #expect(CommandSpec("search", summary: "Search.", live: true).json["live"] == true)
        #expect(CommandSpec("more", summary: "More.", paging: true).json["paging"] == true)
    }
}
