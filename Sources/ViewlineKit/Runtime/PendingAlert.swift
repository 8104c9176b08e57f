/// An alert that is presented or waiting its turn.
struct PendingAlert {
    var id: String
    var content: AlertContent
    /// Resumed with the answer; `nil` for alerts nobody awaits (plain error alerts).
    var continuation: CheckedContinuation<AlertAnswer, Never>?
}
