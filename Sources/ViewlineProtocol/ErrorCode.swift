/// A stable, snake_case error code a reply can carry. Clients branch on these;
/// messages are for people and may change.
///
/// The protocol and the runtime define the codes below; an app adds its own as
/// static constants (`extension ErrorCode { static let outOfStock = ErrorCode("out_of_stock", meaning: "…") }`)
/// and lists them in its view-model's `errors`, so `help` and the docs show them.
public struct ErrorCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: String
    /// One line for `help` and the protocol document.
    public let meaning: String

    /// A code named `rawValue` (snake_case, stable) whose `meaning` `help` shows.
    public init(_ rawValue: String, meaning: String) {
        self.rawValue = rawValue
        self.meaning = meaning
    }

    /// A code known only by its name (its meaning is looked up nowhere).
    public init(rawValue: String) {
        self.init(rawValue, meaning: "")
    }

    public static func == (lhs: ErrorCode, rhs: ErrorCode) -> Bool { lhs.rawValue == rhs.rawValue }
    public func hash(into hasher: inout Hasher) { hasher.combine(rawValue) }
    public var description: String { rawValue }

    /// `unknown_command`: The command name is not known; `help` lists them.
    public static let unknownCommand = ErrorCode("unknown_command", meaning: "The command name is not known; `help` lists them.")
    /// `bad_arguments`: The command's arguments are missing or of the wrong type; the message shows the usage.
    public static let badArguments = ErrorCode(
        "bad_arguments", meaning: "The command's arguments are missing or of the wrong type; the message shows the usage.")
    /// `bad_syntax`: The inline line could not be split: an unbalanced quote or a dangling backslash.
    public static let badSyntax = ErrorCode("bad_syntax", meaning: "The inline line could not be split: an unbalanced quote or a dangling backslash.")
    /// `bad_json`: A line starting with `{` is not a JSON object with a string `cmd`.
    public static let badJSON = ErrorCode("bad_json", meaning: "A line starting with `{` is not a JSON object with a string `cmd`.")
    /// `bad_encoding`: The line is not valid UTF-8.
    public static let badEncoding = ErrorCode("bad_encoding", meaning: "The line is not valid UTF-8.")
    /// `bad_request`: The command is too complex: JSON nested deeper than 32, an object with more than 256 keys, more than 4,096 values, or more words, fields or characters than a limit allows (PROTOCOL §8).
    public static let badRequest = ErrorCode(
        "bad_request",
        meaning:
            "The command is too complex: JSON nested deeper than 32, an object with more than 256 keys, more than 4,096 values, or more words, fields or characters than a limit allows (PROTOCOL §8)."
    )
    /// `line_too_long`: The line exceeded the server's limit; the rest of it was discarded.
    public static let lineTooLong = ErrorCode("line_too_long", meaning: "The line exceeded the server's limit; the rest of it was discarded.")
    /// `no_alert`: `confirm`/`cancel` while no alert is presented.
    public static let noAlert = ErrorCode("no_alert", meaning: "`confirm`/`cancel` while no alert is presented.")
    /// `stale_alert`: The alert id named is not the presented alert.
    public static let staleAlert = ErrorCode("stale_alert", meaning: "The alert id named is not the presented alert.")
    /// `no_cancel_action`: `cancel` on an alert that has no cancel action.
    public static let noCancelAction = ErrorCode("no_cancel_action", meaning: "`cancel` on an alert that has no cancel action.")
    /// `admin_disabled`: An admin command on a server started without `--admin`.
    public static let adminDisabled = ErrorCode("admin_disabled", meaning: "An admin command on a server started without `--admin`.")
    /// `unknown_view`: `state` named a view that does not exist.
    public static let unknownView = ErrorCode("unknown_view", meaning: "`state` named a view that does not exist.")
    /// `unknown_service`: `fault` named a backend service that does not exist.
    public static let unknownService = ErrorCode("unknown_service", meaning: "`fault` named a backend service that does not exist.")
    /// `timeout`: `wait` timed out before the session settled.
    public static let timeout = ErrorCode("timeout", meaning: "`wait` timed out before the session settled.")
    /// `bad_token`: `attach` named a session token that is unknown, expired or wrong (which one is not said), or `inspector` a wrong inspector token.
    public static let badToken = ErrorCode(
        "bad_token",
        meaning: "`attach` named a session token that is unknown, expired or wrong (which one is not said), or `inspector` a wrong inspector token.")
    /// `attach_throttled`: Too many failed `attach` attempts from this address; the message says how long to wait.
    public static let attachThrottled = ErrorCode(
        "attach_throttled", meaning: "Too many failed `attach` attempts from this address; the message says how long to wait.")
    /// `busy`: The same work is already running for this session, or a later change of it was saved first (the message says which).
    public static let busy = ErrorCode(
        "busy", meaning: "The same work is already running for this session, or a later change of it was saved first (the message says which).")
    /// `moved`: `attach`: the session lives on another node, alive; `address` says where to attach instead.
    public static let moved = ErrorCode(
        "moved", meaning: "`attach`: the session lives on another node, alive; `address` says where to attach instead.")
    /// `unavailable`: The database the command needs cannot be reached right now; the session keeps its state; try again.
    public static let unavailable = ErrorCode(
        "unavailable", meaning: "The database the command needs cannot be reached right now; the session keeps its state; try again.")
    /// `record_unreadable`: `attach`: the session's record holds a view this server cannot read (written by a newer release, or an older one without a migration); the session is kept for a server that can; start a new session or try again after the deploy.
    public static let recordUnreadable = ErrorCode(
        "record_unreadable",
        meaning:
            "`attach`: the session's record holds a view this server cannot read (written by a newer release, or an older one without a migration); the session is kept for a server that can; start a new session or try again after the deploy."
    )
    /// `server_busy`: The server is too loaded for this right now (log-ins being checked, or the node holds all the sessions it may); try again in a moment.
    public static let serverBusy = ErrorCode(
        "server_busy",
        meaning:
            "The server is too loaded for this right now (log-ins being checked, or the node holds all the sessions it may); try again in a moment.")
    /// `internal_error`: The server failed unexpectedly; the session goes on. The message is generic (the error itself is in the server's log, with the session and the command: it may hold anything a backend said).
    public static let internalError = ErrorCode(
        "internal_error",
        meaning:
            "The server failed unexpectedly; the session goes on. The message is generic (the error itself is in the server's log, with the session and the command: it may hold anything a backend said)."
    )

    /// The codes of the protocol and the runtime, in the order `help` lists them
    /// (an app's own codes come before `internal_error`).
    public static let builtIn: [ErrorCode] = [
        .unknownCommand, .badArguments, .badSyntax, .badJSON, .badEncoding, .badRequest, .lineTooLong, .noAlert, .staleAlert,
        .noCancelAction, .adminDisabled, .unknownView, .unknownService, .timeout, .badToken, .attachThrottled, .busy,
        .moved, .unavailable, .recordUnreadable, .serverBusy,
    ]
}

