/// A client command after parsing and validation: the one shape both the inline
/// and the JSON form turn into.
public enum Command: Sendable, Equatable {
    /// `help` lists every command; `help <command>` shows one.
    case help(command: String?)
    case ping
    case quit
    case state(view: String?)
    case wait(timeoutMilliseconds: Int?)
    case search(query: String)
    case confirm(alert: String?, fields: [String: String])
    case cancel(alert: String?)
    case fault(service: String, count: Int, message: String?)
    case login(user: String, password: String)
    case logout
    case draft(text: String)
    case save
    case saved
    case contacts
    case sync
    case playlist
    case more

    public var name: String {
        switch self {
        case .help: "help"
        case .ping: "ping"
        case .quit: "quit"
        case .state: "state"
        case .wait: "wait"
        case .search: "search"
        case .confirm: "confirm"
        case .cancel: "cancel"
        case .fault: "fault"
        case .login: "login"
        case .logout: "logout"
        case .draft: "draft"
        case .save: "save"
        case .saved: "saved"
        case .contacts: "contacts"
        case .sync: "sync"
        case .playlist: "playlist"
        case .more: "more"
        }
    }
}

/// One command as received: its client-chosen id (JSON form only) and the command.
public struct Request: Sendable, Equatable {
    /// Echoed as `re` in the reply: the JSON form's `id`, or `null` for inline lines.
    public var id: JSON
    public var command: Command

    public init(id: JSON = .null, command: Command) {
        self.id = id
        self.command = command
    }
}
