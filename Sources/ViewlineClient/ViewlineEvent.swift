import ViewlineProtocol

/// What the server tells a session's clients (PROTOCOL §4), and the client's own
/// connection changes.
public enum ViewlineEvent: Sendable, Equatable {
    /// A view's whole new state.
    case display(view: String, state: JSON, rev: Int)
    /// A modal asking the person to confirm or cancel, maybe with input fields.
    case alert(Alert)
    /// The alert with this id went away (answered, anywhere, or moot).
    case dismiss(id: String, rev: Int)
    /// The server closes the connection; after one that is not final the client resumes.
    case bye(Bye)
    /// The client's connection changed (reconnecting, connected again, gone).
    case connection(ConnectionState)
}

/// Where the client's connection stands.
public enum ConnectionState: Sendable, Equatable {
    /// Welcomed (or attached again) and serving the session.
    case connected
    /// The connection dropped, or the server said a `bye` that leaves the session alive:
    /// the client is resuming the session (on this node or another).
    case reconnecting
    /// For good: the session ended, could not be resumed, or the client was closed.
    case disconnected(reason: String)
}

/// An `alert` event: title, message, one or two actions, and the fields it asks for.
public struct Alert: Sendable, Identifiable {
    /// One of the alert's buttons.
    public struct Action: Sendable, Equatable {
        /// `confirm` or `cancel`.
        public var role: String
        /// The button's text.
        public var label: String
    }

    /// One input of the alert, sent back with `confirm`.
    public struct Field: Sendable, Equatable {
        /// The key its value is sent under.
        public var name: String
        /// What the input is called.
        public var label: String
        /// A password: shown as dots.
        public var secure: Bool
    }

    public let id: String
    /// Its place in the session's event order.
    public let rev: Int
    /// The dialog's heading.
    public let title: String
    /// What the dialog says.
    public let message: String
    /// One or two buttons, in order.
    public let actions: [Action]
    /// The inputs it asks for (none for most alerts).
    public let fields: [Field]
    /// Where `confirm` and `cancel` go: not kept alive by the alert (the client keeps
    /// alerts in its received events).
    weak var client: ViewlineClient?

    init(_ message: JSON, client: ViewlineClient?) {
        id = message["id"]?.stringValue ?? ""
        rev = message["rev"]?.intValue ?? 0
        title = message["title"]?.stringValue ?? ""
        self.message = message["message"]?.stringValue ?? ""
        actions = (message["actions"]?.arrayValue ?? []).map {
            Action(role: $0["role"]?.stringValue ?? "", label: $0["label"]?.stringValue ?? "")
        }
        fields = (message["fields"]?.arrayValue ?? []).map {
            Field(name: $0["name"]?.stringValue ?? "", label: $0["label"]?.stringValue ?? "", secure: $0["secure"]?.boolValue ?? false)
        }
        self.client = client
    }

    /// Answers with the confirm action, filling `fields` (by name).
    @discardableResult
    public func confirm(fields values: [String: String] = [:]) async throws -> JSON {
        guard let client else { throw ConnectionClosed(message: "the alert's client is gone", bye: nil, sessionEnded: true) }
        return try await client.confirm(self, fields: values)
    }

    /// Answers with the cancel action.
    @discardableResult
    public func cancel() async throws -> JSON {
        guard let client else { throw ConnectionClosed(message: "the alert's client is gone", bye: nil, sessionEnded: true) }
        return try await client.cancel(self)
    }
}

extension Alert: Equatable {
    public static func == (lhs: Alert, rhs: Alert) -> Bool {
        lhs.id == rhs.id && lhs.rev == rhs.rev && lhs.title == rhs.title && lhs.message == rhs.message
            && lhs.actions == rhs.actions && lhs.fields == rhs.fields
    }
}
