import Foundation
import Testing

@testable import ViewlineKit

/// The browser pages' ES modules as the server serves them: every module a page or
/// another module imports is embedded and served, and no two import each other, even
/// through others (a module that needs another's function is handed it).
@Suite struct PageModulesTests {
    static let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Sources/ViewlineKit/Web/page")

    /// Each page file's imports (`from "./x.js"`, `<script … src="/x.js">`), by file name.
    static func imports() throws -> [String: [String]] {
        let pattern = try Regex(#"(?:from\s+"\./|src="/)([A-Za-z0-9_-]+\.js)""#)
        var imports: [String: [String]] = [:]
        for name in try FileManager.default.contentsOfDirectory(atPath: directory.path) where name.hasSuffix(".js") || name.hasSuffix(".html") {
            let source = try String(contentsOf: directory.appendingPathComponent(name), encoding: .utf8)
            imports[name] = source.matches(of: pattern).compactMap { $0.output[1].substring.map(String.init) }
        }
        return imports
    }

    @Test func everyModuleAPageImportsIsServed() throws {
        let imports = try Self.imports()
        #expect(imports["index.html"] == ["app.js"] && imports["inspect.html"] == ["inspect.js"])
        #expect(imports["inspect.js"]?.contains("dom.js") == true && imports["inspect.js"]?.contains("socket.js") == true)
        for (file, modules) in imports {
            for module in modules {
                #expect(WebAssets.asset(at: "/\(module)", inspector: true) != nil, "\(file) imports \(module), which the server does not serve")
            }
        }
        // And nothing is served that no page reaches.
        let reached = Set(imports.values.joined())
        for path in WebAssets.modules.keys { #expect(reached.contains(String(path.dropFirst())), "\(path) is served but imported by nothing") }
    }

    @Test func noModuleImportsItselfThroughOthers() throws {
        let imports = try Self.imports()
        func path(from start: String, to module: String, seen: inout Set<String>) -> [String]? {
            for next in imports[module] ?? [] {
                if next == start { return [module, next] }
                guard seen.insert(next).inserted else { continue }
                if let rest = path(from: start, to: next, seen: &seen) { return [module] + rest }
            }
            return nil
        }
        for module in imports.keys.sorted() {
            var seen: Set<String> = []
            let circle = path(from: module, to: module, seen: &seen)
            #expect(circle == nil, "an import circle: \(circle?.joined(separator: " → ") ?? "")")
        }
    }
}
