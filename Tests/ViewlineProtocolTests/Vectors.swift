import Foundation
import ViewlineApps
import ViewlineKit

/// Loads the shared test vectors in `protocol/vectors/`, which the Python and
/// Node clients test against too.
enum Vectors {
    static let directory = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("protocol/vectors")

    /// The seed server's commands, views and error codes: what the vectors and the spec describe.
    static let application = Application(SeedApps.all)
    static var commands: CommandTable { application.commands }

    static func load(_ name: String) throws -> [JSON] {
        let data = try Data(contentsOf: directory.appendingPathComponent(name))
        return try JSON.parse(Array(data))["vectors"]?.arrayValue ?? []
    }
}
