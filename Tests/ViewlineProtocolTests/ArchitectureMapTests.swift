import Foundation
import Testing

/// docs/architecture.md is a map of the code: every type, module and member it names
/// in backticks (`Session`, `OutboundLines`, `ClientConnection.pump`) must exist — a
/// member in a file that declares or extends its type — and its module table must
/// list every module with every module it imports, so the map cannot drift from the
/// code it describes (as TutorialTests keeps the tutorial).
@Suite struct ArchitectureMapTests {
    static let root = TutorialTests.root

    /// Every Swift file's text under `folders` (`Sources/` and `Tests/` by default).
    static func swiftSources(in folders: [String] = ["Sources", "Tests"]) throws -> [String] {
        var texts: [String] = []
        for folder in folders {
            let base = root.appendingPathComponent(folder)
            guard let files = FileManager.default.enumerator(at: base, includingPropertiesForKeys: nil) else { continue }
            for case let url as URL in files where url.pathExtension == "swift" {
                texts.append(try String(contentsOf: url, encoding: .utf8))
            }
        }
        return texts
    }

    /// Whether `text` declares or extends `type` (the name whole, not a prefix of another).
    static func declares(_ type: String, in text: String, kinds: [String]) -> Bool {
        kinds.contains { kind in
            var rest = text[...]
            while let found = rest.range(of: kind + type) {
                let next = rest[found.upperBound...].first
                if next.map({ !($0.isLetter || $0.isNumber || $0 == "_") }) ?? true { return true }
                rest = rest[found.upperBound...]
            }
            return false
        }
    }

    /// The names the map gives in backticks that look like code: `Type` or `Type.member`.
    static func namesInTheMap() throws -> [String] {
        let map = try String(contentsOf: root.appendingPathComponent("docs/architecture.md"), encoding: .utf8)
        // `Type`, `Type.member`, or a function with its labels: `Type.member(label:other:)`.
        let pattern = try NSRegularExpression(pattern: "`([A-Z][A-Za-z0-9]*(?:\\.[a-zA-Z][A-Za-z0-9]*(?:\\((?:[A-Za-z_][A-Za-z0-9]*:)*\\))?)?)`")
        let range = NSRange(map.startIndex..., in: map)
        return Set(pattern.matches(in: map, range: range).compactMap { Range($0.range(at: 1), in: map).map { String(map[$0]) } }).sorted()
    }

    static let typeKinds = ["struct ", "class ", "actor ", "enum ", "protocol ", "typealias "]

    /// The module table's rows: the modules of each (its first cell's names in
    /// backticks) and what they may use (the second cell).
    static func moduleTable() throws -> [(modules: [String], mayUse: String)] {
        let map = try String(contentsOf: root.appendingPathComponent("docs/architecture.md"), encoding: .utf8)
        let section = try #require(map.components(separatedBy: "## Modules").dropFirst().first)
        return section.split(separator: "\n").filter { $0.hasPrefix("| `") }.map { row in
            let cells = row.split(separator: "|", omittingEmptySubsequences: false).map(String.init)
            let names = cells[1].components(separatedBy: "`").enumerated().filter { $0.offset % 2 == 1 }.map(\.element)
            return (names, cells[2])
        }
    }

