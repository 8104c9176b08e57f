import Foundation
import ViewlineKit

/// Where the list is kept. The server saves to a JSON file; tests pass a fake.
public protocol TodoStore: Sendable {
    func save(_ items: [Todo]) async throws
}

/// Writes the list to a JSON file, atomically.
public struct TodoFile: TodoStore {
    public let path: String

    public init(path: String) { self.path = path }

    public func save(_ items: [Todo]) async throws {
        let data = Data(JSON.array(try items.map { try JSON(encoding: $0) }).encoded.utf8)
        try data.write(to: URL(fileURLWithPath: path), options: .atomic)
    }
}

/// The backend ``Todos`` saves through: its value in ``Services``, the name
/// `fault todo-store` breaks, and what `help` says of it.
public enum TodoStoreKey: BackendKey {
    public typealias Value = any TodoStore
    public static let name = "todo-store"
    public static let summary = "where the list is saved"
}

extension Services {
    /// Where ``Todos`` saves the list.
    public var todoStore: any TodoStore {
        get { self[TodoStoreKey.self] }
        set { self[TodoStoreKey.self] = newValue }
    }
}
