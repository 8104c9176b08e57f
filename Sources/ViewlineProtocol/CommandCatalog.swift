/// Everything the protocol knows about each command: usage, summary, and how its
/// inline words and JSON `args` map onto a ``Command``. `help`, the REPL's
/// completion and `protocol/` are all generated from this one table.
public struct CommandSpec: Sendable {
    public var name: String
    public var usage: String
    public var summary: String
    /// One inline line that uses the command, as a person would type it.
    public var example: String
    /// The JSON `args` keys this command accepts.
    public var argumentNames: [String]
    public var adminOnly: Bool
    let inline: @Sendable ([String]) throws(ProtocolError) -> JSONObject
    let decode: @Sendable (JSONObject) throws(ProtocolError) -> Command

    public var json: JSON {
        var object: JSONObject = ["name": .string(name), "usage": .string(usage), "summary": .string(summary)]
        object["args"] = .array(argumentNames.map { .string($0) })
        object["example"] = .string(example)
        if adminOnly { object["admin"] = true }
        return .object(object)
    }

    func usageError(_ detail: String? = nil) -> ProtocolError {
        ProtocolError(.badArguments, (detail.map { "\($0); " } ?? "") + "usage: \(usage)")
    }
}

public enum CommandCatalog {
    /// The backend services `fault` can target.
    public static let services: [(name: String, summary: String)] = [
        ("search", "the places backend behind `search`"),
        ("save", "the remote store behind `save`"),
        ("sync", "the remote contacts source behind `contacts` and `sync`"),
        ("playlist", "the playlist backend behind `playlist` and `more`"),
    ]

    /// The views a session has, in the order `state` lists them.
    public static let views: [(name: String, summary: String)] = [
        ("search", "{query, loading, results:[{name, cuisine, address, lat, lon, rating, price}]}"),
        ("session", "{user, loggedIn}"),
        ("draft", "{text, pending, saving}"),
        ("contacts", "{items:[{name, phone, address}], syncing}"),
        ("playlist", "{items:[{position, title, artist}], hasMore, loading, step}"),
    ]

