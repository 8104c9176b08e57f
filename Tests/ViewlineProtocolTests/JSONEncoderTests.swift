import Testing
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
