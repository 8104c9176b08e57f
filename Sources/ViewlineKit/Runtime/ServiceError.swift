/// A backend call that failed; `message` is what the user is shown.
public struct ServiceError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The backend's name, as in ``Backend``.
    public var service: String
    /// What the user is shown.
    public var message: String

    /// A failure of `service` with `message` for the user.
    public init(_ service: String, _ message: String) {
        self.service = service
        self.message = message
    }

    public var description: String { message }

    /// The text a person sees for any failure: a service's or protocol error's
    /// message, else the error's description.
    public static func describe(_ error: any Error) -> String {
        if let error = error as? ServiceError { return error.message }
        if let error = error as? ProtocolError { return error.message }
        return String(describing: error)
    }
}
