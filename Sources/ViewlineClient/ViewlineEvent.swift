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
    case connected
    /// The connection dropped, or the server said a `bye` that leaves the session alive:
    /// the client is resuming the session (on this node or another).
    case reconnecting
    /// For good: the session ended, could not be resumed, or the client was closed.
    case disconnected(reason: String)
}

/// An `alert` event: title, message, one or two actions, and the fields it asks for.
public struct Alert: Sendable, Identifiable {
    public struct Action: Sendable, Equatable {
        /// `confirm` or `cancel`.
        public var role: String
        public var label: String
    }

    public struct Field: Sendable, Equatable {
        public var name: String
        public var label: String
        /// A password: shown as dots.
        public var secure: Bool
    }

    public let id: String
    public let rev: Int
    public let title: String
    public let message: String
    public let actions: [Action]
    public let fields: [Field]
    let client: ViewlineClient?

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
