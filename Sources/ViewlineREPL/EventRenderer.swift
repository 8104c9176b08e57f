import ViewlineProtocol

/// Turns server messages into text for people: views as compact tables, alerts as
/// framed boxes with their keys, replies as short lines.
public struct EventRenderer: Sendable {
    public var style: TerminalStyle
    /// The terminal's width in columns: `help` wraps its descriptions to it.
    public var width: Int = 80
    /// The busy flags each view declares (`help`'s `busy`): for those views, only these
    /// booleans read as work under way; others are guessed from their names.
    public var busyFields: [String: Set<String>] = [:]
    /// Each view's command that fetches the next page of its list (`help`'s
    /// `paging: true`): for those views a page appended to the rows already printed
    /// prints only the new rows, and `hasMore` reads as the hint to type it.
    public var pagingCommands: [String: String] = [:]
    /// The views in the order the server declares them (`help`'s `views`): how
    /// `state` lists them.
    public var viewOrder: [String] = []
    /// The list rows printed so far, by view (paging views only).
    private var shownRows: [String: [JSON]] = [:]

    public init(style: TerminalStyle) { self.style = style }

    /// Takes what the REPL needs from `help`'s result: each view's busy flags and
    /// paging command, and the views' order. Nothing else about the apps is known:
    /// every view is drawn from its shape.
    public mutating func learn(help: JSON) {
        // Names learned here are printed later (`type more for the next page`): cleaned
        // of control characters like everything else the server sent.
        let help = help.cleanedForTerminal
        var order: [String] = []
        for view in help["views"]?.arrayValue ?? [] {
            guard let name = view["name"]?.stringValue else { continue }
            order.append(name)
            if let busy = view["busy"]?.arrayValue { busyFields[name] = Set(busy.compactMap(\.stringValue)) }
        }
        viewOrder = order
        for command in help["commands"]?.arrayValue ?? [] where command["paging"]?.boolValue == true {
            if let view = command["view"]?.stringValue, let name = command["name"]?.stringValue { pagingCommands[view] = name }
        }
    }

    /// The text for one server message, or `nil` for messages shown elsewhere. Every
    /// string the server sent is printed with its control characters replaced
    /// (`TerminalText`).
    public mutating func render(_ message: JSON) -> String? {
        let message = message.cleanedForTerminal
        switch message["type"]?.stringValue {
        case "welcome":
            let server = message["server"]?.stringValue ?? "viewline"
            let session = message["session"]?.stringValue ?? "?"
            return style.dim("connected to \(server), session \(session); type help for commands")
        case "display":
            let view = message["view"]?.stringValue ?? "?", state = message["state"] ?? .null
            if view == "connections" { return renderConnections(state["count"]?.intValue ?? 1) }
            return renderDisplayEvent(view: view, state: state)
        case "alert":
            return renderAlert(message)
        case "dismiss":
            return style.dim("(alert \(message["id"]?.stringValue ?? "?") dismissed)")
        case "bye":
            return style.dim("server said bye: \(message["reason"]?.stringValue ?? "")")
        case "reply":
            return renderReply(message)
        default:
            return message.encoded
        }
    }

    /// The server's own view: how many places the session is open in.
    func renderConnections(_ count: Int) -> String {
        count > 1
            ? style.dim("this session is also open in \(count - 1) other place\(count == 2 ? "" : "s"); end-others ends them and changes the token")
            : style.dim("this session is open only here")
    }

    // MARK: - Replies

