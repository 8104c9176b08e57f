/// A backend call that failed; `message` is shown to the user in an alert.
public struct ServiceError: Error, Sendable, Equatable, CustomStringConvertible {
    public var service: BackendService
    public var message: String

    public init(_ service: BackendService, _ message: String) {
        self.service = service
        self.message = message
    }

    public var description: String { message }
}

/// The backend services a session calls, each a target for `fault`.
public enum BackendService: String, Sendable, CaseIterable {
    case search, save, sync, playlist
}