    public static let all: [CommandSpec] = [
        spec(
            "help", "help [command]", "List every command with its usage, or show one command with an example.",
            example: "help search", args: ["command"],
            inline: { words throws(ProtocolError) in
                guard words.count <= 1 else { throw ProtocolError(.badArguments, "usage: help [command]") }
                return words.first.map { ["command": .string($0)] } ?? [:]
            },
            decode: { args throws(ProtocolError) in .help(command: try optionalString(args, "command", usage: "help [command]")) }
        ),
        spec("ping", "ping", "Check the connection; replies {\"pong\":true}.", decode: { _ in .ping }),
        spec(
            "state", "state [view]", "Show the current state of one view, or of all views.", example: "state search", args: ["view"],
            inline: { words throws(ProtocolError) in
                guard words.count <= 1 else { throw ProtocolError(.badArguments, "usage: state [view]") }
                return words.first.map { ["view": .string($0)] } ?? [:]
            },
            decode: { args throws(ProtocolError) in .state(view: try optionalString(args, "view", usage: "state [view]")) }
        ),
        spec(
            "wait", "wait [timeout-ms]",
            "Reply once no background work is running (default timeout 10000 ms): handy at the end of a script.",
            example: "wait 5000", args: ["timeout"],
            inline: { words throws(ProtocolError) in
                guard words.count <= 1 else { throw ProtocolError(.badArguments, "usage: wait [timeout-ms]") }
                guard let word = words.first else { return [:] }
                guard let ms = Int(word), ms >= 0 else { throw ProtocolError(.badArguments, "timeout must be a number of milliseconds; usage: wait [timeout-ms]") }
                return ["timeout": .int(ms)]
            },
            decode: { args throws(ProtocolError) in
                let usage = "wait [timeout-ms]"
                guard let value = args["timeout"] else { return .wait(timeoutMilliseconds: nil) }
                guard let ms = value.intValue, ms >= 0 else { throw ProtocolError(.badArguments, "timeout must be a non-negative integer; usage: \(usage)") }
                return .wait(timeoutMilliseconds: ms)
            }
        ),
        spec("quit", "quit", "Say goodbye and close the connection.", decode: { _ in .quit }),
        spec(
            "search", "search <query>", "Search places by name, cuisine, dish or neighbourhood; the latest search wins.",
            example: "search thai food", args: ["query"],
            inline: joined("query"),
            decode: { args throws(ProtocolError) in .search(query: try requiredString(args, "query", usage: "search <query>")) }
        ),
        spec(
            "confirm", "confirm [alert-id] [name=value ...]",
            "Answer the presented alert with its confirm action, filling its input fields.",
            example: "confirm a2 user=alice password=wonderland", args: ["alert", "fields"],
            inline: { words throws(ProtocolError) in
                var args = JSONObject()
                var fields = JSONObject()
                for (index, word) in words.enumerated() {
                    if let eq = word.firstIndex(of: "=") {
                        let name = String(word[..<eq])
                        guard !name.isEmpty else { throw ProtocolError(.badArguments, "a field needs a name; usage: confirm [alert-id] [name=value ...]") }
                        fields[name] = .string(String(word[word.index(after: eq)...]))
                    } else if index == 0 {
                        args["alert"] = .string(word)
                    } else {
                        throw ProtocolError(.badArguments, "expected name=value, got \"\(word)\"; usage: confirm [alert-id] [name=value ...]")
                    }
                }
                if !fields.isEmpty { args["fields"] = .object(fields) }
                return args
            },
            decode: { args throws(ProtocolError) in
                let usage = "confirm [alert-id] [name=value ...]"
                let alert = try optionalString(args, "alert", usage: usage)
                var fields: [String: String] = [:]
                if let raw = args["fields"], !raw.isNull {
                    guard let object = raw.objectValue else { throw ProtocolError(.badArguments, "fields must be an object of strings; usage: \(usage)") }
                    for pair in object.pairs {
                        guard let value = pair.value.stringValue else { throw ProtocolError(.badArguments, "field \(pair.key) must be a string; usage: \(usage)") }
                        fields[pair.key] = value
                    }
                }
                return .confirm(alert: alert, fields: fields)
            }
        ),
        spec(
            "cancel", "cancel [alert-id]", "Answer the presented alert with its cancel action.", example: "cancel a2", args: ["alert"],
            inline: { words throws(ProtocolError) in
                guard words.count <= 1 else { throw ProtocolError(.badArguments, "usage: cancel [alert-id]") }
                return words.first.map { ["alert": .string($0)] } ?? [:]
            },
            decode: { args throws(ProtocolError) in .cancel(alert: try optionalString(args, "alert", usage: "cancel [alert-id]")) }
        ),
        spec(
            "login", "login <user> <password>", "Log in; the session gets an access token with a lifetime.",
            example: "login alice wonderland", args: ["user", "password"],
            inline: { words throws(ProtocolError) in
                guard words.count == 2 else { throw ProtocolError(.badArguments, "usage: login <user> <password>") }
                return ["user": .string(words[0]), "password": .string(words[1])]
            },
            decode: { args throws(ProtocolError) in
                let usage = "login <user> <password>"
                return .login(user: try requiredString(args, "user", usage: usage), password: try requiredString(args, "password", usage: usage, allowEmpty: true))
            }
        ),
        spec("logout", "logout", "Log out and drop the access token.", decode: { _ in .logout }),
        spec(
            "draft", "draft <text>", "Set your unsaved draft; it is stored locally before the reply.", example: "draft buy milk",
            args: ["text"],
            inline: joined("text"),
            decode: { args throws(ProtocolError) in .draft(text: try requiredString(args, "text", usage: "draft <text>")) }
        ),
        spec("save", "save", "Save the pending draft to the remote store; on failure, asks to save again.", decode: { _ in .save }),
        spec("saved", "saved", "List your saved drafts, newest first.", decode: { _ in .saved }),
        spec("contacts", "contacts", "Open the contacts view (local database) and start a background sync.", decode: { _ in .contacts }),
        spec("sync", "sync", "Sync contacts from the remote source (one sync at a time, server-wide).", decode: { _ in .sync }),
        spec("playlist", "playlist", "Start the playlist flow: check the token, log in if needed, fetch the first page.", decode: { _ in .playlist }),
        spec("more", "more", "Fetch the next playlist page (the reserved step).", decode: { _ in .more }),
        spec(
            "fault", "fault <service> [count] [message]",
            "Make the next count calls (default 1) of a backend service fail (admin only).",
            example: "fault save 2 disk full", args: ["service", "count", "message"], adminOnly: true,
            inline: { words throws(ProtocolError) in
                let usage = "fault <service> [count] [message]"
                guard let service = words.first else { throw ProtocolError(.badArguments, "usage: \(usage)") }
                var args: JSONObject = ["service": .string(service)]
                var rest = words.dropFirst()
                if let first = rest.first, let count = Int(first) {
                    args["count"] = .int(count)
                    rest = rest.dropFirst()
                }
                if !rest.isEmpty { args["message"] = .string(rest.joined(separator: " ")) }
                return args
            },
            decode: { args throws(ProtocolError) in
                let usage = "fault <service> [count] [message]"
                let service = try requiredString(args, "service", usage: usage)
                var count = 1
                if let raw = args["count"], !raw.isNull {
                    guard let value = raw.intValue, value >= 0 else { throw ProtocolError(.badArguments, "count must be a non-negative integer; usage: \(usage)") }
                    count = value
                }
                return .fault(service: service, count: count, message: try optionalString(args, "message", usage: usage))
            }
        ),
    ]