    public func renderReply(_ reply: JSON) -> String? {
        if reply["ok"]?.boolValue == false {
            let code = reply["error"]?["code"]?.stringValue ?? "error"
            let text = reply["error"]?["message"]?.stringValue ?? ""
            return style.red("error \(code): \(text)")
        }
        guard let result = reply["result"] else { return style.green("ok") }
        if let commands = result["commands"]?.arrayValue {
            return renderHelp(commands, services: result["services"]?.arrayValue ?? [])
        }
        if let command = result["command"], command["usage"] != nil {
            return renderHelp(command: command)
        }
        if let list = renderSessionList(result) { return list }
        if let inspection = renderInspection(result) { return inspection }
        if let transcript = renderTranscript(result) { return transcript }
        if let views = result["views"]?.objectValue {
            // Decoding does not keep the server's key order: list views in the server's (`help`).
            let known = viewOrder
            let names = known.filter { views[$0] != nil } + views.keys.filter { !known.contains($0) }.sorted()
            return names.map { renderDisplay(view: $0, state: views[$0] ?? .null) }.joined(separator: "\n")
        }
        if let view = result["view"]?.stringValue, let state = result["state"] {
            return renderDisplay(view: view, state: state)
        }
        if let drafts = result["drafts"]?.arrayValue {
            if drafts.isEmpty { return style.dim("no saved drafts") }
            return table(["SAVED AT", "TEXT"], drafts.map { [$0["savedAt"]?.stringValue ?? "", $0["text"]?.stringValue ?? ""] })
        }
        if result["pong"]?.boolValue == true { return style.green("pong") }
        if let ended = result["ended"]?.intValue, result["token"] != nil {
            // end-others: the token is new (kept for resuming), never printed for a shoulder to read.
            return style.green("ok ") + style.dim("ended \(ended) other connection\(ended == 1 ? "" : "s"); the session has a new token")
        }
        if result["accepted"]?.boolValue == true { return nil }  // the displays that follow say it all
        if let summary = summary(of: result) { return style.green("ok ") + style.dim(summary) }
        if let object = result.objectValue, !object.isEmpty {
            // Unknown results: every field, in a stable order.
            let fields = object.pairs.sorted { $0.key < $1.key }.map { "\($0.key)=\(plain($0.value))" }
            return style.green("ok ") + style.dim(fields.joined(separator: " "))
        }
        return style.green("ok")
    }

    /// One line for the results of commands whose displays do not already say it all.
    func summary(of result: JSON) -> String? {
        if let answer = result["answer"]?.stringValue, let action = result["action"]?.stringValue {
            return "\(answer == "cancel" ? "cancelled" : "chose") \(action) (alert \(plain(result["alert"] ?? .null)))"
        }
        if let expiresIn = result["expiresIn"]?.intValue {
            return "access token valid for \(Self.duration(seconds: expiresIn))"
        }
        if result["loggedIn"]?.boolValue == false { return "logged out" }
        if let service = result["service"]?.stringValue, let count = result["count"]?.intValue {
            if count == 0 { return "no \(service) fault armed" }
            return "the next \(count == 1 ? "" : "\(count) ")\(service) call\(count == 1 ? "" : "s") will fail"
        }
        if result["settled"]?.boolValue == true { return "no work running" }
        if result["pending"]?.boolValue == true { return "stored locally" }
        return nil
    }

    static func duration(seconds: Int) -> String {
        if seconds >= 3600, seconds % 3600 == 0 { return "\(seconds / 3600) h" }
        if seconds >= 60, seconds % 60 == 0 { return "\(seconds / 60) min" }
        return "\(seconds) s"
    }

    /// Every command with its description, wrapped to ``width``: continuation lines
    /// are indented under the description column and nothing is cut.
    func renderHelp(_ commands: [JSON], services: [JSON]) -> String {
        var rows = commands.map { ($0["usage"]?.stringValue ?? "", $0["summary"]?.stringValue ?? "") }
        rows.append(("y / n / <label>", "Answer the presented alert (REPL shortcut)."))
        rows.append(("token", "Show this session's token, to join it from another terminal with viewline --attach (REPL)."))
        // The usage column is as wide as the widest usage up to half the terminal: a
        // longer one (a hostile server's) gets a line of its own, and the column
        // never pushes the descriptions past the terminal.
        let widest = max(8, width / 2)
        let column = (rows.map(\.0.count).filter { $0 <= widest }.max() ?? 8) + 2
        let indent = String(repeating: " ", count: column)
        let descriptionWidth = max(20, width - column - 1)
        var lines = [style.dim("COMMAND".padding(column) + "DESCRIPTION")]
        for (usage, summary) in rows {
            let wrapped = wrap(summary, width: descriptionWidth)
            if usage.count + 2 > column {
                lines += wrap(usage, width: max(20, width - 1))
                lines += wrapped.map { indent + $0 }
            } else {
                lines.append(usage.padding(column) + (wrapped.first ?? ""))
                lines += wrapped.dropFirst().map { indent + $0 }
            }
        }
        if !services.isEmpty {
            let names = services.compactMap { $0["name"]?.stringValue }.joined(separator: ", ")
            lines += wrap("fault services: " + names, width: max(20, width - 1)).map { style.dim($0) }
        }
        lines += wrap("help <command> shows one command with an example.", width: max(20, width - 1)).map { style.dim($0) }
        return lines.joined(separator: "\n")
    }

