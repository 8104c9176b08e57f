import Foundation
import Testing
import ViewlineKit

/// The inspector token's file (`--inspector-token-file`, or the file
/// `VIEWLINE_INSPECTOR_TOKEN_FILE` names for any server on ViewlineKit): its first
/// line, trimmed; refused when unreadable or too short to guess slowly.
@Suite struct InspectorTokenFileTests {
    func file(holding text: String) throws -> String {
        let path = NSTemporaryDirectory() + "inspector-token-\(UUID().uuidString)"
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    @Test func theTokenIsTheFirstLineTrimmed() throws {
        let path = try file(holding: "  a5c1f0e2d3b4a5968778695a4b3c2d1e \nsecond line\n")
        defer { try? FileManager.default.removeItem(atPath: path) }
        #expect(try InspectorTokenFile.token(at: path) == "a5c1f0e2d3b4a5968778695a4b3c2d1e")
    }

    @Test func anyLineEndEndsTheFirstLine() throws {
        // `\r\n` is one Character to Swift: split at "\n" alone, it kept the file whole.
        for text in ["a5c1f0e2d3b4a5968778695a4b3c2d1e\r\nsecond line\r\n", "a5c1f0e2d3b4a5968778695a4b3c2d1e\rsecond"] {
            let path = try file(holding: text)
            defer { try? FileManager.default.removeItem(atPath: path) }
            #expect(try InspectorTokenFile.token(at: path) == "a5c1f0e2d3b4a5968778695a4b3c2d1e")
        }
        let short = try file(holding: "short\r\nsecond line that is long\r\n")
        defer { try? FileManager.default.removeItem(atPath: short) }
        #expect(throws: ViewlineServer.ConfigurationError.self) { try InspectorTokenFile.token(at: short) }
    }

    @Test func aTokenTooLongToTypeOnALineIsRefused() throws {
        let path = try file(holding: String(repeating: "a", count: InspectorTokenFile.longestToken + 1))
        defer { try? FileManager.default.removeItem(atPath: path) }
        #expect {
            try InspectorTokenFile.token(at: path)
        } throws: { error in
            "\(error)".contains("more than \(InspectorTokenFile.longestToken) characters")
        }
    }

    @Test func aShortTokenIsRefusedWithItsReason() throws {
        let path = try file(holding: "short\n")
        defer { try? FileManager.default.removeItem(atPath: path) }
        #expect {
            try InspectorTokenFile.token(at: path)
        } throws: { error in
            "\(error)".contains("fewer than \(Application.shortestInspectorToken) characters")
        }
    }

    @Test func aMissingFileIsRefusedByName() {
        let path = NSTemporaryDirectory() + "no-such-inspector-token-\(UUID().uuidString)"
        #expect {
            try InspectorTokenFile.token(at: path)
        } throws: { error in
            "\(error)".contains("cannot read the inspector token file \(path)")
        }
    }
}