    private static let byName: [String: CommandSpec] = Dictionary(uniqueKeysWithValues: all.map { ($0.name, $0) })

    public static func spec(named name: String) -> CommandSpec? { byName[name.lowercased()] }

    /// Builds a command from its name and JSON arguments (the JSON form, and the
    /// second half of the inline form).
    public static func command(name: String, args: JSONObject) throws(ProtocolError) -> Command {
        guard let spec = spec(named: name) else {
            throw ProtocolError(.unknownCommand, "unknown command \"\(name)\"; try help")
        }
        for key in args.keys where !spec.argumentNames.contains(key) {
            throw ProtocolError(.badArguments, "unexpected argument \"\(key)\"; usage: \(spec.usage)")
        }
        return try spec.decode(args)
    }

    /// Maps inline words to the command's name and JSON `args`, without validating
    /// the values: what the shared test vectors record for each line.
    public static func inlineArguments(words: [String]) throws(ProtocolError) -> (name: String, args: JSONObject) {
        guard let name = words.first else { throw ProtocolError(.unknownCommand, "empty command") }
        guard let spec = spec(named: name) else {
            throw ProtocolError(.unknownCommand, "unknown command \"\(name)\"; try help")
        }
        return (spec.name, try spec.inline(Array(words.dropFirst())))
    }

    /// Builds a command from inline words (the first is the command name).
    public static func command(words: [String]) throws(ProtocolError) -> Command {
        guard let name = words.first else { throw ProtocolError(.unknownCommand, "empty command") }
        guard let spec = spec(named: name) else {
            throw ProtocolError(.unknownCommand, "unknown command \"\(name)\"; try help")
        }
        return try spec.decode(try spec.inline(Array(words.dropFirst())))
    }

    // MARK: building blocks

    private static func spec(
        _ name: String, _ usage: String, _ summary: String, example: String? = nil, args: [String] = [], adminOnly: Bool = false,
        inline: (@Sendable ([String]) throws(ProtocolError) -> JSONObject)? = nil,
        decode: @escaping @Sendable (JSONObject) throws(ProtocolError) -> Command
    ) -> CommandSpec {
        let noArguments: @Sendable ([String]) throws(ProtocolError) -> JSONObject = { words throws(ProtocolError) in
            guard words.isEmpty else { throw ProtocolError(.badArguments, "\(name) takes no arguments; usage: \(usage)") }
            return [:]
        }
        return CommandSpec(
            name: name, usage: usage, summary: summary, example: example ?? name, argumentNames: args, adminOnly: adminOnly,
            inline: inline ?? noArguments, decode: decode)
    }

    /// All remaining words joined by single spaces, as one argument.
    private static func joined(_ key: String) -> @Sendable ([String]) throws(ProtocolError) -> JSONObject {
        { words throws(ProtocolError) in words.isEmpty ? [:] : [key: .string(words.joined(separator: " "))] }
    }

    private static func requiredString(_ args: JSONObject, _ key: String, usage: String, allowEmpty: Bool = false) throws(ProtocolError) -> String {
        guard let value = args[key], !value.isNull else { throw ProtocolError(.badArguments, "missing \(key); usage: \(usage)") }
        guard let string = value.stringValue else { throw ProtocolError(.badArguments, "\(key) must be a string; usage: \(usage)") }
        guard allowEmpty || !string.trimmingSpaces.isEmpty else { throw ProtocolError(.badArguments, "\(key) must not be empty; usage: \(usage)") }
        return string
    }

    private static func optionalString(_ args: JSONObject, _ key: String, usage: String) throws(ProtocolError) -> String? {
        guard let value = args[key], !value.isNull else { return nil }
        guard let string = value.stringValue else { throw ProtocolError(.badArguments, "\(key) must be a string; usage: \(usage)") }
        return string
    }
}

extension String {
    var trimmingSpaces: Substring {
        var s = Substring(self)
        while let f = s.first, f == " " || f == "\t" { s.removeFirst() }
        while let l = s.last, l == " " || l == "\t" { s.removeLast() }
        return s
    }
}