/// A typed error that crosses the wire as `{"code": ..., "message": ...}`.
public struct ProtocolError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What went wrong, for clients to branch on.
    public var code: ErrorCode
    /// What went wrong, for people (it may change between releases).
    public var message: String
    /// Where to go instead (`host:port`), with ``ErrorCode/moved``.
    public var address: String?
    /// How many seconds to wait before trying again, for throttling and `server_busy`:
    /// `retryAfter` in the error object, so a client need not read the message.
    public var retryAfter: Int?
    /// With ``ErrorCode/moved``: the owner's web page (`http://host:port/`), for a
    /// browser page, which follows it over WebSocket.
    public var web: String?
    /// The error this one stands for (a store's, a backend's), for the server's log:
    /// never sent to the client, and not part of equality.
    public var underlying: (any Error)?

    /// An error with `code` and `message`, and the fields some codes carry.
    public init(_ code: ErrorCode, _ message: String, address: String? = nil, retryAfter: Int? = nil, underlying: (any Error)? = nil) {
        self.code = code
        self.message = message
        self.address = address
        self.retryAfter = retryAfter
        self.underlying = underlying
    }

    /// The same code, message and fields (``underlying`` is not compared).
    public static func == (lhs: ProtocolError, rhs: ProtocolError) -> Bool {
        lhs.code == rhs.code && lhs.message == rhs.message && lhs.address == rhs.address
            && lhs.retryAfter == rhs.retryAfter && lhs.web == rhs.web
    }

    public var description: String { "\(code.rawValue): \(message)" }

    /// The wire form: `{"code": …, "message": …}` with `address`, `retryAfter` and `web` when set.
    public var json: JSON {
        var object: JSONObject = ["code": .string(code.rawValue), "message": .string(message)]
        if let address { object["address"] = .string(address) }
        if let retryAfter { object["retryAfter"] = .int(retryAfter) }
        if let web { object["web"] = .string(web) }
        return .object(object)
    }
}
