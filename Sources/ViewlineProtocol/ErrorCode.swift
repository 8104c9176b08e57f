/// The stable, snake_case error codes a reply can carry. Clients branch on these;
/// messages are for people and may change.
public enum ErrorCode: String, Sendable, CaseIterable, Codable {
    case unknownCommand = "unknown_command"
    case badArguments = "bad_arguments"
    case badSyntax = "bad_syntax"
    case badJSON = "bad_json"
    case badEncoding = "bad_encoding"
    case lineTooLong = "line_too_long"
    case noAlert = "no_alert"
    case staleAlert = "stale_alert"
    case noCancelAction = "no_cancel_action"
    case adminDisabled = "admin_disabled"
    case unknownView = "unknown_view"
    case unknownService = "unknown_service"
    case timeout = "timeout"
    case loginRequired = "login_required"
    case loginFailed = "login_failed"
    case nothingPending = "nothing_pending"
    case nothingToSave = "nothing_to_save"
    case busy = "busy"
    case internalError = "internal_error"

    /// One line for `protocol/PROTOCOL.md` and `help`.
    public var meaning: String {
        switch self {
        case .unknownCommand: "The command name is not known; `help` lists them."
        case .badArguments: "The command's arguments are missing or of the wrong type; the message shows the usage."
        case .badSyntax: "The inline line could not be split: an unbalanced quote or a dangling backslash."
        case .badJSON: "A line starting with `{` is not a JSON object with a string `cmd`."
        case .badEncoding: "The line is not valid UTF-8."
        case .lineTooLong: "The line exceeded the server's limit; the rest of it was discarded."
        case .noAlert: "`confirm`/`cancel` while no alert is presented."
        case .staleAlert: "The alert id named is not the presented alert."
        case .noCancelAction: "`cancel` on an alert that has no cancel action."
        case .adminDisabled: "An admin command on a server started without `--admin`."
        case .unknownView: "`state` named a view that does not exist."
        case .unknownService: "`fault` named a backend service that does not exist."
        case .timeout: "`wait` timed out before the session settled."
        case .loginRequired: "The command needs a logged-in session."
        case .loginFailed: "The user name or password is wrong (which one is not said)."
        case .nothingPending: "`more` with no reserved playlist step."
        case .nothingToSave: "`save` with no pending draft."
        case .busy: "The same work is already running for this session."
        case .internalError: "The server failed unexpectedly; the session goes on."
        }
    }
}

/// A typed error that crosses the wire as `{"code": ..., "message": ...}`.
public struct ProtocolError: Error, Sendable, Equatable, CustomStringConvertible {
    public var code: ErrorCode
    public var message: String

    public init(_ code: ErrorCode, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(code.rawValue): \(message)" }

    public var json: JSON { ["code": .string(code.rawValue), "message": .string(message)] }
}