    /// One command: its usage, its whole description and an example.
    func renderHelp(command: JSON) -> String {
        let textWidth = max(20, width - 3)
        var lines = [style.bold(command["usage"]?.stringValue ?? "")]
        lines += wrap(command["summary"]?.stringValue ?? "", width: textWidth).map { "  " + $0 }
        if let example = command["example"]?.stringValue {
            lines.append("  " + style.dim("example: ") + example)
        }
        if command["admin"]?.boolValue == true {
            lines.append("  " + style.dim("admin only: start the server with --admin"))
        }
        return lines.joined(separator: "\n")
    }

    // MARK: - Views

    /// A view's whole state, drawn from its shape (``renderByShape(view:state:rows:)``).
    public func renderDisplay(view: String, state: JSON) -> String {
        renderByShape(view: view, state: state)
    }

    /// A `display` event: as ``renderDisplay(view:state:)``, except that in a paging
    /// view a page appended to the rows already printed prints only the new rows
    /// (`state <view>` shows them all).
    mutating func renderDisplayEvent(view: String, state: JSON) -> String {
        guard pagingCommands[view] != nil, let (name, rows) = Self.firstList(in: state) else {
            return renderDisplay(view: view, state: state)
        }
        let shown = shownRows[view] ?? []
        let appended = !shown.isEmpty && rows.count >= shown.count && Array(rows.prefix(shown.count)) == shown
        if !isBusy(view: view, state: state) { shownRows[view] = rows }
        return renderByShape(view: view, state: state, rows: appended ? (name, Array(rows.dropFirst(shown.count))) : nil)
    }

    /// The first field of `state` that is a list of records, and its rows.
    static func firstList(in state: JSON) -> (String, [JSON])? {
        for (name, value) in state.objectValue?.pairs ?? [] {
            if case .array(let items) = value, items.allSatisfy({ $0.objectValue != nil }) { return (name, items) }
        }
        return nil
    }

    /// Whether one of the view's busy flags is true.
    func isBusy(view: String, state: JSON) -> Bool {
        let declared = busyFields[view]
        return state.objectValue?.pairs.contains { name, value in
            value.boolValue == true && (declared?.contains(name) ?? Self.isBusyFlag(name))
        } ?? false
    }

    /// A view's state drawn from its shape alone (the REPL knows nothing of the app):
    /// busy flags (the view's declared ones; else `saving`, `loading`, any `…ing`) that
    /// are true as "saving…", other scalar fields as `name: value`, each list of
    /// records as a table whose columns are the records' keys in order, an empty list
    /// as "no items". In a view with a paging command, `hasMore` reads as the hint to
    /// type it. `rows` replaces a list's rows in its table (the new page alone).
    func renderByShape(view: String, state: JSON, rows: (String, [JSON])? = nil) -> String {
        let title = style.bold(style.cyan("[\(view)]"))
        let declared = busyFields[view]
        let paging = pagingCommands[view]
        guard let fields = state.objectValue else { return "\(title) \(plain(state))" }
        var head: [String] = []
        var busy: [String] = []
        var tables: [String] = []
        var hint = ""
        for (name, value) in fields.pairs {
            if let paging, name == "hasMore", case .bool(let more) = value {
                if more { hint = style.dim(" — type \(paging) for the next page") }
                continue
            }
            switch value {
            case .bool(let flag) where declared?.contains(name) ?? Self.isBusyFlag(name):
                if flag { busy.append("\(name)…") }
            case .array(let items) where items.isEmpty:
                head.append("no \(name)")
            case .array(let items) where items.allSatisfy({ $0.objectValue != nil }):
                head.append("\(items.count) \(name)")
                let items = rows.flatMap { $0.0 == name ? $0.1 : nil } ?? items
                guard !items.isEmpty else { continue }
                var columns: [String] = []
                for item in items { for key in item.objectValue?.keys ?? [] where !columns.contains(key) { columns.append(key) } }
                tables.append(table(columns.map { $0.uppercased() }, items.map { item in columns.map { cell(item[$0] ?? .null) } }))
            default:
                head.append("\(name): \(cell(value))")
            }
        }
        let line =
            ([title] + head).joined(separator: " ") + (busy.isEmpty ? "" : " " + style.dim("(" + busy.joined(separator: ", ") + ")")) + hint
        return ([line] + tables).joined(separator: "\n")
    }

    /// A flag that says work is under way: the page's rule (`loading`, `saving`, `busy`,
    /// `pending`, any name ending in "ing").
    static func isBusyFlag(_ name: String) -> Bool {
        ["loading", "syncing", "saving", "busy", "pending", "refreshing", "fetching", "working"].contains(name.lowercased())
            || name.lowercased().hasSuffix("ing")
    }

