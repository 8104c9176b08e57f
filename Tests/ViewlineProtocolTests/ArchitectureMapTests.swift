import Foundation
import Testing

/// docs/architecture.md is a map of the code: every type, module and member it names
/// in backticks (`Session`, `OutboundLines`, `ClientConnection.pump`) must exist, so
/// the map cannot drift from the code it describes (as TutorialTests keeps the
/// tutorial).
@Suite struct ArchitectureMapTests {
    static let root = TutorialTests.root

    /// Every Swift file's text under `Sources/` and `Tests/`.
    static func swiftSources() throws -> [String] {
        var texts: [String] = []
        for folder in ["Sources", "Tests"] {
            let base = root.appendingPathComponent(folder)
            guard let files = FileManager.default.enumerator(at: base, includingPropertiesForKeys: nil) else { continue }
            for case let url as URL in files where url.pathExtension == "swift" {
                texts.append(try String(contentsOf: url, encoding: .utf8))
            }
        }
        return texts
    }

    /// The names the map gives in backticks that look like code: `Type` or `Type.member`.
    static func namesInTheMap() throws -> [String] {
        let map = try String(contentsOf: root.appendingPathComponent("docs/architecture.md"), encoding: .utf8)
        let pattern = try NSRegularExpression(pattern: "`([A-Z][A-Za-z0-9]*(?:\\.[a-zA-Z][A-Za-z0-9]*)?)`")
        let range = NSRange(map.startIndex..., in: map)
        return Set(pattern.matches(in: map, range: range).compactMap { Range($0.range(at: 1), in: map).map { String(map[$0]) } }).sorted()
    }

    @Test func everyNameTheMapGivesExists() throws {
        let sources = try Self.swiftSources()
        let modules = Set(try FileManager.default.contentsOfDirectory(atPath: Self.root.appendingPathComponent("Sources").path))
        let names = try Self.namesInTheMap()
        #expect(names.count >= 30)
        for name in names {
            let parts = name.split(separator: ".").map(String.init)
            let type = parts[0]
            if parts.count == 1, modules.contains(type) { continue }
            let declared = sources.contains { text in
                ["struct ", "class ", "actor ", "enum ", "protocol ", "typealias ", "extension "].contains { text.contains($0 + type) }
            }
            #expect(declared || modules.contains(type), "docs/architecture.md names `\(name)`: no type or module \(type)")
            guard parts.count == 2 else { continue }
            let member = parts[1]
            if modules.contains(type) {  // `Module.Type`
                let typeDeclared = sources.contains { text in
                    ["struct ", "class ", "actor ", "enum ", "protocol "].contains { text.contains($0 + member) }
                }
                #expect(typeDeclared, "docs/architecture.md names `\(name)`: no type \(member)")
                continue
            }
            let hasMember = sources.contains { text in
                ["func \(member)", "var \(member)", "let \(member)", "case \(member)"].contains { text.contains($0) }
            }
            #expect(hasMember, "docs/architecture.md names `\(name)`: no member \(member)")
        }
    }
}
