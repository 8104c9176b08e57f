import Foundation

/// A view-model's declarations checked against its `State`: the names in
/// ``ViewModel/stateSummary`` and ``ViewModel/busyFields`` are strings, and a typo or
/// a renamed field would otherwise go unnoticed (clients draw busy flags and `help`
/// from them).
extension ViewDescription {
    /// What disagrees, read from the initial state (`services` make it): each field the
    /// state encodes that the summary's top level does not name, each busy field that
    /// is no boolean the state encodes. A field the summary names that the initial
    /// state leaves out (an optional that is `nil`) is not an issue.
    func declarationIssues(services: Services) -> [String] {
        guard let fields = encodeState(makeState(services)).json.objectValue else { return [] }
        let named = Set(Self.topLevelNames(of: summary))
        var issues: [String] = []
        for (field, _) in fields.pairs where !named.contains(field) {
            issues.append("the \(name) state encodes \"\(field)\", which its stateSummary \(summary) does not name")
        }
        for flag in busyFields where fields[flag]?.boolValue == nil {
            issues.append("the \(name) view declares the busy field \"\(flag)\", which is no boolean its state encodes")
        }
        return issues
    }

    /// The names at the top level of a summary such as `{items:[{name, phone}], syncing}`:
    /// `items`, `syncing`.
    static func topLevelNames(of summary: String) -> [String] {
        var body = Substring(summary.trimmingCharacters(in: .whitespaces))
        if body.hasPrefix("{") && body.hasSuffix("}") { body = body.dropFirst().dropLast() }
        var names: [String] = []
        var depth = 0
        var current = ""
        var inName = true
        for character in body {
            switch character {
            case "{", "[": depth += 1
            case "}", "]": depth -= 1
            case "," where depth == 0:
                names.append(current.trimmingCharacters(in: .whitespaces))
                current = ""
                inName = true
                continue
            case ":" where depth == 0:
                inName = false
            default: break
            }
            if inName && depth == 0 && character != ":" { current.append(character) }
        }
        let last = current.trimmingCharacters(in: .whitespaces)
        if !last.isEmpty { names.append(last) }
        return names.map { $0.trimmingCharacters(in: CharacterSet(charactersIn: "?")) }.filter { !$0.isEmpty }
    }
}
