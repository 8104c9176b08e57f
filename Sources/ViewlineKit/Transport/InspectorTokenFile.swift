import Foundation

/// Where an inspector token is kept: the first line of a file (surrounding white space
/// dropped), never the command line, where every user of the host can read it. Named
/// by `viewline-server --inspector-token-file`, or by the environment variable
/// ``variable`` for any server built on ViewlineKit — an example's or an app's own
/// `main` opens its inspector with no line of its own
/// (``ServerConfiguration/inspectorToken``).
public enum InspectorTokenFile {
    /// The environment variable naming the file: `VIEWLINE_INSPECTOR_TOKEN_FILE`.
    public static let variable = "VIEWLINE_INSPECTOR_TOKEN_FILE"

    /// The file the environment names (`nil`: none).
    static var pathFromEnvironment: String? {
        ProcessInfo.processInfo.environment[variable].flatMap { $0.isEmpty ? nil : $0 }
    }

    /// The token in the file at `path`.
    ///
    /// - Throws: ``ViewlineServer/ConfigurationError`` when the file cannot be read or its token has
    ///   fewer than ``Application/shortestInspectorToken`` characters.
    public static func token(at path: String) throws -> String {
        let text: String
        do { text = try String(contentsOfFile: path, encoding: .utf8) } catch {
            throw ViewlineServer.ConfigurationError(description: "cannot read the inspector token file \(path): \(error.localizedDescription)")
        }
        let token = String(text.split(separator: "\n", maxSplits: 1, omittingEmptySubsequences: false).first ?? "")
            .trimmingCharacters(in: .whitespacesAndNewlines)
        guard token.utf8.count >= Application.shortestInspectorToken else {
            throw ViewlineServer.ConfigurationError(
                description: "the inspector token in \(path) has fewer than \(Application.shortestInspectorToken) characters")
        }
        return token
    }

    /// The token in the file the environment names, `nil` when it names none or the
    /// file does not hold one (``ViewlineServer`` then refuses to start and says why).
    static var tokenFromEnvironment: String? {
        pathFromEnvironment.flatMap { try? token(at: $0) }
    }
}
