extension CommandSpec {
    /// A command of each shape commands take (`viewline-fuzz`'s table): no argument,
    /// optional words, bounded integers, secure words, a word that may be empty, text
    /// to the end of the line, fields after a word. Decoding and ``check(_:)`` see only
    /// a declaration's arguments, so these reach every path the real ones do; a test
    /// keeps every built-in and demo command's shape among them.
    package static let everyShape: [CommandSpec] = [
        CommandSpec("ping", summary: "none"),
        CommandSpec("help", summary: "an optional word", arguments: [.optionalWord("command")]),
        CommandSpec("wait", summary: "a bounded integer", arguments: [.optionalInteger("timeout", maximum: 3_600_000, unit: "milliseconds")]),
        CommandSpec("slowlog", summary: "an integer from 1", arguments: [.optionalInteger("count", minimum: 1, maximum: 128)]),
        CommandSpec(
            "attach", summary: "a secure word, then an integer",
            arguments: [.word("token", secure: true), .optionalInteger("lastRev", placeholder: "last-rev")]),
        CommandSpec(
            "inspect", summary: "an optional word, then an integer from 0",
            arguments: [.optionalWord("session"), .optionalInteger("from", minimum: 0, placeholder: "from-rev")]),
        CommandSpec("confirm", summary: "a word, then fields", arguments: [.optionalWord("alert", placeholder: "alert-id"), .fields("fields")]),
        CommandSpec(
            "fault", summary: "a word, an integer, then text",
            arguments: [.word("service"), .optionalInteger("count", maximum: 1_000_000), .optionalText("message")]),
        CommandSpec("inspector", summary: "a secure word", arguments: [.word("token", secure: true)]),
        CommandSpec("export", summary: "a word", arguments: [.word("session")]),
        CommandSpec(
            "login", summary: "a word, then a secure word that may be empty",
            arguments: [.word("user"), .word("password", allowsEmpty: true, secure: true)]),
        CommandSpec("search", summary: "text", arguments: [.text("query")]),
        CommandSpec("rename", summary: "a word that may be empty", arguments: [.word("title", allowsEmpty: true)]),
    ]

    /// What decoding this command's line depends on: each argument's kind (an integer
    /// without its bounds), whether it is required, may be empty, or is secure.
    package var shape: [String] {
        arguments.map { argument in
            let kind: String
            switch argument.kind {
            case .word: kind = "word"
            case .text: kind = "text"
            case .integer: kind = "integer"
            case .fields: kind = "fields"
            }
            return "\(kind) required:\(argument.isRequired) empty:\(argument.allowsEmpty) secure:\(argument.isSecure)"
        }
    }
}
