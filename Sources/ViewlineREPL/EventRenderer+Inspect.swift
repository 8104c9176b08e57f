import ViewlineProtocol

/// `inspect`'s replies (PROTOCOL §3, admin only): the node's sessions as a table, and
/// one session's timeline — each command with its outcome and time, each backend
/// call, each connection change, and each display as what changed since the previous
/// display of its view.
extension EventRenderer {
    /// The list of sessions, or `nil` when `result` is not one.
    func renderSessionList(_ result: JSON) -> String? {
        guard let sessions = result["sessions"]?.arrayValue, result["count"] != nil else { return nil }
        let rows = sessions.map { row -> [String] in
            [
                one(row["session"] ?? .null), one(row["rev"] ?? .null), one(row["connections"] ?? .null),
                (row["views"]?.arrayValue ?? []).map { one($0) }.joined(separator: ","), one(row["alerts"] ?? .null),
                (row["tasks"]?.arrayValue ?? []).map { one($0) }.joined(separator: ","), Self.oneLine(row["lastCommand"]?.stringValue ?? ""),
                row["ageSeconds"].map { one($0) + " s" } ?? "",
            ]
        }
        let count = result["count"]?.intValue ?? sessions.count
        let head = style.dim(
            "\(count) session\(count == 1 ? "" : "s") on this node\(result["recording"] == false ? " (no timelines: start with --admin)" : "")")
        return head + "\n" + table(["SESSION", "REV", "CONN", "VIEWS", "ALERTS", "TASKS", "LAST", "AGE"], rows)
    }

    /// `export`'s transcript, its lines as they are (to copy into a `.jsonl` file),
    /// each made one safe line; `nil` when `result` is not one.
    func renderTranscript(_ result: JSON) -> String? {
        guard let text = result["transcript"]?.stringValue, let steps = result["steps"]?.intValue else { return nil }
        let cut = result["cut"] == true ? ", cut at the recording's budget" : ""
        let head = style.dim(
            "session \(Self.oneLine(result["session"]?.stringValue ?? "?")): \(steps) steps\(cut); save these lines as a .jsonl file to replay it")
        // Each line parsed and written again, so a hostile server's line stays one safe
        // line of the same JSON (what does not parse is shown cleaned, not as JSON).
        let lines = text.split(separator: "\n").map { line in
            (try? JSON.parse(String(line)))?.encodedForTerminal ?? TerminalText.clean(Self.oneLine(String(line)))
        }
        return ([TerminalText.clean(head)] + lines).joined(separator: "\n")
    }

    /// One session's inspection, or `nil` when `result` is not one.
    func renderInspection(_ result: JSON) -> String? {
        guard let timeline = result["timeline"]?.arrayValue, let states = result["states"]?.objectValue else { return nil }
        let from = result["from"]?.intValue ?? 0
        var lines = [style.dim("session \(one(result["session"]?["session"] ?? .null)) at rev \(from):")]
        for (view, state) in states.pairs.sorted(by: { $0.key < $1.key }) {
            lines.append("  \(Self.oneLine(view)) " + (state.isNull ? style.dim("(older than the log reaches)") : state.encoded))
        }
        // Entries and events in rev order; a command's entry comes before the events it caused.
        var items: [(rev: Int, order: Int, text: String)] = []
        for (index, entry) in timeline.enumerated() {
            items.append((entry["rev"]?.intValue ?? 0, index, renderTimelineEntry(entry)))
        }
        var previous: [String: JSON] = states.pairs.reduce(into: [:]) { $0[$1.key] = $1.value }
        for (index, event) in (result["events"]?.arrayValue ?? []).enumerated() {
            let rev = event["rev"]?.intValue ?? 0
            let text: String
            switch event["type"]?.stringValue {
            case "display":
                let view = event["view"]?.stringValue ?? "?"
                let state = event["state"] ?? .null
                text = "display \(Self.oneLine(view)): " + Self.diff(from: previous[view] ?? .null, to: state).joined(separator: "; ")
                previous[view] = state
            case "alert":
                text = "alert \(one(event["id"] ?? .null)) \(one(event["title"] ?? .null))"
            case "dismiss":
                text = "dismiss \(one(event["id"] ?? .null))"
            default:
                text = event.encoded
            }
            // An event at rev r follows the command that began at r - 1 or earlier.
            items.append((rev &- 1, timeline.count + index, style.cyan("  ↳ rev \(rev) ") + text))
        }
        items.sort { ($0.rev, $0.order) < ($1.rev, $1.order) }
        if items.isEmpty { lines.append(style.dim("nothing after rev \(from) (the log holds from rev \(one(result["oldestRev"] ?? .null)))")) }
        lines += items.map(\.text)
        return lines.joined(separator: "\n")
    }

