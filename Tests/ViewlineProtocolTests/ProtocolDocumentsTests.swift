import Foundation
import Testing
import ViewlineKit

/// The wire protocol is documented in three places besides the code: the spec
/// (`protocol/PROTOCOL.md`), the JSON Schemas and `help`. These tests keep the
/// documents in step with the code, so a new command, view or error code cannot
/// ship undocumented.
@Suite struct ProtocolDocumentsTests {
    static let protocolDirectory = Vectors.directory.deletingLastPathComponent()

    static func text(_ path: String) throws -> String {
        try String(contentsOf: protocolDirectory.appendingPathComponent(path), encoding: .utf8)
    }

    static func schema(_ name: String) throws -> JSON {
        try JSON.parse(Array(text("schema/\(name).schema.json").utf8))
    }

    /// The rows of the markdown table under the given heading, as their cells.
    static func tableRows(under heading: String, in markdown: String) -> [[String]] {
        var rows: [[String]] = []
        var inSection = false
        for line in markdown.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("#") {
                if inSection { break }
                inSection = line.hasSuffix(heading)
                continue
            }
            guard inSection, line.hasPrefix("|") else { continue }
            let cells = line.split(separator: "|", omittingEmptySubsequences: false)
                .dropFirst().dropLast()
                .map { $0.trimmingCharacters(in: .whitespaces) }
            if cells.allSatisfy({ $0.allSatisfy { "-: ".contains($0) } }) { continue }  // the separator row
            rows.append(cells)
        }
        return Array(rows.dropFirst())  // the header row
    }

    /// `` `state [view]` `` → `state`
    static func firstWord(ofCode cell: String) -> String {
        String(cell.trimmingCharacters(in: CharacterSet(charactersIn: "`")).prefix { $0 != " " && $0 != "`" })
    }

    @Test func theSpecListsEveryErrorCodeWithItsMeaning() throws {
        let rows = Self.tableRows(under: "Error codes", in: try Self.text("PROTOCOL.md"))
        let documented = rows.map { (Self.firstWord(ofCode: $0[0]), $0[1]) }
        let expected = Vectors.application.errors.map { ($0.rawValue, $0.meaning) }
        #expect(documented.map(\.0) == expected.map(\.0))
        for (code, meaning) in expected {
            #expect(documented.first { $0.0 == code }?.1 == meaning, "meaning of \(code)")
        }
    }

    @Test func theReplySchemaAllowsExactlyTheErrorCodes() throws {
        let codes = try Self.schema("reply")["properties"]?["error"]?["properties"]?["code"]?["enum"]?.arrayValue
        #expect(codes?.compactMap(\.stringValue) == Vectors.application.errors.map(\.rawValue))
    }

    @Test func theSpecListsEveryCommand() throws {
        let rows = Self.tableRows(under: "Command reference", in: try Self.text("PROTOCOL.md"))
        #expect(rows.map { Self.firstWord(ofCode: $0[0]) } == Vectors.commands.all.map(\.name))
        for (row, spec) in zip(rows, Vectors.commands.all) {
            #expect(row[0] == "`\(spec.usage)`", "usage of \(spec.name)")
        }
    }

    @Test func whichByeEndsASessionIsTheSchemasList() throws {
        // The one source every client's table is checked against (Python, Node, the page).
        let schema = try Self.schema("bye")
        let final = try #require(schema["x-final-codes"]?.arrayValue).compactMap(\.stringValue)
        let resumable = try #require(schema["x-resumable-codes"]?.arrayValue).compactMap(\.stringValue)
        let reasons = try #require(schema["x-final-reasons-before-1.1"]?.arrayValue).compactMap(\.stringValue)
        for code in final { #expect(Bye.isFinal(code: code, reason: ""), "\(code)") }
        for code in resumable + ["a_code_from_a_later_server"] { #expect(!Bye.isFinal(code: code, reason: "client quit"), "\(code)") }
        #expect(Bye.finalReasonsBeforeCodes == Set(reasons))
        // The page's copy, in the script the server serves.
        let page = Self.protocolDirectory.deletingLastPathComponent().appending(path: "Sources/ViewlineKit/Web/page/connection.js")
        let script = try String(contentsOf: page, encoding: .utf8)
        #expect(Self.stringList(named: "FINAL_BYE_CODES", in: script) == final)
        #expect(Self.stringList(named: "FINAL_BYE_REASONS", in: script) == reasons)
    }

    /// The strings of `const NAME = ["a", "b"];` in a script.
    static func stringList(named name: String, in script: String) -> [String]? {
        guard let start = script.range(of: "const \(name) = ["), let end = script[start.upperBound...].firstIndex(of: "]") else { return nil }
        return script[start.upperBound..<end].split(separator: ",").map {
            $0.trimmingCharacters(in: .whitespacesAndNewlines).trimmingCharacters(in: CharacterSet(charactersIn: "\"'"))
        }
    }

    @Test func theCommandSchemaNamesEveryCommand() throws {
        let description = try Self.schema("command")["properties"]?["cmd"]?["description"]?.stringValue ?? ""
        let names = description.split(separator: ":").last?
            .split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        #expect(names == Vectors.commands.all.map(\.name))
    }

    @Test func theSpecAndTheSchemaDescribeEveryView() throws {
        let rows = Self.tableRows(under: "Views", in: try Self.text("PROTOCOL.md"))
        #expect(rows.map { Self.firstWord(ofCode: $0[0]) } == Vectors.application.views.map(\.name))
        let definitions = try Self.schema("views")["$defs"]?.objectValue
        #expect(definitions.map { Set($0.keys) } == Set(Vectors.application.views.map(\.name)))
    }

    @Test func theSpecListsEveryFaultableService() throws {
        let spec = try Self.text("PROTOCOL.md")
        let paragraph =
            spec.components(separatedBy: "`fault` services:").dropFirst().first?
            .components(separatedBy: "\n\n").first ?? ""
        for service in Vectors.application.backends {
            #expect(paragraph.contains("`\(service.name)` ("), "fault \(service.name)")
        }
    }

    @Test func theCommandsSchemaIsTheOneDerivedFromTheDeclarations() throws {
        let checkedIn = try Self.schema("commands")
        let derived = Vectors.commands.jsonSchema(views: Vectors.application.views.map(\.name))
        #expect(
            checkedIn == derived,
            "regenerate: viewline-server --print-schema | python3 -m json.tool --indent 2 > protocol/schema/commands.schema.json")
    }
}