    /// One value in a table cell or after a label: booleans as yes/no, `null` as "—",
    /// an empty string as `""` (so a label never looks like it lost its value).
    func cell(_ value: JSON) -> String {
        switch value {
        case .bool(let flag): flag ? "yes" : "no"
        case .null: "—"
        case .string(let text) where text.isEmpty: #""""#
        default: plain(value)
        }
    }

    // MARK: - Alerts

    /// The key that answers an action: `y` for confirm, `n` for cancel.
    public static func key(for role: String) -> String { role == "cancel" ? "n" : "y" }

    public func renderAlert(_ alert: JSON) -> String {
        let fullTitle = alert["title"]?.stringValue ?? ""
        let message = alert["message"]?.stringValue ?? ""
        let actions = (alert["actions"]?.arrayValue ?? []).map {
            "[\(Self.key(for: $0["role"]?.stringValue ?? "confirm"))] \($0["label"]?.stringValue ?? "")"
        }.joined(separator: "  ")
        let fields = (alert["fields"]?.arrayValue ?? []).compactMap { $0["label"]?.stringValue }
        // Every line of the box is wrapped to at most 56 columns, the title too: a
        // server's 100,000-character title would otherwise pad every line to its width.
        var body: [String] = wrap(message, width: 56)
        // The fields and the actions keep a line each unless one is past 76 columns.
        for line in (fields.isEmpty ? [] : ["fields: " + fields.joined(separator: ", ")]) + [actions] {
            body += line.count > 76 ? wrap(line, width: 56) : [line]
        }
        let title = fullTitle.count > 54 ? String(fullTitle.prefix(53)) + "…" : fullTitle
        let width = max(body.map(\.count).max() ?? 0, title.count + 2, 20)
        let heading = title.isEmpty ? "" : " \(title) "
        let top = "┌─" + heading + String(repeating: "─", count: max(0, width - heading.count)) + "─┐"
        let lines = body.map { "│ " + $0 + String(repeating: " ", count: width - $0.count) + " │" }
        let bottom = "└" + String(repeating: "─", count: width + 2) + "┘"
        let id = style.dim(" alert \(alert["id"]?.stringValue ?? "?")")
        return ([style.yellow(top) + id] + lines.map { style.yellow($0) } + [style.yellow(bottom)]).joined(separator: "\n")
    }

    // MARK: - Helpers

    func plain(_ value: JSON) -> String {
        switch value {
        case .string(let s): s
        case .int(let i): String(i)
        case .number(let text): text
        case .null: "null"
        default: value.encoded
        }
    }

    func wrap(_ text: String, width: Int) -> [String] {
        let width = max(1, width)
        var lines: [String] = []
        for paragraph in text.split(separator: "\n", omittingEmptySubsequences: false) {
            var line = ""
            for whole in paragraph.split(separator: " ") {
                // A word longer than a line is cut into lines of its own: no line is
                // ever wider than `width`, whatever the server sent.
                var word = Substring(whole)
                while word.count > width {
                    if !line.isEmpty { lines.append(line) }
                    lines.append(String(word.prefix(width)))
                    word = word.dropFirst(width)
                    line = ""
                }
                guard !word.isEmpty else { continue }
                if !line.isEmpty && line.count + 1 + word.count > width {
                    lines.append(line)
                    line = ""
                }
                line += line.isEmpty ? String(word) : " " + word
            }
            lines.append(line)
        }
        return lines
    }

    /// An aligned table with a dim header row.
    public func table(_ header: [String], _ rows: [[String]]) -> String {
        let limit = 48
        let cells = rows.map { $0.map { $0.count > limit ? String($0.prefix(limit - 1)) + "…" : $0 } }
        var widths = header.map(\.count)
        for row in cells {
            for (index, cell) in row.enumerated() where index < widths.count { widths[index] = max(widths[index], cell.count) }
        }
        func line(_ row: [String]) -> String {
            row.enumerated().map { index, cell in
                index == row.count - 1 ? cell : cell + String(repeating: " ", count: widths[index] - cell.count)
            }.joined(separator: "  ")
        }
        return ([style.dim(line(header))] + cells.map { line($0) }).joined(separator: "\n")
    }
}

extension String {
    /// The string followed by spaces up to `width` characters (never cut).
    func padding(_ width: Int) -> String {
        count >= width ? self + " " : self + String(repeating: " ", count: width - count)
    }
}