    private func renderTimelineEntry(_ entry: JSON) -> String {
        let time = entry["durationMs"]?.doubleValue.map { " " + Self.milliseconds($0) } ?? ""
        let failed = entry["error"].flatMap { $0.isNull ? nil : one($0) }
        let outcome = failed.map { style.red(" ✗ \($0)") } ?? style.green(" ✓")
        switch entry["kind"]?.stringValue {
        case "command":
            let arguments = (entry["arguments"]?.objectValue?.pairs ?? []).map { "\(Self.oneLine($0.key))=\(one($0.value))" }.joined(separator: " ")
            let repeats = entry["repeats"]?.intValue.flatMap { $0 > 1 ? " ×\($0)" : nil } ?? ""
            let head = ["rev \(one(entry["rev"] ?? .null))", one(entry["command"] ?? .null) + repeats, arguments].filter { !$0.isEmpty }
            return head.joined(separator: " ") + outcome
                + style.dim(repeats.isEmpty || time.isEmpty ? time : time + " longest")
        case "call":
            return style.dim("  call \(one(entry["backend"] ?? .null))") + outcome + style.dim(time)
        case "connection":
            return style.dim("  connection \(one(entry["connection"] ?? .null)): \(one(entry["event"] ?? .null))")
        default:
            return entry.encoded
        }
    }

    /// A server value on one line: a string's newlines, tabs and bidirectional
    /// controls shown escaped, so no string can print a line that looks like another
    /// entry (control characters are already replaced for the whole reply).
    func one(_ value: JSON) -> String {
        Self.oneLine(plain(value))
    }

    static func oneLine(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: { $0 == "\n" || $0 == "\t" || isBidiControl($0) }) else { return text }
        var out = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\n": out += "\\n"
            case "\t": out += "\\t"
            case _ where isBidiControl(scalar): out += "\u{FFFD}"
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    private static func isBidiControl(_ scalar: Unicode.Scalar) -> Bool {
        (0x202A...0x202E).contains(scalar.value) || (0x2066...0x2069).contains(scalar.value) || scalar.value == 0x200E
            || scalar.value == 0x200F || scalar.value == 0x061C
    }

    /// A duration as the inspector sent it; what no duration is (a server's number
    /// past any clock, not finite) is written as it came, never converted.
    static func milliseconds(_ value: Double) -> String {
        if value < 10 { return "\((value * 10).rounded() / 10) ms" }
        return Int(exactly: value.rounded()).map { "\($0) ms" } ?? "\(value) ms"
    }

    /// What changed from `old` to `new`: each changed field as `name: old → new`, a
    /// list by its length, or — its length the same — by the items that changed
    /// (``itemChanges(_:from:to:)``); the whole value when it is no object.
    static func diff(from old: JSON, to new: JSON) -> [String] {
        guard case .object(let before) = old, case .object(let after) = new else { return [short(new)] }
        let changes = fieldChanges(from: before, to: after, listsByItem: true)
        return changes.isEmpty ? ["no change"] : changes
    }

    /// Each field of `after` that is not `before`'s, then each field gone, its name
    /// after `path`; a list of the same length by its items when `listsByItem`.
    /// Fields are looked up in a table, not by scanning: a hostile server's object of
    /// thousands of keys costs time in proportion.
    private static func fieldChanges(_ path: String = "", from before: JSONObject, to after: JSONObject, listsByItem: Bool) -> [String] {
        let old = Dictionary(before.pairs.map { ($0.key, $0.value) }) { first, _ in first }
        var changes: [String] = []
        for (key, value) in after.pairs where old[key] != value {
            let was = old[key] ?? .null
            if listsByItem, case .array(let items) = value, case .array(let previous) = was {
                changes +=
                    items.count == previous.count
                    ? itemChanges(path + oneLine(key), from: previous, to: items)
                    : ["\(path)\(oneLine(key)): \(previous.count) → \(items.count) items"]
            } else {
                changes.append("\(path)\(oneLine(key)): \(short(was)) → \(short(value))")
            }
        }
        let kept = Set(after.pairs.map(\.key))
        for (key, _) in before.pairs where !kept.contains(key) { changes.append("\(path)\(oneLine(key)) removed") }
        return changes
    }

    /// The items of a list that changed, its length the same: `todos[0].done: false →
    /// true` for a field of an object, `tags[2]: "a" → "b"` for any other item; the
    /// first ``shownItemChanges`` items, then how many more.
    static func itemChanges(_ name: String, from before: [JSON], to after: [JSON]) -> [String] {
        var changes: [String] = []
        var shown = 0
        var more = 0
        for (index, (was, value)) in zip(before, after).enumerated() where was != value {
            guard shown < shownItemChanges else {
                more += 1
                continue
            }
            shown += 1
            if case .object(let old) = was, case .object(let new) = value {
                changes += fieldChanges("\(name)[\(index)].", from: old, to: new, listsByItem: false)
            } else {
                changes.append("\(name)[\(index)]: \(short(was)) → \(short(value))")
            }
        }
        if more > 0 { changes.append("\(name): \(more) more items changed") }
        return changes
    }

    /// How many changed items of one list a diff names.
    static let shownItemChanges = 3

    private static func short(_ value: JSON) -> String {
        let text = value.encoded
        return text.count > 40 ? String(text.prefix(39)) + "…" : text
    }
}
