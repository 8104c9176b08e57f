/// One action button of an alert.
public struct AlertAction: Sendable, Equatable {
    public enum Role: String, Sendable, Equatable { case confirm, cancel }
    public var role: Role
    public var label: String

    public init(_ role: Role, _ label: String) {
        self.role = role
        self.label = label
    }

    public static func confirm(_ label: String) -> AlertAction { AlertAction(.confirm, label) }
    public static func cancel(_ label: String) -> AlertAction { AlertAction(.cancel, label) }

    public var json: JSON { ["role": .string(role.rawValue), "label": .string(label)] }
}

/// One input field of an alert.
public struct AlertField: Sendable, Equatable {
    public var name: String
    public var label: String
    public var secure: Bool

    public init(name: String, label: String, secure: Bool = false) {
        self.name = name
        self.label = label
        self.secure = secure
    }

    public var json: JSON { ["name": .string(name), "label": .string(label), "secure": .bool(secure)] }
}

/// What an alert shows: a modal dialog with one or two actions and optional fields.
public struct AlertContent: Sendable, Equatable {
    public var title: String
    public var message: String
    public var actions: [AlertAction]
    public var fields: [AlertField]

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

    public var hasCancel: Bool { actions.contains { $0.role == .cancel } }
}
