import Foundation

/// Where an inspector token is kept: the first line of a file (surrounding white space
/// dropped), never the command line, where every user of the host can read it. Named
/// by `viewline-server --inspector-token-file`, or by the environment variable
/// ``variable`` for any server built on ViewlineKit — an example's or an app's own
/// `main` opens its inspector with no line of its own
/// (``ServerConfiguration/inspectorTokenFromEnvironment``).
public enum InspectorTokenFile {
    /// The environment variable naming the file: `VIEWLINE_INSPECTOR_TOKEN_FILE`.
    public static let variable = "VIEWLINE_INSPECTOR_TOKEN_FILE"

    /// The longest token read: one that fits on a line with `inspector ` before it,
    /// under any line limit a server is given.
    public static let longestToken = 1024

    /// The file the environment names (`nil`: none).
    static var pathFromEnvironment: String? {
        ProcessInfo.processInfo.environment[variable].flatMap { $0.isEmpty ? nil : $0 }
    }

    /// The token in the file at `path`.
    ///
    /// - Throws: ``ViewlineServer/ConfigurationError`` when the file cannot be read or
    ///   its token has fewer than ``Application/shortestInspectorToken`` characters or
    ///   more than ``longestToken``.
    public static func token(at path: String) throws -> String {
        let text: String
        do { text = try String(contentsOfFile: path, encoding: .utf8) } catch {
            throw ViewlineServer.ConfigurationError(description: "cannot read the inspector token file \(path): \(error.localizedDescription)")
        }
        // Any line end ends the line: `\r\n` is one Character, never split at "\n".
        let line = text.split(maxSplits: 1, omittingEmptySubsequences: false, whereSeparator: \.isNewline).first ?? ""
        let token = line.trimmingCharacters(in: .whitespaces)
        guard token.utf8.count >= Application.shortestInspectorToken else {
            throw ViewlineServer.ConfigurationError(
                description: "the inspector token in \(path) has fewer than \(Application.shortestInspectorToken) characters")
        }
        guard token.utf8.count <= longestToken else {
            throw ViewlineServer.ConfigurationError(
                description: "the inspector token in \(path) has more than \(longestToken) characters")
        }
        return token
    }
}
