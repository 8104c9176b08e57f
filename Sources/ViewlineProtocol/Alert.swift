/// One action button of an alert.
public struct AlertAction: Sendable, Equatable {
    /// What answering with the action means; a client sends the role as its command.
    public enum Role: String, Sendable, Equatable {
        /// Go ahead (`confirm`): "Save again", "OK", "Log in".
        case confirm
        /// Back out (`cancel`): "Discard", "Keep deleted".
        case cancel
    }
    /// What the action does when chosen.
    public var role: Role
    /// The button's text.
    public var label: String

    /// An action with `role` shown as `label`.
    public init(_ role: Role, _ label: String) {
        self.role = role
        self.label = label
    }

    /// The confirming action, shown as `label` (`.confirm("Save again")`).
    public static func confirm(_ label: String) -> AlertAction { AlertAction(.confirm, label) }
    /// The cancelling action, shown as `label` (`.cancel("Discard")`).
    public static func cancel(_ label: String) -> AlertAction { AlertAction(.cancel, label) }

    /// The wire form: `{"role": "confirm", "label": "OK"}`.
    public var json: JSON { ["role": .string(role.rawValue), "label": .string(label)] }
}

/// One input field of an alert.
public struct AlertField: Sendable, Equatable {
    /// The key under which `confirm` sends the field's value (`confirm password=…`).
    public var name: String
    /// What the field is called next to its input.
    public var label: String
    /// Whether clients hide what is typed (a password).
    public var secure: Bool

    /// A field named `name`, shown as `label`, hidden as typed when `secure`.
    public init(name: String, label: String, secure: Bool = false) {
        self.name = name
        self.label = label
        self.secure = secure
    }

    /// The wire form: `{"name": …, "label": …, "secure": …}`.
    public var json: JSON { ["name": .string(name), "label": .string(label), "secure": .bool(secure)] }
}

/// What an alert shows: a modal dialog with one or two actions and optional fields.
public struct AlertContent: Sendable, Equatable {
    /// The dialog's heading.
    public var title: String
    /// What the dialog says.
    public var message: String
    /// One or two buttons, in the order shown.
    public var actions: [AlertAction]
    /// Inputs whose values come back with `confirm` (``AlertField/name`` to value).
    public var fields: [AlertField]

    /// An alert with `title`, `message`, its buttons and any input fields.
    ///
    /// - Precondition: one or two actions.
    public init(title: String, message: String, actions: [AlertAction], fields: [AlertField] = []) {
        precondition((1...2).contains(actions.count), "an alert has one or two actions")
        self.title = title
        self.message = message
        self.actions = actions
        self.fields = fields
    }

    /// The common one-button error alert.
    public static func error(_ message: String, title: String = "Error") -> AlertContent {
        AlertContent(title: title, message: message, actions: [.confirm("OK")])
    }

    /// Whether `cancel` can answer it (one of its actions cancels).
    public var hasCancel: Bool { actions.contains { $0.role == .cancel } }
}
