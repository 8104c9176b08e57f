import Foundation
import Testing
import ViewlineProtocol
import ViewlineTestSupport

/// Replays the recorded transcripts in `protocol/vectors/transcripts/` against the
/// real server: the Python and Node clients replay the very same files.
@Suite(.blocksItsThread) struct TranscriptTests {
    static let directory = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("protocol/vectors/transcripts")

    static var names: [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? [])
            .filter { $0.hasSuffix(".json") }.sorted()
    }

    /// `"$any"` in the expectation matches any value (tokens, timestamps).
    static func matches(_ actual: JSON, _ expected: JSON) -> Bool {
        if expected == "$any" { return true }
        switch (actual, expected) {
        case (.object(let a), .object(let e)):
            return a.keys.sorted() == e.keys.sorted() && e.pairs.allSatisfy { pair in a[pair.key].map { matches($0, pair.value) } ?? false }
        case (.array(let a), .array(let e)):
            return a.count == e.count && zip(a, e).allSatisfy { matches($0, $1) }
        default:
            return actual.doubleValue != nil && actual.doubleValue == expected.doubleValue || actual == expected
        }
    }

    @Test(arguments: names)
    func replay(_ name: String) throws {
        let document = try JSON.parse(Array(Data(contentsOf: Self.directory.appendingPathComponent(name))))
        let arguments = document["server_args"]?.arrayValue?.compactMap(\.stringValue) ?? []
        let server = try ServerProcess(["--db", ":memory:", "--demo"] + arguments)
        let client = try LineClient(port: server.port)
        for step in document["steps"]?.arrayValue ?? [] {
            if let line = step["send"]?.stringValue { try client.send(line) }
            for expected in step["expect"]?.arrayValue ?? [] {
                let actual = try client.next()
                #expect(
                    Self.matches(actual, expected),
                    "\(name) after \(step["send"]?.stringValue ?? "connect"):\n got \(actual.encoded)\nwant \(expected.encoded)")
            }
        }
    }
}
