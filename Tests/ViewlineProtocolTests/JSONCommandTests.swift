import Testing
import ViewlineKit

@Suite struct JSONCommandTests {
    @Test(arguments: try Vectors.load("json-commands.json"))
    func sharedJSONVector(_ vector: JSON) throws {
        let line = try #require(vector["line"]?.stringValue)
        let decoded = RequestDecoder.decode(line: line, commands: Vectors.commands)
        if let code = vector["error"]?.stringValue {
            guard case .failure(let failure)? = decoded else {
                Issue.record("\(line) should fail with \(code)")
                return
            }
            #expect(failure.error.code.rawValue == code, "\(line)")
            #expect(failure.re == vector["re"], "\(line)")
        } else {
            guard case .success(let request)? = decoded else {
                Issue.record("\(line) should parse: \(String(describing: decoded))")
                return
            }
            let expected = try Vectors.commands.request(
                id: request.id, name: try #require(vector["cmd"]?.stringValue), args: vector["args"]?.objectValue ?? [:])
            #expect(request == expected, "\(line)")
            #expect(request.id == vector["re"], "\(line)")
        }
    }
}
