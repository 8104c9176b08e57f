import Foundation
import ViewlineProtocol

/// Loads the shared test vectors in `protocol/vectors/`, which the Python and
/// Node clients test against too.
enum Vectors {
    static let directory = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("protocol/vectors")

    static func load(_ name: String) throws -> [JSON] {
        let data = try Data(contentsOf: directory.appendingPathComponent(name))
        return try JSON.parse(Array(data))["vectors"]?.arrayValue ?? []
    }
}
