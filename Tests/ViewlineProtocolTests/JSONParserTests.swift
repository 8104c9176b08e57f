import Testing
import ViewlineKit

/// The one-pass JSON reader: RFC 8259 values, ordered keys, and the limits that
/// keep a hostile line's cost proportional to its length (PROTOCOL §8).
@Suite struct JSONParserTests {
    func parse(_ text: String, limits: JSONParser.Limits = .trusted) throws -> JSON {
        try JSON.parse(Array(text.utf8), limits: limits)
    }

    @Test func valuesOfEveryKind() throws {
        let value = try parse(#" {"a": [1, -2.5, 1e3, true, false, null], "b": "x\"\\\/\n\u00e9\ud83d\ude00", "c": {}} "#)
        #expect(value == ["a": [1, -2.5, 1000.0, true, false, nil], "b": "x\"\\/\né😀", "c": [:]])
        #expect(value.objectValue?.keys == ["a", "b", "c"])
        #expect(try parse("9223372036854775807") == .int(Int.max))
        #expect(try parse("1.5e300") == .double(1.5e300))
    }

    @Test func objectsAreEqualWhenTheirMembersAreWhateverTheirOrder() throws {
        #expect(try parse(#"{"a":1,"b":[2,{"c":3}]}"#) == parse(#"{"a":1,"b":[2,{"c":3}]}"#))
        #expect(try parse(#"{"a":1,"b":2,"c":3}"#) == parse(#"{"a":1,"c":3,"b":2}"#))
        #expect(try parse(#"{"a":1,"b":2}"#) != parse(#"{"a":1,"b":3}"#))
        #expect(try parse(#"{"a":1,"b":2}"#) != parse(#"{"a":1,"c":2}"#))
        #expect(try parse(#"{"a":1,"b":2}"#) != parse(#"{"a":1}"#))
        // Wide objects in different orders: looked up in a table, not by scanning.
        let keys = (0..<5_000).map { "k\($0)" }
        let forward = JSONObject(keys.map { ($0, JSON.int(1)) })
        #expect(forward == JSONObject(keys.reversed().map { ($0, JSON.int(1)) }))
        #expect(forward != JSONObject(keys.reversed().map { ($0, JSON.int($0 == "k7" ? 2 : 1)) }))
    }

    @Test func anIntegerPastIntKeepsItsDigits() throws {
        // As the encoders write a UInt64 (8937b15): read back, written again, the same.
        for text in ["18446744073709551615", "92233720368547758070", "-9223372036854775809"] {
            let value = try parse(text)
            #expect(value == .number(text))
            #expect(value.encoded == text)
        }
        let state = try parse(#"{"id":18446744073709551615,"n":2}"#)
        #expect(state.encoded == #"{"id":18446744073709551615,"n":2}"#)
        #expect(state["id"]?.intValue == nil && state["id"]?.doubleValue == 18446744073709551615)
        // Encoded inside a state (a JSON value in an Encodable), the digits stay.
        struct Holder: Encodable { var value: JSON }
        #expect(try JSON(encoding: Holder(value: state)).encoded == #"{"value":{"id":18446744073709551615,"n":2}}"#)
        let big = JSON.number("18446744073709551615")
        #expect(try JSON(encoding: big) == big)
        #expect(try JSON.bytes(encoding: big) == Array("18446744073709551615".utf8))
    }

    @Test(arguments: [
        "", "{", "[1,]", "{\"a\" 1}", "{\"a\":1,}", "01", "1.", "-", "\"\u{01}\"", "\"\\ud800\"", "\"\\x\"",
        "tru", "nul", "[1] 2", "{\"a\":1,\"a\":2}", "\"unterminated", "1e999",
    ])
    func malformedDocumentsAreRefused(_ text: String) {
        #expect(throws: (any Error).self, "\(text)") { try parse(text) }
    }

    @Test func aNumberPastADoublesRangeIsRefusedWhereverItIs() throws {
        // The top-level id included: echoed, it would be a reply no client could read.
        for text in [#"{"id":1e400,"cmd":"ping"}"#, #"{"id":-1E+999}"#, #"{"args":{"id":1e400}}"#, #"[1e400]"#] {
            #expect(throws: (any Error).self, "\(text)") { try parse(text) }
        }
        // Below the smallest double it is zero, kept as written when it is the id.
        #expect(try parse(#"{"id":1e-400}"#)["id"] == .number("1e-400"))
    }

    @Test func aDeepDocumentIsRefusedAtTheDepthLimit() throws {
        let deep = String(repeating: "[", count: 33) + String(repeating: "]", count: 33)
        #expect(throws: JSONParser.Failure.tooComplex("nested deeper than 32")) { try parse(deep, limits: .request) }
        let ok = String(repeating: "[", count: 32) + String(repeating: "]", count: 32)
        #expect(try parse(ok, limits: .request).arrayValue != nil)
    }

    @Test func wideDocumentsAreRefusedAtTheKeyAndValueLimits() throws {
        let keys = "{" + (0...256).map { "\"k\($0)\":0" }.joined(separator: ",") + "}"
        #expect(throws: JSONParser.Failure.tooComplex("an object with more than 256 keys")) { try parse(keys, limits: .request) }
        let values = "[" + Array(repeating: "0", count: 4096).joined(separator: ",") + "]"
        #expect(throws: JSONParser.Failure.tooComplex("more than 4096 values")) { try parse(values, limits: .request) }
        // Duplicate keys are found in a wide object too (by a set, not by scanning).
        let duplicate = "{" + (0..<200).map { "\"k\($0)\":0" }.joined(separator: ",") + ",\"k150\":1}"
        #expect(throws: (any Error).self) { try parse(duplicate) }
    }

    @Test func aHostileCommandLineGetsBadRequestNotBadJSON() {
        let nested = "{\"cmd\":\"ping\",\"args\":" + String(repeating: "{\"a\":", count: 40) + "1" + String(repeating: "}", count: 40) + "}"
        guard case .failure(let failure)? = RequestDecoder.decode(line: nested, commands: Vectors.commands) else {
            Issue.record("a 40-deep command must fail")
            return
        }
        #expect(failure.error.code == .badRequest)
        let words = "search " + Array(repeating: "x", count: RequestDecoder.maximumWords).joined(separator: " ")
        guard case .failure(let tooMany)? = RequestDecoder.decode(line: words, commands: Vectors.commands) else {
            Issue.record("too many words must fail")
            return
        }
        #expect(tooMany.error.code == .badRequest)
    }
}
