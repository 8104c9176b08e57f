/// How the client answered an alert.
public enum AlertAnswer: Sendable, Equatable {
    /// The confirm action, with the alert's field values by field name.
    case confirmed(fields: [String: String])
    /// The cancel action.
    case cancelled
    /// The alert went away unanswered (its task was cancelled, or it became moot).
    case dismissed
}
