/// A backend a view-model calls through ``ViewSession/call(_:_:)``: the key of its value
/// in ``Services``, the name `fault <name>` makes fail, and what `help` says of it.
///
/// One type ties the three together, so a view-model cannot call a backend it never
/// declared or that the server never provided:
///
/// ```swift
/// enum TodoStoreKey: BackendKey {
///     typealias Value = any TodoStore
///     static let name = "todo-store"
///     static let summary = "where the list is saved"
/// }
///
/// // In the view-model:
/// static let backends: [any BackendKey.Type] = [TodoStoreKey.self]
/// try await session.call(TodoStoreKey.self) { store in try await store.save(items) }
/// ```
///
/// ``Application`` lists every declared backend that ``Services`` lacks
/// (``Application/missingBackends``); a server refuses to start with any, and
/// `TestStore` records each as a test issue.
public protocol BackendKey: ServiceKey, Sendable {
    /// The name `fault <name>` and `help` use: lowercase words joined by `-`.
    static var name: String { get }
    /// What the backend is, for `help`.
    static var summary: String { get }
}

extension BackendKey {
    /// This backend as `help` and `fault` list it.
    static var description: Backend { Backend(name, summary: summary) }

    /// Whether `services` holds this backend's value (or the key has a default).
    static func isProvided(in services: Services) -> Bool { services.contains(Self.self) }
}

/// A backend was called but the server's ``Services`` lack it — a wiring mistake a
/// server refuses to start with. The command fails with `internal_error` and the
/// session's log names the backend; nothing crashes.
public struct MissingBackend: Error, CustomStringConvertible {
    /// The backend's ``BackendKey/name``.
    public let name: String

    public var description: String { "no service for the backend \"\(name)\": provide it in the server's Services" }
}
