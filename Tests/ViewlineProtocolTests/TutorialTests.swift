import Foundation
import Testing

/// The tutorial's code is the example's code: every snippet marked
/// `<!-- from PATH -->` must appear verbatim in that file, so the tutorial cannot
/// drift from what CI builds and tests.
@Suite struct TutorialTests {
    static let root = Vectors.directory.deletingLastPathComponent().deletingLastPathComponent()

    @Test func everySnippetIsInTheExampleVerbatim() throws {
        let tutorial = try String(contentsOf: Self.root.appendingPathComponent("docs/writing-a-view-model.md"), encoding: .utf8)
        let parts = tutorial.components(separatedBy: "<!-- from ").dropFirst()
        #expect(parts.count >= 6)
        for part in parts {
            let path = String(part.prefix { $0 != " " })
            let afterFence = try #require(part.components(separatedBy: "```swift\n").dropFirst().first, "\(path): no swift block")
            let snippet = try #require(afterFence.components(separatedBy: "```").first)
            let file = try String(contentsOf: Self.root.appendingPathComponent(path), encoding: .utf8)
            #expect(file.contains(snippet), "the snippet from \(path) is not in the file:\n\(snippet)")
        }
    }
}