    /// Every module (each folder of `Sources/`, and the Swift conformance driver) has a
    /// row or is named as one a row may use; and each module's imports of the
    /// package's own modules are the ones its row says it may use.
    @Test func theModuleTableListsEveryModuleAndWhatItImports() throws {
        let table = try Self.moduleTable()
        #expect(table.count >= 14)
        var folders: [String: String] = [:]
        for name in try FileManager.default.contentsOfDirectory(atPath: Self.root.appendingPathComponent("Sources").path) {
            folders[name] = "Sources/\(name)"
        }
        folders["viewline-conformance"] = "clients/conformance/drivers/swift"
        let named = table.map { $0.modules.joined(separator: " ") + " " + $0.mayUse }.joined(separator: " ")
        for module in folders.keys.sorted() {
            let hasRow = table.contains { $0.modules.contains(module) }
            #expect(hasRow || (module.hasPrefix("C") && named.contains("`\(module)`")), "docs/architecture.md's module table misses \(module)")
        }
        for row in table where !row.mayUse.contains("everything above") {
            for module in row.modules {
                let folder = try #require(folders[module], "the table names \(module), which is no module")
                for text in try Self.swiftSources(in: [folder]) {
                    for line in text.split(separator: "\n") {
                        let words = line.split(separator: " ")
                        guard let index = words.firstIndex(of: "import"), index + 1 < words.count else { continue }
                        guard words[..<index].allSatisfy({ $0.hasPrefix("@") }) else { continue }
                        let imported = String(words[index + 1])
                        guard folders[imported] != nil, imported != module else { continue }
                        #expect(
                            row.mayUse.contains("`\(imported)`"), "\(module) imports \(imported); its row in the module table does not say it may")
                    }
                }
            }
        }
    }

    @Test func everyNameTheMapGivesExists() throws {
        let sources = try Self.swiftSources()
        let modules = Set(try FileManager.default.contentsOfDirectory(atPath: Self.root.appendingPathComponent("Sources").path))
        let names = try Self.namesInTheMap()
        #expect(names.count >= 30)
        for name in names {
            // A function's labels: its declaration starts with the first (`func decode(line`).
            let signature = name.split(separator: "(", maxSplits: 1).map(String.init)
            let firstLabel = signature.count == 2 ? signature[1].split(separator: ":").first.map(String.init) : nil
            let parts = signature[0].split(separator: ".").map(String.init)
            let type = parts[0]
            if parts.count == 1, modules.contains(type) { continue }
            let declared = sources.contains { text in
                (Self.typeKinds + ["extension "]).contains { text.contains($0 + type) }
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
            // The member is the type's: declared in a file that declares or extends it.
            let typesFiles = sources.filter { Self.declares(type, in: $0, kinds: Self.typeKinds + ["extension "]) }
            let hasMember = typesFiles.contains { text in
                if let firstLabel { return text.contains("func \(member)(\(firstLabel)") || text.contains("func \(member)<") }
                return ["func \(member)", "var \(member)", "let \(member)", "case \(member)"].contains { text.contains($0) }
            }
            #expect(hasMember, "docs/architecture.md names `\(name)`: \(type) has no member \(member)")
        }
    }

    /// The diagram's arrows between two functions (`Type.member ─▶ Type.member` on one
    /// line): the first calls the second (its declaration's body, in a file that
    /// declares or extends its type, names the second followed by `(`).
    @Test func everyArrowBetweenTwoFunctionsIsACall() throws {
        let map = try String(contentsOf: Self.root.appendingPathComponent("docs/architecture.md"), encoding: .utf8)
        let section = try #require(map.components(separatedBy: "## The path of one command").dropFirst().first)
        let diagram = try #require(section.components(separatedBy: "```").dropFirst().first)
        let name = try Regex(#"([A-Z][A-Za-z0-9]*)\.([a-z][A-Za-z0-9]*)"#)
        let sources = try Self.swiftSources(in: ["Sources"])
        var arrows = 0
        for line in diagram.split(separator: "\n") {
            let parts = line.components(separatedBy: "─▶")
            for (left, right) in zip(parts, parts.dropFirst()) {
                guard let caller = left.matches(of: name).last, let callee = right.matches(of: name).first,
                    right.trimmingCharacters(in: .whitespaces).hasPrefix(String(right[callee.range]))
                else { continue }
                let (type, member) = (String(caller.output[1].substring ?? ""), String(caller.output[2].substring ?? ""))
                let called = String(callee.output[2].substring ?? "")
                arrows += 1
                let bodies = sources.filter { Self.declares(type, in: $0, kinds: Self.typeKinds + ["extension "]) }
                    .flatMap { Self.bodies(of: member, in: $0) }
                #expect(!bodies.isEmpty, "docs/architecture.md's diagram: \(type) has no function \(member)")
                #expect(
                    bodies.contains { $0.contains("\(called)(") || $0.contains("\(called)<") },
                    "docs/architecture.md's diagram: \(type).\(member) does not call \(right[callee.range])")
            }
        }
        #expect(arrows >= 8)
    }

    /// The text of each declaration of `member` in `source` (`func member(`/`<`, or a
    /// `let`/`var` with a value): from its line to the line that closes it at its
    /// own indentation.
    static func bodies(of member: String, in source: String) -> [String] {
        let lines = source.split(separator: "\n", omittingEmptySubsequences: false)
        var bodies: [String] = []
        for (index, line) in lines.enumerated() {
            let declares = ["func \(member)(", "func \(member)<", "let \(member):", "var \(member):", "let \(member) =", "var \(member) ="]
                .contains { line.contains($0) }
            guard declares else { continue }
            let indent = line.prefix { $0 == " " }.count
            var end = index + 1
            while end < lines.count {
                let next = lines[end]
                let nextIndent = next.prefix { $0 == " " }.count
                if nextIndent == indent, next.dropFirst(indent).first.map({ "}]".contains($0) }) == true { break }
                if nextIndent < indent, !next.trimmingCharacters(in: .whitespaces).isEmpty { break }
                end += 1
            }
            bodies.append(lines[index...min(end, lines.count - 1)].joined(separator: "\n"))
        }
        return bodies
    }
}
