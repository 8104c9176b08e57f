import ViewlineProtocol

/// What the client knows of the server while it runs: the presented alert and the
/// command names, kept up to date from the messages that pass by.
public struct ClientSession {
    public var presentedAlert: JSON?
    public var commandNames: [String] = []
    /// Each command's `help` entry by name (its typed `arguments`, 1.2), and the views:
    /// what completion and argument hints are drawn from, as the page draws its forms.
    public var commands: [String: JSON] = [:]
    public var viewNames: [String] = []
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
            // `help` feeds Tab completion and argument hints, which print to the
            // terminal: its names and descriptions are kept safe for it.
            if let commands = message["result"]?["commands"]?.cleanedForTerminal.arrayValue {
                commandNames = commands.compactMap { $0["name"]?.stringValue }
                self.commands = Dictionary(commands.compactMap { entry in entry["name"]?.stringValue.map { ($0, entry) } }) { first, _ in first }
                viewNames = message["result"]?["views"]?.cleanedForTerminal.arrayValue?.compactMap { $0["name"]?.stringValue } ?? viewNames
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

    /// Completion candidates for the word after a command, from `help`: view names
    /// for `state`, command names for `help`; `nil` when the command takes no such word.
    public func argumentCompletions(for line: String) -> [String]? {
        let words = line.split(separator: " ", omittingEmptySubsequences: false).map(String.init)
        guard words.count == 2 else { return nil }
        let candidates: [String]
        switch words[0].lowercased() {
        case "state": candidates = viewNames
        case "help": candidates = commandNames
        default: return nil
        }
        let typed = words[1].lowercased()
        return candidates.filter { $0.hasPrefix(typed) }
    }

    /// What the command of a half-typed line takes, from its `help` entry: its usage,
    /// then each argument's kind, bounds and description (`help`'s `arguments`, 1.2).
    ///
    ///     search <query>
    ///       query: text to the end of the line — what to look for: a cuisine, a dish or a place
    public func argumentHint(for line: String) -> String? {
        guard let name = line.split(separator: " ").first.map({ $0.lowercased() }), let entry = commands[name] else { return nil }
        var lines = [entry["usage"]?.stringValue ?? name]
        for argument in entry["arguments"]?.arrayValue ?? [] {
            guard let argumentName = argument["name"]?.stringValue else { continue }
            var kind: String
            switch argument["kind"]?.stringValue {
            case "text": kind = "text to the end of the line"
            case "integer":
                kind = "a whole number"
                if let minimum = argument["minimum"]?.intValue, let maximum = argument["maximum"]?.intValue {
                    kind += " from \(minimum) to \(maximum)"
                }
                if let unit = argument["unit"]?.stringValue { kind += " (\(unit))" }
            case "fields": kind = "name=value words"
            default: kind = "one word"
            }
            if argument["required"]?.boolValue != true { kind += ", optional" }
            if argument["secure"]?.boolValue == true { kind += ", secret" }
            let summary = argument["summary"]?.stringValue.map { " — \($0)" } ?? ""
            lines.append("  \(argumentName): \(kind)\(summary)")
        }
        return lines.joined(separator: "\n")
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
