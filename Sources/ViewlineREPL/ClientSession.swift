import ViewlineProtocol

/// What the client knows of the server while it runs: the presented alert and the
/// command names, kept up to date from the messages that pass by.
public struct ClientSession {
    public var presentedAlert: JSON?
    public var commandNames: [String] = []
    public var failedCommands = 0
    /// The session's token: from `welcome`, or the session attached to.
    public var token: String?
    /// The session's name (`s1`).
    public var session: String?
    /// The highest `rev` seen: where a resumed session picks up.
    public var rev = 0
    /// The server said a `bye` that ends the session for this client (`quit`, `ended`,
    /// `expired`, `evicted`, `revoked`): do not resume. After any other (`shutdown` in a rolling restart,
    /// `moved`) the session lives on and the REPL resumes it.
    public var ended = false

    public init() {}

    /// Tracks alerts: the newest `alert` is presented (the server sends the next one
    /// only after the current one is answered); `dismiss` or an answer clears it.
    public mutating func observe(_ message: JSON) {
        if let rev = message["rev"]?.intValue { self.rev = max(self.rev, rev) }
        switch message["type"]?.stringValue {
        case "welcome":
            token = message["token"]?.stringValue
            session = message["session"]?.stringValue
        case "bye":
            ended = Bye.isFinal(code: message["code"]?.stringValue, reason: message["reason"]?.stringValue ?? "")
        case "alert": presentedAlert = message
        case "dismiss":
            if presentedAlert?["id"] == message["id"] { presentedAlert = nil }
        case "reply":
            if message["ok"]?.boolValue == true, let answered = message["result"]?["alert"],
                presentedAlert?["id"] == answered
            {
                presentedAlert = nil
            }
            // `end-others`' reply (`{ended, token}`): the session's new token, the one to resume with.
            if message["ok"]?.boolValue == true, let result = message["result"]?.objectValue, result.keys.sorted() == ["ended", "token"],
                let fresh = result["token"]?.stringValue
            {
                token = fresh
            }
            if let commands = message["result"]?["commands"]?.arrayValue {
                commandNames = commands.compactMap { $0["name"]?.stringValue }
            }
        default: break
        }
    }

    /// How a typed line answers the presented alert: `y`/`yes`, `n`/`no`, or an
    /// action's label (case-insensitive) pick that action's role.
    public func alertRole(for line: String) -> String? {
        guard let alert = presentedAlert else { return nil }
        let typed = line.lowercased()
        let actions = alert["actions"]?.arrayValue ?? []
        let roles = actions.compactMap { $0["role"]?.stringValue }
        if ["y", "yes"].contains(typed), roles.contains("confirm") { return "confirm" }
        if ["n", "no"].contains(typed), roles.contains("cancel") { return "cancel" }
        if ["confirm", "cancel"].contains(typed), roles.contains(typed) { return typed }
        for action in actions where action["label"]?.stringValue?.lowercased() == typed {
            return action["role"]?.stringValue
        }
        return nil
    }

    /// Completion candidates for the first word.
    public func completions(for prefix: String) -> [String] {
        var names = commandNames
        if presentedAlert != nil {
            names = ["confirm", "cancel"] + names.filter { $0 != "confirm" && $0 != "cancel" }
        }
        let lowered = prefix.lowercased()
        return names.filter { $0.hasPrefix(lowered) }
    }
}
